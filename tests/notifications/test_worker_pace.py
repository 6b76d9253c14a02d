"""What a loop skips when batches follow each other: the reaper between its runs, and thread
hand-offs for local sends; and how long it waits for a database that is gone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from notifications import worker
from notifications.models import NotificationDelivery, Status
from tests.helpers import execute, make_deliveries
from tests.notifications.channels import LocalChannel, ThreadRecordingChannel


def held_past_the_lease(user) -> int:
    """A delivery a vanished worker claimed an hour ago."""
    [delivery_id] = make_deliveries(user, 1)
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'processing', "
        "attempts = 1, attempted_at = now() - interval '1 hour' WHERE id = %s",
        [delivery_id],
    )
    return delivery_id


def test_a_loop_reaps_at_most_once_an_interval_and_never_later(db, user, loop_worker):
    held_past_the_lease(user)
    assert loop_worker.drain_once().reaped == 1
    # Held past the lease just after a reap: the batches that follow skip the reaper ...
    second = held_past_the_lease(user)
    assert loop_worker.drain_once().reaped == 0
    assert loop_worker.drain_once().reaped == 0
    assert NotificationDelivery.objects.get(pk=second).status == Status.PROCESSING
    # ... until an interval has passed since the reap (wound back here, not waited for).
    loop_worker._last_reap -= loop_worker.interval.total_seconds()
    assert loop_worker.drain_once().reaped == 1
    # Requeued, and due at once: the same drain may already have sent it.
    assert NotificationDelivery.objects.get(pk=second).status in {Status.PENDING, Status.SENT}


def test_a_worker_without_a_loop_reaps_every_time(db, user, cron_worker):
    held_past_the_lease(user)
    assert cron_worker.drain_once().reaped == 1
    held_past_the_lease(user)
    assert cron_worker.drain_once().reaped == 1


def test_local_sends_stay_on_the_draining_thread_and_others_go_to_senders(db, user, loop_worker):
    make_deliveries(user, 6, channel=LocalChannel.name)
    make_deliveries(user, 6, channel=ThreadRecordingChannel.name)
    report = loop_worker.drain_once(concurrency=3)
    assert (report.claimed, report.sent) == (12, 12)
    assert set(LocalChannel.threads) == {"MainThread"}
    assert len(ThreadRecordingChannel.threads) == 6
    assert all(name.startswith("test-loop-send") for name in ThreadRecordingChannel.threads)


def test_a_resting_loop_says_once_that_it_found_nothing_and_then_only_at_debug(
    transactional_db, user, loop_worker, caplog, settings
):
    import logging
    import threading

    settings.DELIVERY_LISTEN_URL = "off"
    stopping = threading.Event()
    stopping.set()  # one tick a run, then out
    with caplog.at_level(logging.DEBUG, logger="notifications.worker"):
        loop_worker.run(stopping=stopping)
        loop_worker.run(stopping=stopping)
        make_deliveries(user, 2, channel="recording")
        loop_worker.run(stopping=stopping)
        loop_worker.run(stopping=stopping)
        loop_worker.run(stopping=stopping)
    ticks = [(r.levelno, r.getMessage()) for r in caplog.records if r.msg.startswith("tick")]
    info, debug = logging.INFO, logging.DEBUG
    assert [level for level, _ in ticks] == [info, debug, info, info, debug]
    assert "claimed=2" in ticks[2][1]


@pytest.mark.parametrize(
    ("failures", "interval", "seconds"),
    [
        (1, 2, 1),  # 1 s after the first failure
        (2, 2, 2),  # 1 × 2¹
        (3, 2, 2),  # 1 × 2² = 4, but never longer than the 2 s interval
        (3, 300, 4),  # a long interval: the wait keeps doubling ...
        (7, 300, 60),  # ... 1 × 2⁶ = 64, up to a minute
        (1, 0.1, 0.1),  # an interval shorter than the first wait: the interval
    ],
)
def test_a_loop_waits_longer_after_each_database_failure_but_never_past_its_interval(
    failures, interval, seconds
):
    pause = worker.reconnect_pause(failures=failures, interval=timedelta(seconds=interval))
    assert pause == timedelta(seconds=seconds)
