"""Deleting what the site leaves behind, a bounded amount at a time.

Each delete function takes at most BATCH rows a call; repeat() calls it at most ROUNDS times,
so one run never holds many row locks or writes a burst of WAL, and one kind failing stops
neither the others nor the job that deletes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError

logger = logging.getLogger("housekeeping")

ROUNDS = 10
BATCH = 1000


def repeat(what: str, delete: Callable[[], int]) -> int:
    """Call delete until it deletes fewer than BATCH rows, at most ROUNDS times; return the
    total. A DatabaseError is logged (naming what) and ends this kind's run, not the caller's."""
    total = 0
    try:
        for _ in range(ROUNDS):
            deleted = delete()
            total += deleted
            if deleted < BATCH:
                break
    except DatabaseError:
        # Logged, and the caller goes on to the next kind: a database that is really gone
        # fails the caller's next statement anyway.
        logger.exception("housekeeping: deleting %s failed", what)
    return total
