"""Pacing in the drain: paced sends wait for their slots, the rows past the horizon go back
unspent, the deadline counts the wait, and a provider's 429 pauses every drain; through a
loopback Telegram that allows 30 sends a second, and one that allows none."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection

import transports as channels
from notifications import pacing, worker
from notifications.models import NotificationDelivery, ProviderRate, Status
from recipients.models import ChannelAddress
from tests.helpers import (
    channels_env,
    counts,
    database_clock,
    database_url,
    make_deliveries,
    next_slot,
    poll,
    start_drain,
    stop,
)
from tests.notifications.channels import Recorder
from tests.ratepeer import RateLimitedTelegram
from transports.base import ChannelError, Outgoing, SendResult

TOKEN = "123456:pacing-token"
SHIPPED_LATE = pacing.LATE  # before the paced fixture widens it


class TimedChannel(Recorder):
    """Sends at once, and records when each send started."""

    name = "timed"

    def send(self, outgoing: Outgoing) -> SendResult:
        self.record(time.monotonic())
        return SendResult(provider_message_id=f"timed-{outgoing.delivery_id}")


class ThrottlingChannel(TimedChannel):
    """A provider past its rate: every send is a 429 asking for three seconds' pause."""

    name = "throttling"

    def send(self, outgoing: Outgoing) -> SendResult:
        super().send(outgoing)
        raise ChannelError(
            "HTTP_429",
            "429 Too Many Requests",
            retryable=True,
            retry_after=timedelta(seconds=3),
            throttled=True,
        )


class SlowChannel(TimedChannel):
    """Each send takes a fifth of a second."""

    name = "slow_timed"

    def send(self, outgoing: Outgoing) -> SendResult:
        result = super().send(outgoing)
        time.sleep(0.2)
        return result


@pytest.fixture
def paced(settings, monkeypatch):
    """The channels above registered, and paced at the rates the test sets. A sender thread
    on a busy machine may wake more than pacing.LATE after its slot and give the row back;
    these tests count rows exactly, so they allow a second, but for the one about LATE."""
    monkeypatch.setattr(pacing, "LATE", 1.0)
    settings.DELIVERY_CHANNELS = {
        **settings.DELIVERY_CHANNELS,
        **{
            c.name: f"{__name__}.{c.__qualname__}"
            for c in (TimedChannel, ThrottlingChannel, SlowChannel)
        },
    }
    for channel in (TimedChannel, ThrottlingChannel, SlowChannel):
        channel.reset()
    settings.DELIVERY_PROVIDER_RATES = {}
    yield settings.DELIVERY_PROVIDER_RATES


def test_a_paced_channel_starts_its_sends_its_rate_apart(db, user, paced):
    paced["timed"] = 20.0
    make_deliveries(user, 10, channel="timed")
    began = time.monotonic()
    report = worker.drain_once(batch_size=10, concurrency=16)
    assert report.sent == 10
    # 16 sender threads were free to send all ten at once; none started before its slot,
    # 1/19 s apart (1/20 with pacing.HEADROOM) from the drain's reservation on.
    late = [at - began - i / 19 for i, at in enumerate(sorted(TimedChannel.seen))]
    assert min(late) >= 0, late
    assert ProviderRate.objects.get().key == "timed"


def test_rows_past_the_horizon_go_back_for_later_with_no_send_spent(db, user, paced):
    paced["timed"] = 5.0
    ids = make_deliveries(user, 25, channel="timed")
    report = worker.drain_once(batch_size=25)
    # Slots 1/(5 × HEADROOM) = 0.21 s apart from 0: twenty within the four seconds' horizon.
    assert (report.sent, report.released) == (20, 5)
    back = NotificationDelivery.objects.filter(pk__in=ids, status=Status.PENDING)
    assert back.count() == 5
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT min(extract(epoch FROM next_attempt_at - now())), bool_and(attempts ="
            " attempt_base) FROM notifications.notification_deliveries WHERE status = 'pending'"
        )
        wait, unspent = cursor.fetchone()
    # Due again about when the key's next slot comes (4.2 s on), their claim not counted.
    assert 3.7 < wait < 4.7 and unspent


def test_a_batch_booked_out_entirely_waits_for_a_slot_before_claiming_again(db, user, paced):
    paced["timed"] = 10.0
    pacing.hold("timed", seconds=pacing.HORIZON + 1)  # other drains took every slot till then
    make_deliveries(user, 3, channel="timed")
    began = time.monotonic()
    report = worker.drain_once(batch_size=3)
    assert (report.sent, report.released) == (0, 3)
    # Claiming again at once would only hand the next rows back too: the drain waited until
    # a reservation could be granted again, a second later.
    assert time.monotonic() - began >= 0.9


