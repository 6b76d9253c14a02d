"""Retry arithmetic for the outbox: pure functions of numbers, no clock and no database.

The delay is applied by the database (`now() + interval`) so a skewed app server cannot move
the queue; this module only says how long.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

FIRST_DELAY = timedelta(seconds=30)
FACTOR = 4
LONGEST_DELAY = timedelta(hours=1)
JITTER = 0.15
MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class Decision:
    """What to do with a delivery after a send: its next status, and for `pending` the wait."""

    status: str
    delay: timedelta | None = None


def base_delay(*, attempt: int) -> timedelta:
    """Return the un-jittered wait after the attempt-th failed send (1-based)."""
    if attempt < 1:
        raise ValueError(f"attempt must be 1 or more, not {attempt}")
    # Grow geometrically, but stop before the exponent makes a needlessly huge number.
    exponent = min(attempt - 1, 16)
    return min(FIRST_DELAY * FACTOR**exponent, LONGEST_DELAY)


def delay(*, attempt: int, random: Callable[[], float] = _random.random) -> timedelta:
    """Return the wait after the attempt-th failed send, ±15 % jitter.

    Jitter is applied after the clamp, so retries that have all reached the one-hour ceiling
    still spread out instead of arriving together.
    """
    factor = 1 + JITTER * (2 * random() - 1)
    return base_delay(attempt=attempt) * factor


def decide(
    *,
    attempts: int,
    retryable: bool,
    max_attempts: int = MAX_ATTEMPTS,
    retry_after: timedelta | None = None,
    random: Callable[[], float] = _random.random,
) -> Decision:
    """Decide a failed send's fate from the sends spent so far (this one included).

    Not retryable: `failed`, terminal. Retryable with budget left: `pending` after a delay
    (never shorter than the provider's Retry-After, capped at the longest delay). Retryable
    with the budget spent: `dead`, for a human to look at.
    """
    if not retryable:
        return Decision(status="failed")
    if attempts >= max_attempts:
        return Decision(status="dead")
    wait = delay(attempt=attempts, random=random)
    if retry_after is not None:
        wait = max(wait, min(retry_after, LONGEST_DELAY))
    return Decision(status="pending", delay=wait)


def curve(*, max_attempts: int = MAX_ATTEMPTS) -> list[timedelta]:
    """Return the un-jittered waits between the sends of one budget."""
    return [base_delay(attempt=n) for n in range(1, max_attempts)]
