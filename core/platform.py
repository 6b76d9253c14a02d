"""Where this deployment runs, and whether a resident process can live there.

Persistent hosts run `drain_outbox` as a loop; serverless hosts have no process between
requests and drain from a cron. The page states which one this is, so detection is a fact
read from the host's own environment variables (and, for a container, the files container
engines leave), never a guess from the code path. A host with none of these marks is a
machine of its own (a server, a virtual machine, a developer's laptop), not a container.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings


@dataclass(frozen=True)
class Platform:
    id: str
    # The product's name ("Fly.io"); empty for the two that are no product, a container and a
    # machine of one's own, which pages describe in their own words.
    name: str
    persistent: bool


PLATFORMS = {
    p.id: p
    for p in (
        Platform(id="vercel", name="Vercel", persistent=False),
        Platform(id="fly", name="Fly.io", persistent=True),
        Platform(id="railway", name="Railway", persistent=True),
        Platform(id="container", name="", persistent=True),
        # Anything else that keeps processes alive: a server, a virtual machine, a laptop.
        Platform(id="machine", name="", persistent=True),
    )
}

# The variable each host sets in every process it runs, checked in this order.
_MARKERS = (
    ("VERCEL", "vercel"),
    ("FLY_APP_NAME", "fly"),
    ("RAILWAY_ENVIRONMENT", "railway"),
)
# What container engines leave in every container: Docker's /.dockerenv, Podman's
# /run/.containerenv and its `container` variable (systemd-nspawn sets that too), and the
# variable Kubernetes gives every pod.
_CONTAINER_FILES = (".dockerenv", "run/.containerenv")
_CONTAINER_VARIABLES = ("container", "KUBERNETES_SERVICE_HOST")


def in_container(*, environ: Mapping[str, str], root: Path = Path("/")) -> bool:
    """Whether this process runs in a container, by the marks the engines leave."""
    if any(environ.get(variable) for variable in _CONTAINER_VARIABLES):
        return True
    return any((root / name).exists() for name in _CONTAINER_FILES)


def detect(*, environ: Mapping[str, str], override: str = "", container: bool = False) -> Platform:
    """Return the platform named by override, else the one whose marker is set, else a
    container when container says so, else a machine of its own."""
    if override:
        try:
            return PLATFORMS[override]
        except KeyError:
            known = ", ".join(PLATFORMS)
            raise ValueError(f"V10R_PLATFORM={override!r} is not one of: {known}.") from None
    for variable, platform_id in _MARKERS:
        if environ.get(variable):
            return PLATFORMS[platform_id]
    return PLATFORMS["container" if container else "machine"]


def current() -> Platform:
    """Return this deployment's platform."""
    return detect(
        environ=os.environ,
        override=settings.V10R_PLATFORM,
        container=in_container(environ=os.environ),
    )