def test_a_send_that_cannot_start_on_time_for_its_slot_is_given_back(db, user, paced):
    """One sender (concurrency 1) and sends of 0.2 s, at 20 a second: by the time the first
    is done, the next two slots are long past. Sent late, they would reach the provider
    together with the sends of the slots after them; they go back to the queue instead."""
    paced["slow_timed"] = 20.0
    pacing.LATE = SHIPPED_LATE  # monkeypatch restores the real one afterwards
    make_deliveries(user, 3, channel="slow_timed")
    report = worker.drain_once(batch_size=3, concurrency=1)
    assert (report.sent, report.released) == (1, 2)
    assert len(SlowChannel.seen) == 1


def test_the_deadline_counts_the_wait_for_a_slot(db, user, paced):
    paced["timed"] = 2.0
    make_deliveries(user, 6, channel="timed")
    # Slots at 0, 0.53, 1.05 and 1.58 s fit in the budget; a send takes up to a second, so
    # only the first two can finish within 1.6 s. The rest go back to the queue.
    report = worker.drain_once(batch_size=6, budget=timedelta(seconds=1.6))
    assert (report.sent, report.released) == (2, 4)
    assert len(TimedChannel.seen) == 2
    assert counts() == {Status.SENT: 2, Status.PENDING: 4}


def test_a_429_holds_the_key_for_every_drain_and_stops_this_batch(db, user, paced):
    paced["throttling"] = 10.0
    [first, *others] = make_deliveries(user, 3, channel="throttling")
    began = database_clock()
    report = worker.drain_once(batch_size=3, concurrency=4)
    ended = database_clock()
    # The first send met the 429; the two slotted after it were not started, and went back.
    assert len(ThrottlingChannel.seen) == 1
    assert report.released == 2
    # Every drain's next slot under the key is the Retry-After away from the 429, which came
    # during the drain: bounds on the database's clock, however long the threads took.
    assert began + 3.0 <= next_slot("throttling") <= ended + 3.0
    rows = NotificationDelivery.objects.order_by("pk")
    throttled = [r for r in rows if r.error_code == "THROTTLED"]
    assert len(throttled) == 1
    assert (throttled[0].status, throttled[0].throttles) == (Status.PENDING, 1)
    assert all(r.attempts == r.attempt_base for r in rows)  # no send spent by any of them


@pytest.fixture
def telegram(settings, user):
    """The Telegram channel wired to a RateLimitedTelegram the test makes with peer(...)."""
    made: list[RateLimitedTelegram] = []

    def peer(**options) -> RateLimitedTelegram:
        made.append(RateLimitedTelegram(token=TOKEN, **options))
        settings.TELEGRAM_BOT_TOKEN = TOKEN
        settings.TELEGRAM_API_BASE_URL = made[-1].base_url
        channels._load.cache_clear()
        return made[-1]

    ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
    yield peer
    channels._load.cache_clear()
    for one in made:
        one.stop()


def test_a_telegram_that_only_answers_429_ends_rows_dead_with_their_sends_unspent(
    transactional_db, user, settings, telegram
):
    settings.DELIVERY_MAX_THROTTLES = 3
    peer = telegram(rate=0, retry_after=0.05)
    ids = make_deliveries(user, 2, channel="telegram")

    def drained() -> bool:
        worker.drain_once(batch_size=2)
        return counts() == {Status.DEAD: 2}

    assert poll(drained, seconds=30, every=0.05), counts()
    for row in NotificationDelivery.objects.filter(pk__in=ids):
        assert (row.error_code, row.throttles) == ("THROTTLED", 3)
        assert row.attempts - row.attempt_base == 0  # all five sends still to spend
    assert len(peer.throttled_at) == 6 and peer.accepted_at == []


@pytest.mark.parametrize("through", ["postgresql", "pgbouncer"])
def test_two_drain_processes_through_a_telegram_allowing_30_a_second_see_few_429s(
    transactional_db, request, through, user, telegram, smtp_server
):
    """Unpaced, 2 × 16 sender threads on loopback send far past 30 a second: the peer
    answers most of them 429. Paced by the shared slots, nearly none; and the same through
    PgBouncer in transaction pooling, since pacing keeps nothing in a session."""
    url = database_url()
    if through == "pgbouncer":
        url = request.getfixturevalue("pgbouncer").url(connection.settings_dict["NAME"])
    peer = telegram(rate=30)
    make_deliveries(user, 150, channel="telegram")
    env = {
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": peer.base_url,
        "V10R_CHANNELS": channels_env("email", "telegram"),
    }
    drains = [
        start_drain("--batch-size", "25", url=url, smtp_port=smtp_server.port, extra_env=env)
        for _ in range(2)
    ]
    try:
        done = poll(lambda: counts() == {Status.SENT: 150}, seconds=90, every=0.5)
    finally:
        results = [stop(d) for d in drains]
    assert done, (counts(), results[0][1][-2000:])
    assert len(peer.accepted_at) == 150
    assert len(peer.throttled_at) <= 3, peer.summary()
    assert all("claimed=" in output for _, output in results)
