"""Where this deployment runs, and whether a resident process can live there.

Persistent hosts run `drain_outbox` as a loop; serverless hosts have no process between
requests and drain from a cron. The page states which one this is, so detection is a fact
read from the host's own environment variables, never a guess from the code path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True)
class Platform:
    id: str
    name: str
    persistent: bool


PLATFORMS = {
    p.id: p
    for p in (
        Platform(id="vercel", name="Vercel", persistent=False),
        Platform(id="fly", name="Fly.io", persistent=True),
        Platform(id="railway", name="Railway", persistent=True),
        Platform(id="container", name="Container", persistent=True),
    )
}

# The variable each host sets in every process it runs, checked in this order.
_MARKERS = (
    ("VERCEL", "vercel"),
    ("FLY_APP_NAME", "fly"),
    ("RAILWAY_ENVIRONMENT", "railway"),
)


def detect(*, environ: Mapping[str, str], override: str = "") -> Platform:
    """Return the platform named by override, else the one whose marker is set."""
    if override:
        try:
            return PLATFORMS[override]
        except KeyError:
            known = ", ".join(PLATFORMS)
            raise ValueError(f"V10R_PLATFORM={override!r} is not one of: {known}.") from None
    for variable, platform_id in _MARKERS:
        if environ.get(variable):
            return PLATFORMS[platform_id]
    return PLATFORMS["container"]


def current() -> Platform:
    """Return this deployment's platform."""
    return detect(environ=os.environ, override=settings.V10R_PLATFORM)
