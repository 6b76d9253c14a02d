"""A drain stalled past its lease starts nothing it no longer owns, on real PostgreSQL: the
reaper puts its batch back, a cancel takes the rows, and when the drain resumes it sends only
what was already in flight."""

from __future__ import annotations

from datetime import timedelta

from notifications import outbox, worker
from notifications.enqueue import cancel_notifications, send_notification
from notifications.models import NotificationDelivery, Status
from tests.helpers import in_thread, poll
from tests.notifications.channels import GatedChannel

LEASE = timedelta(seconds=2)


def test_a_drain_stalled_past_its_lease_starts_none_of_the_sends_a_cancel_took(
    transactional_db, user
):
    for n in range(4):
        send_notification(
            user=user,
            type="test.note",
            params={"label": f"n{n}"},
            channels=["gated"],
            cancel_key="order-42",
        )
    # Two sends start and stall (a frozen host, a debugger); two wait for a sender thread.
    thread, result = in_thread(lambda: worker.drain_once(batch_size=4, concurrency=2, lease=LEASE))
    assert poll(lambda: GatedChannel.in_flight == 2)
    # The lease runs out: the reaper puts the whole batch back, and the cancel takes all four
    # (a row the reaper put back is pending, so a cancel may take it).
    assert poll(lambda: len(outbox.reclaim_stale(lease=LEASE)) == 4, seconds=10)
    # Each was claimed by a drain that never reported: cancelled, and counted as rows that
    # drain may have sent (two of them it had started).
    cancelled = cancel_notifications(key="order-42")
    assert (cancelled.cancelled, cancelled.maybe_sent) == (0, 4)
    GatedChannel.gate.set()
    thread.join(15)
    report = result["value"]
    # The two in flight finish (the message went out: their rows say sent); the two that had
    # not started are never sent, and stay cancelled.
    assert len(GatedChannel.seen) == 2
    sent = {o.delivery_id for o in GatedChannel.seen}
    rows = dict(NotificationDelivery.objects.values_list("id", "status"))
    assert {i for i, status in rows.items() if status == Status.SENT} == sent
    assert [status for i, status in rows.items() if i not in sent] == [Status.CANCELLED] * 2
    assert (report.sent, report.released) == (2, 0)  # the unstarted two were not ours to hand back


def test_a_batch_within_its_lease_sends_everything(transactional_db, user):
    for n in range(4):
        send_notification(
            user=user, type="test.note", params={"label": f"n{n}"}, channels=["gated"]
        )
    GatedChannel.gate.set()
    report = worker.drain_once(batch_size=4, concurrency=2, lease=timedelta(seconds=30))
    assert (report.sent, report.released) == (4, 0)
