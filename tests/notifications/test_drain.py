from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core import checks

from notifications import checks as outbox_checks
from notifications import heartbeat, worker
from notifications.models import DrainHeartbeat, NotificationDelivery, SkipReason, Status
from recipients.models import ChannelAddress
from tests.helpers import execute, in_thread, make_deliveries, poll
from tests.notifications.channels import (
    AlwaysRetryableChannel,
    BlockedChannel,
    GatedChannel,
    RecordingChannel,
)


def statuses(ids):
    rows = dict(NotificationDelivery.objects.filter(pk__in=ids).values_list("pk", "status"))
    return [rows[i] for i in ids]


def test_a_drain_sends_each_due_delivery_and_reports_it(db, user):
    ids = make_deliveries(user, 3)
    report = worker.drain_once(batch_size=10)
    assert report.as_dict() == {
        "reaped": 0,
        "claimed": 3,
        "sent": 3,
        "retrying": 0,
        "failed": 0,
        "dead": 0,
        "throttled": 0,
        "fenced_off": 0,
        "released": 0,
        "unwanted": 0,
        "held": 0,
        "expanded": 0,
        "skipped": False,
        "more_due": False,
    }
    assert sorted(o.delivery_id for o in RecordingChannel.seen) == ids
    assert statuses(ids) == [Status.SENT] * 3
    assert worker.drain_once(batch_size=10).claimed == 0


def test_an_unknown_channel_or_a_bug_fails_its_row_never_the_batch(db, user):
    [unknown] = make_deliveries(user, 1, channel="pigeon")
    [buggy] = make_deliveries(user, 1, channel="exploding")
    [fine] = make_deliveries(user, 1)
    report = worker.drain_once(batch_size=10)
    assert (report.sent, report.failed, report.retrying) == (1, 1, 1)
    rows = {d.pk: d for d in NotificationDelivery.objects.all()}
    assert (rows[unknown].status, rows[unknown].error_code) == (Status.FAILED, "UNKNOWN_CHANNEL")
    assert (rows[buggy].status, rows[buggy].error_code) == (Status.PENDING, "WORKER_ERROR")
    assert "a bug in the channel" in rows[buggy].error_message
    assert rows[fine].status == Status.SENT


def test_a_channel_that_always_fails_gets_five_sends_then_dead_and_no_sixth(db, user):
    [delivery_id] = make_deliveries(user, 1, channel="always_retryable")
    for _ in range(8):
        worker.drain_once()
        # Skip the backoff wait: make whatever is pending due now, by the database clock.
        execute(
            "UPDATE notifications.notification_deliveries SET next_attempt_at = now() "
            "WHERE status = 'pending'"
        )
    assert len(AlwaysRetryableChannel.seen) == 5
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert (stored.status, stored.attempts, stored.error_code) == (Status.DEAD, 5, "UPSTREAM_503")


def test_a_recipient_who_blocked_the_bot_has_the_address_switched_off(db, user):
    ChannelAddress.objects.create(user=user, channel="blocked", address="chat-42")
    [delivery_id] = make_deliveries(user, 1, channel="blocked")
    assert worker.drain_once().failed == 1
    assert BlockedChannel.seen[0].address == "chat-42"
    assert not ChannelAddress.objects.get(user=user, channel="blocked").is_active
    # With no active address left, the next notification is skipped without a send, and says
    # why: the only address was switched off.
    make_deliveries(user, 1, channel="blocked")
    assert worker.drain_once().unwanted == 1
    assert len(BlockedChannel.seen) == 1
    later = NotificationDelivery.objects.exclude(pk=delivery_id).get()
    assert (later.status, later.skip_reason) == (Status.SKIPPED, SkipReason.CHANNEL_OFF)


def test_one_process_never_runs_two_drains_at_once(transactional_db, user):
    make_deliveries(user, 1, channel="gated")
    thread, result = in_thread(lambda: worker.drain_once(batch_size=5))
    assert poll(lambda: GatedChannel.in_flight == 1)
    assert worker.drain_once(batch_size=5).skipped is True
    GatedChannel.gate.set()
    thread.join(10)
    assert result["value"].sent == 1


