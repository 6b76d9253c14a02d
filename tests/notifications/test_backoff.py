from __future__ import annotations

from datetime import timedelta

import pytest

from notifications import backoff


def fixed(value: float):
    return lambda: value


@pytest.mark.parametrize(
    ("attempt", "seconds"),
    [
        (1, 30),  # 30 × 4⁰
        (2, 120),  # 30 × 4¹ = 2 m
        (3, 480),  # 30 × 4² = 8 m
        (4, 1920),  # 30 × 4³ = 32 m
        (5, 3600),  # 30 × 4⁴ = 7680 s, clamped to 1 h
        (40, 3600),  # far past the clamp, no overflow
    ],
)
def test_the_base_curve_multiplies_by_four_and_stops_at_an_hour(attempt, seconds):
    assert backoff.base_delay(attempt=attempt) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("attempt", "random", "seconds"),
    [
        (1, 0.0, 25.5),  # 30 × (1 − 0.15)
        (1, 0.5, 30.0),  # 30 × 1
        (1, 1.0, 34.5),  # 30 × (1 + 0.15)
        (2, 0.25, 111.0),  # 120 × (1 − 0.075)
        (5, 1.0, 4140.0),  # the clamp first (3600), then +15 %: jitter survives the clamp
        (5, 0.0, 3060.0),  # 3600 × 0.85
    ],
)
def test_jitter_is_fifteen_percent_either_way(attempt, random, seconds):
    assert backoff.delay(attempt=attempt, random=fixed(random)) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("attempts", "retryable", "retry_after", "expected"),
    [
        (1, False, None, backoff.Decision("failed")),  # not retryable: terminal at once
        (5, False, None, backoff.Decision("failed")),  # …whatever the budget
        (1, True, None, backoff.Decision("pending", timedelta(seconds=30))),
        (4, True, None, backoff.Decision("pending", timedelta(seconds=1920))),
        (5, True, None, backoff.Decision("dead")),  # the 5th send failed: budget spent
        (9, True, None, backoff.Decision("dead")),
        # Retry-After longer than the backoff wins; shorter does not; it is capped at 1 h.
        (1, True, timedelta(seconds=90), backoff.Decision("pending", timedelta(seconds=90))),
        (2, True, timedelta(seconds=5), backoff.Decision("pending", timedelta(seconds=120))),
        (1, True, timedelta(days=2), backoff.Decision("pending", timedelta(hours=1))),
    ],
)
def test_decide(attempts, retryable, retry_after, expected):
    decision = backoff.decide(
        attempts=attempts, retryable=retryable, retry_after=retry_after, random=fixed(0.5)
    )
    assert decision == expected


def test_the_budget_is_configurable():
    assert backoff.decide(attempts=2, retryable=True, max_attempts=2).status == "dead"
    assert backoff.decide(attempts=2, retryable=True, max_attempts=3).status == "pending"


def test_the_curve_lists_the_waits_between_the_five_sends():
    assert backoff.curve() == [
        timedelta(seconds=30),
        timedelta(minutes=2),
        timedelta(minutes=8),
        timedelta(minutes=32),
    ]


def test_attempts_start_at_one():
    with pytest.raises(ValueError, match="attempt must be 1 or more"):
        backoff.base_delay(attempt=0)


@pytest.mark.parametrize(
    ("attempt", "first", "factor", "longest", "seconds"),
    [
        (1, 1, 2, 60, 1),  # 1 × 2⁰
        (3, 1, 2, 60, 4),  # 1 × 2²
        (7, 1, 2, 60, 60),  # 1 × 2⁶ = 64, clamped to 60
        (100_000, 1, 2, 60, 60),  # a day of failures: a few steps, no overflow
        (1, 1, 2, 0.1, 0.1),  # longest shorter than first: longest from the start
        (2, 30, 4, 3600, 120),  # the send curve's second wait: 30 × 4¹
    ],
)
def test_a_geometric_wait_multiplies_by_its_factor_and_stops_at_its_longest(
    attempt, first, factor, longest, seconds
):
    wait = backoff.geometric(
        attempt=attempt,
        first=timedelta(seconds=first),
        factor=factor,
        longest=timedelta(seconds=longest),
    )
    assert wait == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("attempt", "first", "factor", "message"),
    [
        (0, 1, 2, "attempt must be 1 or more"),
        (1, 0, 2, "a wait must grow"),  # zero never grows
        (1, 1, 1, "a wait must grow"),  # a factor of one never grows either
    ],
)
def test_a_geometric_wait_refuses_what_would_never_grow(attempt, first, factor, message):
    with pytest.raises(ValueError, match=message):
        backoff.geometric(
            attempt=attempt,
            first=timedelta(seconds=first),
            factor=factor,
            longest=timedelta(minutes=1),
        )
