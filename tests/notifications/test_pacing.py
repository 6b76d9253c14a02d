"""notifications.pacing: the drains' shared slots in notifications.provider_rates, reserved on
the database's clock, one statement at a time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from notifications import checks, pacing
from notifications.models import ProviderRate
from tests.helpers import next_slot
from tests.v10r.test_settings import read_settings
from transports import http
from transports.base import Pace
from transports.discord import DiscordChannel
from transports.email import EmailChannel
from transports.telegram import TelegramChannel
from v10r.environment import SettingError


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
    reserved = next_slot("k")
    pacing.hold("k", seconds=1)  # shorter than what is already reserved: no change
    assert next_slot("k") == reserved


def test_concurrent_drains_never_share_a_slot(transactional_db):
    """Eight threads, each on its own connection, reserve at once; had two of them read the
    same next_slot_at, they would have been handed the same slots."""
    # Slower than the test runs: the key's clock stays ahead of now throughout, so every
    # reservation follows on from the one before. A second apart, so that where this process
    # places a slot on its own clock (within milliseconds) cannot blur two into one.
    rate, rounds = 1.0, 25
    granted: list[int] = []
    slots: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def drain() -> None:
        try:
            start.wait()
            for _ in range(rounds):
                got = pacing.reserve("shared", rate=rate, count=3, horizon=3600)
                with lock:
                    granted.append(len(got.starts))
                    slots.extend(got.now_at + start for start in got.starts)
        finally:
            connection.close()

    pacing.reserve("shared", rate=rate, count=1, horizon=3600)  # the row exists: see RESERVE_SQL
    before = next_slot("shared")
    threads = [threading.Thread(target=drain) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 8 * rounds * 3
    assert next_slot("shared") - before == pytest.approx(sum(granted) / rate, abs=0.001)
    # Every slot handed out is one interval after the one before it, whoever was given it:
    # none shared, none overlapping.
    slots.sort()
    gaps = [later - earlier for earlier, later in zip(slots, slots[1:], strict=False)]
    assert gaps == pytest.approx([1 / rate] * (len(slots) - 1), abs=0.25)


def test_drains_first_using_a_key_at_once_are_each_granted_their_slots(transactional_db):
    """Two first reservations of a key racing to insert its row could not say what the loser
    was granted (it would get none); the row is made first, so every one is granted."""
    barrier = threading.Barrier(8)
    granted: list[int] = []

    def drain() -> None:
        try:
            barrier.wait()
            granted.append(len(pacing.reserve("first-use", rate=10, count=3, horizon=600).starts))
        finally:
            connection.close()

    threads = [threading.Thread(target=drain) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert granted == [3] * 8


@pytest.mark.parametrize(
    ("key", "rate"), [("", 1.0), ("x" * 201, 1.0), ("k", 0.0), ("k", float("inf"))]
)
def test_reserve_refuses_a_bad_key_or_rate(db, key, rate):
    with pytest.raises(ValueError):
        pacing.reserve(key, rate=rate, count=1)


def test_hold_refuses_a_negative_pause(db):
    with pytest.raises(ValueError):
        pacing.hold("k", seconds=-1)


def test_each_bot_is_a_budget_of_its_own_named_without_its_token(settings):
    one = TelegramChannel(token="111:first-secret").pace()
    two = TelegramChannel(token="222:second-secret").pace()
    assert one.rate == 30.0 and one.key.startswith("telegram:")
    assert one.key != two.key
    assert "secret" not in one.key and "111" not in one.key
    assert DiscordChannel(token="111:first-secret").pace().rate == 25.0
    # A channel without a token sends nothing; email and webhooks are unpaced by default.
    assert TelegramChannel(token="").pace() is None
    assert EmailChannel().pace() is None
    settings.DELIVERY_PROVIDER_RATES = {**settings.DELIVERY_PROVIDER_RATES, "telegram": 0}
    assert TelegramChannel(token="111:first-secret").pace() is None
    settings.DELIVERY_PROVIDER_RATES = {**settings.DELIVERY_PROVIDER_RATES, "email": 2.5}
    assert EmailChannel().pace() == Pace(key="email", rate=2.5)


def test_the_rates_are_read_once_from_the_environment_within_bounds(monkeypatch):
    read = read_settings(monkeypatch, DELIVERY_RATE_TELEGRAM="12.5", DELIVERY_RATE_WEBHOOK="3")
    assert read["DELIVERY_PROVIDER_RATES"] == {
        "telegram": 12.5,
        "discord": 25.0,
        "email": 0.0,
        "webhook": 3.0,
    }
    with pytest.raises(SettingError, match="^DELIVERY_RATE_DISCORD='-1' must be at least 0"):
        read_settings(monkeypatch, DELIVERY_RATE_DISCORD="-1")
    with pytest.raises(SettingError, match="^DELIVERY_RATE_TELEGRAM='fast' is not a number"):
        read_settings(monkeypatch, DELIVERY_RATE_TELEGRAM="fast")


@pytest.mark.parametrize(
    ("status", "headers", "body", "throttled", "wait"),
    [
        (429, {"Retry-After": "3"}, b"", True, 3),
        # Telegram's own field, and Discord's, when there is no header.
        (429, {}, b'{"ok": false, "parameters": {"retry_after": 7}}', True, 7),
        (429, {}, b'{"message": "rate limited", "retry_after": 2.5}', True, 2.5),
        # A 503's Retry-After is the server's own trouble, not our rate.
        (503, {"Retry-After": "4"}, b"", False, 4),
    ],
)
def test_only_a_429_is_throttled(status, headers, body, throttled, wait):
    response = http.Response(
        status=status, reason="", headers=headers, body=body, complete=True, seconds=0.01
    )
    error = http.classify(response, peer=http.Peer.TELEGRAM, now=datetime.now(UTC))
    assert (error.throttled, error.retryable) == (throttled, True)
    assert error.retry_after.total_seconds() == wait


def test_the_database_clock_is_read_through_the_tightest_round_trip():
    clock = pacing._DatabaseClock()
    # The database's clock stands 1000 s ahead of this monotonic clock. A first answer that
    # took 80 ms says little: the database read its clock at 10.01, the estimate is the
    # middle of the round trip.
    assert clock.sample(sent=10.0, answered=10.08, database_now=1010.01) == pytest.approx(10.04)
    # A 2 ms round trip pins it down...
    assert clock.sample(sent=11.0, answered=11.002, database_now=1011.001) == pytest.approx(
        11.001, abs=0.0005
    )
    # ...and an answer that came 60 ms late no longer makes this drain's slots late.
    assert clock.sample(sent=12.0, answered=12.06, database_now=1012.0005) == pytest.approx(
        12.0005, abs=0.002
    )


def test_a_paced_channel_lengthens_the_batch_the_lease_must_outlast_by_the_horizon(settings):
    settings.DELIVERY_PROVIDER_RATES = {}
    unpaced = checks.worst_case_batch(batch_size=25, concurrency=16)
    settings.DELIVERY_PROVIDER_RATES = {"email": 2.5}
    paced = checks.worst_case_batch(batch_size=25, concurrency=16)
    assert paced - unpaced == timedelta(seconds=pacing.HORIZON)


def test_a_batchs_paced_sends_come_before_its_unpaced_ones(db):
    # Senders take the batch in this order: a paced send behind slow unpaced ones would start
    # after its slot, and the slot is every drain's.
    items = ["plain-1", "paced-1", "plain-2", "paced-2"]
    timed, refused = pacing.schedule(
        items,
        pace_of=lambda item: Pace(key="test:order", rate=100.0) if "paced" in item else None,
        horizon=pacing.HORIZON,
    )
    assert refused == []
    assert [item for item, _start, _key in timed] == ["paced-1", "paced-2", "plain-1", "plain-2"]
    assert [key for _item, _start, key in timed] == ["test:order", "test:order", None, None]
