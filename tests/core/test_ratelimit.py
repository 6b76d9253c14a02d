from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from core import ratelimit


def test_hits_are_allowed_up_to_the_limit_then_refused_until_the_window_restarts(db):
    window = timedelta(seconds=60)
    verdicts = [ratelimit.hit(key="k", limit=3, window=window) for _ in range(4)]
    assert [v.allowed for v in verdicts] == [True, True, True, False]
    assert verdicts[-1].hits == 4
    assert verdicts[-1].retry_after_seconds == 60  # now() is fixed inside the test transaction

    # 61 s later, by the database clock, the window starts again.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE v10r_rate_limit_windows SET window_start = now() - interval '61 seconds'"
        )
    again = ratelimit.hit(key="k", limit=3, window=window)
    assert (again.allowed, again.hits) == (True, 1)


def test_keys_are_counted_apart(db):
    window = timedelta(seconds=60)
    assert ratelimit.hit(key="a", limit=1, window=window).allowed
    assert ratelimit.hit(key="b", limit=1, window=window).allowed
    assert not ratelimit.hit(key="a", limit=1, window=window).allowed


def test_a_forgiven_hit_no_longer_counts(db):
    window = timedelta(seconds=60)
    ratelimit.hit(key="f", limit=2, window=window)
    ratelimit.hit(key="f", limit=2, window=window)
    ratelimit.forgive(key="f")
    verdict = ratelimit.hit(key="f", limit=2, window=window)
    assert (verdict.allowed, verdict.hits) == (True, 2)
    assert not ratelimit.hit(key="f", limit=2, window=window).allowed
    for _ in range(5):
        ratelimit.forgive(key="f")  # never below zero
    assert ratelimit.hit(key="f", limit=2, window=window).hits == 1
    ratelimit.forgive(key="never-hit")  # nothing to forgive: nothing happens


def test_prune_deletes_only_windows_older_than_asked_a_bounded_number_at_a_time(db):
    for i in range(5):
        ratelimit.hit(key=f"old{i}", limit=1, window=timedelta(seconds=60))
    ratelimit.hit(key="fresh", limit=1, window=timedelta(seconds=60))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE v10r_rate_limit_windows SET window_start = now() - interval '2 hours' "
            "WHERE key LIKE 'old%%'"
        )
    assert ratelimit.prune(older_than=timedelta(hours=1), limit=3) == 3
    assert ratelimit.prune(older_than=timedelta(hours=1), limit=3) == 2
    assert ratelimit.prune(older_than=timedelta(hours=1), limit=3) == 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT key FROM v10r_rate_limit_windows")
        assert cursor.fetchall() == [("fresh",)]


def test_a_weighted_hit_counts_its_cost_and_is_refused_once_the_limit_is_passed(db):
    window = timedelta(seconds=60)
    assert ratelimit.hit(key="w", limit=100, window=window, cost=60).hits == 60
    over = ratelimit.hit(key="w", limit=100, window=window, cost=41)
    assert (over.allowed, over.hits) == (False, 101)
    ratelimit.forgive(key="w", cost=41)
    exact = ratelimit.hit(key="w", limit=100, window=window, cost=40)
    assert (exact.allowed, exact.hits) == (True, 100)
    # An ordinary hit beside weighted ones still counts one.
    assert ratelimit.hit(key="w", limit=100, window=window).hits == 101
    ratelimit.forgive(key="w", cost=1000)  # never below zero
    assert ratelimit.hit(key="w", limit=100, window=window).hits == 1


def test_a_window_that_restarts_on_a_weighted_hit_starts_from_its_cost(db):
    window = timedelta(seconds=60)
    ratelimit.hit(key="r", limit=100, window=window, cost=90)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE v10r_rate_limit_windows SET window_start = now() - interval '61 seconds'"
        )
    again = ratelimit.hit(key="r", limit=100, window=window, cost=30)
    assert (again.allowed, again.hits) == (True, 30)


def test_a_hit_must_cost_something(db):
    for cost in (0, -5):
        with pytest.raises(ValueError, match="at least 1"):
            ratelimit.hit(key="z", limit=10, window=timedelta(seconds=60), cost=cost)
