from __future__ import annotations

from datetime import timedelta

from django.db import connection

from v10r import ratelimit


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
