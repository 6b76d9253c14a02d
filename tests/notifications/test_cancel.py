"""Cancelling: cancel_notifications(key=…) withdraws every delivery no drain holds yet,
atomically against the claim. Real PostgreSQL, and real drain processes. (Notifications
gathered into digests: test_digest_cancel.py.)"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

from notifications import outbox
from notifications.enqueue import cancel_notifications, send_notification
from notifications.models import NotificationDelivery, Status
from tests.helpers import database_url, execute, make_deliveries, mark_sent, poll, start_drain, stop


def queue(user, key: str, *, channels=("recording",)):
    return send_notification(
        user=user,
        type="test.note",
        params={"label": key},
        channels=list(channels),
        cancel_key=key,
    ).notification


def test_cancelling_a_key_cancels_its_pending_deliveries_and_counts_the_others(
    db, user, django_user_model
):
    first = queue(user, "order-1", channels=["recording", "email"])
    queue(user, "order-2")
    other = django_user_model.objects.create_user("bea", email="bea@example.com")
    queue(other, "order-1")
    # One of first's deliveries is being sent, and one of other's has been sent already.
    claims = {c.notification_id: c for c in outbox.claim(batch_size=1)}
    assert set(claims) == {first.id}
    [others] = NotificationDelivery.objects.filter(notification__user=other)
    update = "UPDATE notifications.notification_deliveries SET status = 'sent' WHERE id = %s"
    execute(update, [others.pk])

    result = cancel_notifications(key="order-1")
    assert (result.cancelled, result.in_flight, result.finished) == (1, 1, 1)
    cancelled = NotificationDelivery.objects.get(status=Status.CANCELLED)
    assert cancelled.notification_id == first.id
    assert (cancelled.error_code, cancelled.attempts) == ("CANCELLED", 0)
    # order-2 is untouched, and a second cancel finds nothing left to cancel.
    assert NotificationDelivery.objects.filter(status=Status.PENDING).count() == 1
    again = cancel_notifications(key="order-1")
    assert (again.cancelled, again.in_flight, again.finished) == (0, 1, 2)
    # The claimed row's own outcome still lands: it was never cancelled.
    assert mark_sent(next(iter(claims.values())), provider_message_id="m")


def test_cancelling_for_one_user_leaves_the_others_key_alone(db, user, django_user_model):
    other = django_user_model.objects.create_user("bea")
    queue(user, "digest")
    queue(other, "digest")
    assert cancel_notifications(key="digest", user=other).cancelled == 1
    assert cancel_notifications(key="digest", user=other.pk).cancelled == 0
    [left] = NotificationDelivery.objects.filter(status=Status.PENDING)
    assert left.notification.user_id == user.pk
    assert cancel_notifications(key="digest").cancelled == 1


def test_a_cancelled_delivery_is_never_claimed_and_is_finished(db, user):
    queue(user, "k")
    cancel_notifications(key="k")
    assert outbox.claim(batch_size=10) == []
    assert NotificationDelivery.objects.finished().count() == 1


def test_a_cancel_key_is_checked(db, user):
    with pytest.raises(ValueError, match="at most 200"):
        queue(user, "k" * 201)
    with pytest.raises(TypeError):
        queue(user, 42)
    with pytest.raises(ValueError, match="empty"):
        cancel_notifications(key="")
    assert queue(user, "k" * 200).cancel_key == "k" * 200


def test_cancelling_by_ids_and_sending_now_touch_pending_rows_only(db, user):
    ids = make_deliveries(user, 3)
    [claimed] = outbox.claim(batch_size=1)
    assert outbox.cancel(ids) == set(ids) - {claimed.id}
    assert outbox.send_now(ids) == set()  # nothing pending is left to move
    assert NotificationDelivery.objects.get(pk=claimed.id).status == Status.PROCESSING


def test_a_cancel_waits_for_a_claim_that_holds_the_row_and_then_leaves_it(other_connection, user):
    """The row is claimed or cancelled, never both: a claim that locked it first wins."""
    queue(user, "race")
    other_connection.execute("BEGIN")
    claimed = other_connection.execute(outbox.CLAIM_SQL, {"batch_size": 10}).fetchall()
    assert len(claimed) == 1

    result = {}

    def cancel() -> None:
        try:
            result["counts"] = cancel_notifications(key="race")
        finally:
            connection.close()  # this thread's own

    canceller = threading.Thread(target=cancel)
    canceller.start()
    canceller.join(0.5)
    assert canceller.is_alive(), "the cancel should wait for the claim's row lock"
    other_connection.execute("COMMIT")
    canceller.join(10)
    counts = result["counts"]
    assert (counts.cancelled, counts.in_flight, counts.finished) == (0, 1, 0)
    assert NotificationDelivery.objects.get().status == Status.PROCESSING


def test_a_claim_skips_a_row_a_cancel_holds_and_then_finds_it_cancelled(other_connection, user):
    queue(user, "race")
    other_connection.execute("BEGIN")
    params = {"key": "race", "user_id": None}
    assert other_connection.execute(outbox.LOCK_CARRIERS_SQL, params).fetchall() == []
    [(cancelled, in_flight, finished, emptied, maybe_sent)] = other_connection.execute(
        outbox.CANCEL_KEY_SQL, {**params, "carriers": [], "open": ["pending", "processing"]}
    ).fetchall()
    assert cancelled == 1
    assert outbox.claim(batch_size=10) == []  # skipped (locked), without waiting
    other_connection.execute("COMMIT")
    assert outbox.claim(batch_size=10) == []  # and cancelled once committed
    assert NotificationDelivery.objects.get().status == Status.CANCELLED


KEYS = 20


def test_four_drain_processes_and_cancels_leave_every_row_sent_or_cancelled_once(
    transactional_db, user, smtp_server
):
    ids = make_deliveries(user, 2000, channel="noop")
    # Keys round-robin, so each key has rows early and late in the claim order.
    execute(
        "UPDATE notifications.notifications AS n SET cancel_key = 'key-' || (d.id %% %s)"
        " FROM notifications.notification_deliveries AS d WHERE d.notification_id = n.id",
        [KEYS],
    )
    env = {"DJANGO_SETTINGS_MODULE": "tests.notifications.noop_settings"}
    processes = [
        start_drain(
            "--batch-size", "5", url=database_url(), smtp_port=smtp_server.port, extra_env=env
        )
        for _ in range(4)
    ]
    returned: dict[str, outbox.CancelCounts] = {}
    try:
        assert poll(
            lambda: NotificationDelivery.objects.filter(status=Status.SENT).exists(), seconds=120
        ), [stop(p) for p in processes]
        for n in range(KEYS):
            returned[f"key-{n}"] = cancel_notifications(key=f"key-{n}")
            time.sleep(0.01)  # spread the cancels over the drains' work
        finished = {Status.SENT, Status.CANCELLED}
        done = poll(
            lambda: set(NotificationDelivery.objects.values_list("status", flat=True)) <= finished,
            seconds=120,
        )
    finally:
        results = [stop(p) for p in processes]
    assert done
    assert [code for code, _ in results] == [0] * 4, results
    rows = NotificationDelivery.objects.filter(pk__in=ids)
    by_status = {
        status: rows.filter(status=status).count() for status in (Status.SENT, Status.CANCELLED)
    }
    assert sum(by_status.values()) == 2000
    # Both happened: the test raced cancels against claims.
    assert by_status[Status.SENT] > 0 and by_status[Status.CANCELLED] > 0, by_status
    # Each key's count is its cancelled rows, and no cancelled row was ever claimed (sent).
    for key, result in returned.items():
        keyed = rows.filter(notification__cancel_key=key)
        assert result.cancelled == keyed.filter(status=Status.CANCELLED).count(), key
    assert sum(r.cancelled for r in returned.values()) == by_status[Status.CANCELLED]
    assert not rows.filter(status=Status.CANCELLED, attempts__gt=0).exists()
    assert set(rows.filter(status=Status.SENT).values_list("attempts", flat=True)) == {1}
    assert all("fenced_off=0" in output for _, output in results)


def test_cancelled_rows_are_counted_on_the_metrics_like_sent(client, settings, user):
    from tests.notifications.test_metrics import TOKEN, sample, scrape

    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []
    for key in ("a", "b", "c"):
        queue(user, key)
    cancel_notifications(key="a")
    cancel_notifications(key="b")
    families = scrape(client)
    assert sample(families, "v10r_outbox_deliveries", state="cancelled", channel="") == 2


def test_a_cancelled_delivery_is_pruned_like_the_other_finished_ones(db, user):
    from datetime import timedelta

    from notifications import retention

    queue(user, "old")
    queue(user, "kept")
    cancel_notifications(key="old")
    execute(
        "UPDATE notifications.notification_deliveries SET created_at = now() - interval '3 days'"
    )
    policy = retention.RetentionPolicy(
        keep_sent=timedelta(days=1), keep_finished=timedelta(days=1), pause=0
    )
    retention.prune(policy)
    [left] = NotificationDelivery.objects.all()
    assert (left.status, left.notification.cancel_key) == (Status.PENDING, "kept")


def test_a_user_that_names_nobody_is_refused_not_taken_for_every_user(db, user, django_user_model):
    from django.contrib.auth.models import AnonymousUser

    queue(user, "k")
    for nobody in (AnonymousUser(), django_user_model(username="unsaved"), "abc", True):
        with pytest.raises(TypeError, match="saved user or a user id"):
            cancel_notifications(key="k", user=nobody)
    assert NotificationDelivery.objects.get().status == Status.PENDING
    with pytest.raises(ValueError, match="NUL"):
        queue(user, "k\x00")


# --- Evidence: a claim that ended without a report ----------------------------------------------


def claim_and_go_quiet(lease_seconds: int = 60) -> None:
    """A drain claims every due row and dies before it reports: the reaper, its lease over,
    puts them back."""
    assert outbox.claim(batch_size=10)
    execute(
        "UPDATE notifications.notification_deliveries SET attempted_at = now() - %s * interval "
        "'1 second' WHERE status = 'processing'",
        [lease_seconds + 1],
    )
    assert outbox.reclaim_stale(lease=timedelta(seconds=lease_seconds)).requeued


def test_a_row_an_expired_claim_may_have_sent_is_cancelled_and_counted_apart(db, user):
    maybe = queue(user, "order-7")
    claim_and_go_quiet()
    never = queue(user, "order-7")
    result = cancel_notifications(key="order-7")
    assert (result.cancelled, result.maybe_sent, result.in_flight) == (1, 1, 0)
    rows = {d.notification_id: d for d in NotificationDelivery.objects.all()}
    assert rows[maybe.id].status == rows[never.id].status == Status.CANCELLED
    assert (rows[maybe.id].error_code, rows[maybe.id].unreported_claims) == (
        "CANCELLED_MAYBE_SENT",
        1,
    )
    assert "may have sent it" in rows[maybe.id].error_message
    assert (rows[never.id].error_code, rows[never.id].unreported_claims) == ("CANCELLED", 0)


def test_the_fact_outlives_a_later_claim_that_failed(db, user):
    queue(user, "order-8", channels=["always_retryable"])
    claim_and_go_quiet()
    # Claimed again, and this time the send failed and reported: pending, to be retried.
    [claimed] = outbox.claim(batch_size=10)
    outbox.write_outcomes(
        [outbox.Outcome.failure(claimed, code="UPSTREAM_503", message="", retryable=True)]
    )
    assert NotificationDelivery.objects.get().error_code == "UPSTREAM_503"
    assert cancel_notifications(key="order-8").maybe_sent == 1


def test_a_cancel_ended_to_break_a_deadlock_runs_again(db, monkeypatch):
    from django.db import OperationalError
    from psycopg.errors import DeadlockDetected

    from notifications import outbox

    real, ended = outbox._cancel_matched, []

    def deadlocked_once(*args):
        if not ended:
            ended.append(True)
            raise OperationalError("deadlock detected") from DeadlockDetected("deadlock detected")
        return real(*args)

    monkeypatch.setattr(outbox, "_cancel_matched", deadlocked_once)
    assert outbox.cancel_key(key="k") == outbox.CancelCounts(0, 0, 0, 0)
    assert ended == [True]
