"""notifications.pacing: the drains' shared slots in notifications.provider_rates, reserved on
the database's clock, one statement at a time."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from notifications import pacing
from notifications.models import ProviderRate


def next_slot(key: str) -> float:
    """The key's next slot, as seconds since the epoch."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM next_slot_at) FROM notifications.provider_rates"
            " WHERE key = %s",
            [key],
        )
        return float(cursor.fetchone()[0])


def seconds_until_next_slot(key: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM next_slot_at - clock_timestamp())"
            " FROM notifications.provider_rates WHERE key = %s",
            [key],
        )
        return float(cursor.fetchone()[0])


def test_a_new_key_grants_slots_one_interval_apart_from_now(db):
    got = pacing.reserve("telegram:abc", rate=10, count=5)
    assert got.starts == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4], abs=0.02)
    assert got.next_free == pytest.approx(0.5, abs=0.02)
    # The next batch's slots follow on, whoever reserves them.
    after = pacing.reserve("telegram:abc", rate=10, count=2)
    assert after.starts == pytest.approx([0.5, 0.6], abs=0.05)
    assert ProviderRate.objects.get().key == "telegram:abc"


def test_no_slot_is_granted_past_the_horizon(db):
    got = pacing.reserve("k", rate=10, count=50, horizon=1.0)
    assert len(got.starts) == 11  # 0.0, 0.1, … 1.0
    assert max(got.starts) <= 1.0
    assert got.next_free == pytest.approx(1.1, abs=0.02)
    # The key is spoken for beyond the horizon now: a second batch gets only what is left.
    again = pacing.reserve("k", rate=10, count=50, horizon=1.0)
    assert len(again.starts) <= 1
    assert pacing.reserve("k", rate=10, count=5, horizon=0.5).starts == []


def test_an_idle_key_starts_again_at_its_rate_with_no_burst(db):
    ProviderRate.objects.create(key="k")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE notifications.provider_rates SET next_slot_at = now() - interval '1 hour'"
        )
    got = pacing.reserve("k", rate=4, count=3)
    assert got.starts == pytest.approx([0.0, 0.25, 0.5], abs=0.02)


def test_two_keys_are_two_budgets(db):
    pacing.reserve("telegram:one", rate=1, count=1)
    assert pacing.reserve("telegram:two", rate=1, count=1).starts == pytest.approx([0], abs=0.02)
    assert pacing.reserve("telegram:one", rate=1, count=1).starts == pytest.approx([1], abs=0.05)


def test_a_hold_delays_every_later_slot_and_never_pulls_one_earlier(db):
    until = pacing.hold("k", seconds=3)
    assert until == pytest.approx(3, abs=0.05)
    assert pacing.reserve("k", rate=10, count=1, horizon=5).starts == pytest.approx([3], abs=0.05)
    pacing.hold("k", seconds=1)  # shorter than what is already reserved: no change
    assert seconds_until_next_slot("k") == pytest.approx(3.1, abs=0.05)


def test_concurrent_drains_never_share_a_slot(transactional_db):
    """Eight threads, each on its own connection, reserve at once; had two of them read the
    same next_slot_at, the key's clock would have moved less than the slots handed out."""
    # Slower than the test runs: the key's clock stays ahead of now throughout, so it moves
    # by exactly the slots granted.
    rate, rounds = 10.0, 25
    granted: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def drain() -> None:
        try:
            start.wait()
            for _ in range(rounds):
                got = pacing.reserve("shared", rate=rate, count=3, horizon=600)
                with lock:
                    granted.append(len(got.starts))
        finally:
            connection.close()

    pacing.reserve("shared", rate=rate, count=1, horizon=600)  # the row exists: see RESERVE_SQL
    before = next_slot("shared")
    threads = [threading.Thread(target=drain) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 8 * rounds * 3
    assert next_slot("shared") - before == pytest.approx(sum(granted) / rate, abs=0.001)


@pytest.mark.parametrize(
    ("key", "rate"), [("", 1.0), ("x" * 201, 1.0), ("k", 0.0), ("k", float("inf"))]
)
def test_reserve_refuses_a_bad_key_or_rate(db, key, rate):
    with pytest.raises(ValueError):
        pacing.reserve(key, rate=rate, count=1)


def test_hold_refuses_a_negative_pause(db):
    with pytest.raises(ValueError):
        pacing.hold("k", seconds=-1)
