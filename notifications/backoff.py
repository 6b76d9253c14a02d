"""Retry arithmetic: pure functions of numbers, no clock and no database.

One growing wait (geometric) serves every retry in the queue: a failed send's, whose delay
the database applies (`now() + interval`) so a skewed app server cannot move the queue, and
the drain loop's own while the database is gone (notifications/worker.py). This module only
says how long.
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


def geometric(*, attempt: int, first: timedelta, factor: int, longest: timedelta) -> timedelta:
    """Return the wait after the attempt-th failure in a row (1-based): first, multiplied by
    factor for each failure before this one, and never more than longest."""
    if attempt < 1:
        raise ValueError(f"attempt must be 1 or more, not {attempt}")
    if first <= timedelta(0) or factor < 2:
        # Either would never reach longest, and the loop below relies on reaching it.
        raise ValueError(f"a wait must grow: first {first} and factor {factor}")
    wait = first
    # Multiplied only while short of longest, so a failure count in the thousands (a database
    # down for a day) costs a few steps and can never overflow a timedelta.
    for _ in range(attempt - 1):
        if wait >= longest:
            break
        wait *= factor
    return min(wait, longest)


def base_delay(*, attempt: int) -> timedelta:
    """Return the un-jittered wait after the attempt-th failed send (1-based)."""
    return geometric(attempt=attempt, first=FIRST_DELAY, factor=FACTOR, longest=LONGEST_DELAY)


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
