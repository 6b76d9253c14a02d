"""The claim's lanes (DELIVERY_LANES): each pending delivery waits on one, and a claim takes
the lanes in rank order, so a backlog on a lower lane never holds up a higher one.

A lane's cap bounds how many of its rows one batch may take: a lane of slow sends (the
showcase's, which the settings add with it) is capped at one round of them, so the batch after
it, and every row of a higher lane in it, is not held up by them. An uncapped lane takes what
the higher lanes left.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from notifications.models import DEFAULT_LANE

# Lane names are written into the claim's SQL as literals, so they are held to this.
NAME = re.compile(r"[a-z0-9_-]{1,32}")
MAX_LANES = 16


@dataclass(frozen=True)
class Lane:
    name: str
    rank: int  # lower is claimed first
    cap: int | None = None  # at most this many rows of the lane per batch; None: no cap


def parse(lanes: Mapping[str, Mapping[str, Any]]) -> tuple[Lane, ...]:
    """The lanes of a DELIVERY_LANES mapping, in claim order (by rank)."""
    found = [Lane(name, spec["rank"], spec.get("cap")) for name, spec in lanes.items()]
    return tuple(sorted(found, key=lambda lane: lane.rank))


def configured() -> tuple[Lane, ...]:
    """This site's lanes, in claim order."""
    return parse(settings.DELIVERY_LANES)


def names() -> list[str]:
    return [lane.name for lane in configured()]


# The kinds of problem (notifications/checks.py gives each a system check id of its own).
NOT_A_MAPPING, BAD_NAME, BAD_RANK, BAD_CAP, TOO_MANY, NO_DEFAULT = (
    "not a mapping",
    "bad name",
    "bad rank",
    "bad cap",
    "too many",
    "no default",
)


def problems(lanes: Any) -> list[tuple[str, str]]:
    """What is wrong with a DELIVERY_LANES value: (kind, in words) each; empty: nothing."""
    if not isinstance(lanes, Mapping) or not lanes:
        return [
            (NOT_A_MAPPING, "DELIVERY_LANES must be a non-empty mapping of name to {rank, cap}.")
        ]
    found = []
    if len(lanes) > MAX_LANES:
        found.append((TOO_MANY, f"DELIVERY_LANES has {len(lanes)} lanes; at most {MAX_LANES}."))
    if DEFAULT_LANE not in lanes:
        found.append((NO_DEFAULT, f"DELIVERY_LANES has no {DEFAULT_LANE!r} lane (the default)."))
    ranks: dict[int, str] = {}
    for name, spec in lanes.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            found.append((BAD_NAME, f"Lane {name!r}: a name is 1 to 32 of a-z, 0-9, _ and -."))
        if not isinstance(spec, Mapping) or "rank" not in spec or set(spec) - {"rank", "cap"}:
            found.append((NOT_A_MAPPING, f"Lane {name!r} must be {{'rank': int, 'cap': int}}."))
            continue
        rank, cap = spec["rank"], spec.get("cap")
        if not _whole(rank):
            found.append((BAD_RANK, f"Lane {name!r}: rank {rank!r} is not a whole number."))
        elif rank in ranks:
            found.append((BAD_RANK, f"Lanes {ranks[rank]!r} and {name!r} share rank {rank}."))
        else:
            ranks[rank] = name
        if cap is not None and not (_whole(cap) and cap >= 1):
            found.append((BAD_CAP, f"Lane {name!r}: cap {cap!r} is neither None nor at least 1."))
    return found


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