def test_sends_run_concurrently_up_to_the_limit(transactional_db, user):
    make_deliveries(user, 9, channel="gated")
    thread, result = in_thread(lambda: worker.drain_once(batch_size=9, concurrency=4))
    assert poll(lambda: GatedChannel.in_flight == 4)
    time.sleep(0.1)  # give a fifth send the chance to start, were the limit broken
    assert GatedChannel.most_in_flight == 4
    GatedChannel.gate.set()
    thread.join(10)
    assert result["value"].sent == 9


def test_finished_sends_are_written_while_a_slow_one_is_still_out(transactional_db, user):
    ids = make_deliveries(user, 4, channel="gated")
    GatedChannel.slow_ids = {ids[0]}
    thread, _ = in_thread(lambda: worker.drain_once(batch_size=4, concurrency=2))
    # The three quick sends are flushed (within about 100 ms) while the slow one waits.
    assert poll(lambda: statuses(ids[1:]) == [Status.SENT] * 3, seconds=5)
    assert statuses(ids[:1]) == [Status.PROCESSING]
    GatedChannel.gate.set()
    thread.join(10)
    assert statuses(ids) == [Status.SENT] * 4


# --- System checks ----------------------------------------------------------------------------


def check_ids(settings) -> list[str]:
    return [
        e.id for e in checks.run_checks() if e.id.startswith(("notifications.", "transports.E"))
    ]


@pytest.mark.parametrize(
    ("lease", "batch", "concurrency", "timeout", "fails"),
    [
        # 25 rows / 4 threads = 7 rounds × (10 s + 1 s) + 5 s margin = 82 s
        (82, 25, 4, 10, True),
        (83, 25, 4, 10, False),
        # 100 rows, one thread: 100 × 11 s + 5 s = 1105 s
        (1100, 100, 1, 10, True),
        # A shorter email timeout lets the same lease cover a bigger batch: 13 × 3 s + 5 s
        (45, 50, 4, 2, False),
    ],
)
def test_the_lease_must_outlast_a_full_batch(settings, lease, batch, concurrency, timeout, fails):
    settings.DELIVERY_LEASE_SECONDS = lease
    settings.DELIVERY_BATCH_SIZE = batch
    settings.DELIVERY_CONCURRENCY = concurrency
    settings.DELIVERY_CHANNELS = {"email": "transports.email.EmailChannel"}
    settings.MAILERS = {"default": {"OPTIONS": {"timeout": timeout}}}
    assert ("notifications.E001" in check_ids(settings)) is fails


def test_the_first_retry_must_come_after_the_tick(settings):
    settings.DELIVERY_INTERVAL_SECONDS = 25.5  # the earliest first retry: 30 s − 15 %
    assert "notifications.E002" in check_ids(settings)
    settings.DELIVERY_INTERVAL_SECONDS = 25
    assert "notifications.E002" not in check_ids(settings)


def test_a_channel_that_cannot_be_loaded_is_a_start_up_error(settings):
    settings.DELIVERY_CHANNELS = {"email": "transports.nowhere.Channel"}
    assert check_ids(settings) == ["transports.E002"]


def test_a_channel_setting_that_names_no_channel_is_a_start_up_error_of_its_own(settings):
    settings.DELIVERY_CHANNELS = {"email": "notifications.models.Notification"}
    assert check_ids(settings) == ["transports.E003"]


# --- Heartbeat --------------------------------------------------------------------------------


def test_the_loop_is_running_only_while_its_heartbeat_is_fresh(db, settings):
    settings.V10R_PLATFORM = "container"
    assert heartbeat.status().state == "stopped"
    heartbeat.beat(worker="host-a:12", interval=timedelta(seconds=15), report={})
    status = heartbeat.status()
    assert (status.state, status.host, status.interval) == (
        "running",
        "host-a",
        timedelta(seconds=15),
    )
    # A loop beats between batches, never during one: a tick as old as 2.5 intervals and
    # most of the longest batch is still a running loop's; a second more, and it is stale.
    allowed = heartbeat.stale_after(timedelta(seconds=15))
    batch = outbox_checks.worst_case_batch(
        batch_size=settings.DELIVERY_BATCH_SIZE, concurrency=settings.DELIVERY_CONCURRENCY
    )
    assert allowed == timedelta(seconds=37.5) + batch
    DrainHeartbeat.objects.update(ticked_at=status.last_tick - allowed + timedelta(seconds=2))
    assert heartbeat.status().state == "running"
    DrainHeartbeat.objects.update(ticked_at=status.last_tick - allowed - timedelta(seconds=1))
    assert heartbeat.status().state == "stopped"
    heartbeat.beat(worker="host-a:12", interval=timedelta(seconds=15), report={})
    heartbeat.stop(worker="host-a:12")
    assert heartbeat.status().state == "stopped"


def test_a_serverless_platform_is_dormant_between_cron_runs(db, settings):
    settings.V10R_PLATFORM = "vercel"
    heartbeat.beat(worker=heartbeat.CRON_WORKER, interval=timedelta(days=1), report={})
    status = heartbeat.status()
    assert status.state == "dormant"
    assert status.last_cron is not None


# --- Lanes: demo rows beside real ones ----------------------------------------------------------


def on_lane(ids, lane):
    execute(
        "UPDATE notifications.notification_deliveries SET lane = %s WHERE id = ANY(%s)",
        [lane, ids],
    )
    return ids


@pytest.mark.showcase
def test_with_2000_demo_rows_queued_a_real_email_queued_after_them_goes_in_the_next_tick(
    db, django_user_model, settings, smtp_server
):
    settings.MAILERS = {"default": smtp_server.mailer(timeout=5)}
    visitor = django_user_model.objects.create_user("visitor")
    on_lane(make_deliveries(visitor, 2000, channel="demo"), "demo")
    reader = django_user_model.objects.create_user("ada", email="ada@example.com")
    [email] = make_deliveries(reader, 1, channel="email")

    report = worker.drain_once(batch_size=25, concurrency=16)

    assert NotificationDelivery.objects.get(pk=email).status == Status.SENT
    assert [m["To"] for m in smtp_server.mailbox.messages] == ["ada@example.com"]
    # One round of demo sends (the demo lane's cap) rode along, no more, and the loop is told
    # more are due.
    assert report.claimed == 1 + 16
    assert report.more_due
    assert NotificationDelivery.objects.filter(channel="demo", status=Status.SENT).count() == 16


def test_a_batch_sends_the_higher_lanes_rows_first(db, user):
    low = on_lane(make_deliveries(user, 3), "low")
    high = on_lane(make_deliveries(user, 3), "high")
    normal = make_deliveries(user, 3)
    worker.drain_once(batch_size=10, concurrency=1)
    # The recording channel sends on the drain's own thread, in the batch's order.
    seen = [o.delivery_id for o in RecordingChannel.seen]
    assert [set(seen[:3]), set(seen[3:6]), set(seen[6:])] == [set(high), set(normal), set(low)]


def test_a_batch_says_more_are_due_only_when_a_lane_came_back_full(db, user):
    make_deliveries(user, 3)
    assert not worker.drain_once(batch_size=10, concurrency=4).more_due
    make_deliveries(user, 10)
    assert worker.drain_once(batch_size=10, concurrency=4).more_due


# --- An outcome the database refuses ----------------------------------------------------------


def test_an_outcome_the_database_refuses_holds_up_no_other_row_and_no_later_drain(
    transactional_db, user
):
    from notifications import drain, outbox

    ids = make_deliveries(user, 3, channel="recording")
    claims = sorted(outbox.claim(batch_size=3), key=lambda c: c.id)
    # A provider's id of any length is cut to the column's.
    long_id = outbox.Outcome.sent(claims[0], provider_message_id="x" * 300)
    assert len(long_id.provider_message_id) == 255
    # An error code past its column (no constructor cuts it): refused however it is written.
    refused = outbox.Outcome(claims[1].id, claims[1].attempts, Status.FAILED, error_code="E" * 80)
    good = outbox.Outcome.sent(claims[2], provider_message_id="fine")
    report, unwritten = drain.Report(), []
    writer = drain._Writer(report, unwritten)
    writer.buffer = [long_id, refused, good]
    writer.flush()
    assert unwritten == [] and writer.error is None
    assert report.sent == 2
    statuses = dict(NotificationDelivery.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert statuses == {ids[0]: Status.SENT, ids[1]: Status.PROCESSING, ids[2]: Status.SENT}
