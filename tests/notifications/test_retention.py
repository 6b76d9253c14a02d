"""prune_outbox and notifications/retention.py: what goes, what stays, in bounded batches,
beside a running drain."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from notifications import retention
from notifications.models import Notification, NotificationDelivery, Status
from tests.helpers import (
    database_url,
    execute,
    finish,
    make_deliveries,
    poll,
    start_drain,
    stop,
)

DAYS_30 = timedelta(days=30)
DAYS_90 = timedelta(days=90)


def policy(**changes) -> retention.RetentionPolicy:
    return retention.RetentionPolicy(
        **{"keep_sent": DAYS_30, "keep_finished": DAYS_90, "pause": 0, **changes}
    )


def age(ids, *, days: float) -> None:
    """Backdate deliveries (and their notifications) as if queued days ago."""
    execute(
        "UPDATE notifications.notification_deliveries"
        " SET created_at = now() - make_interval(secs => %s) WHERE id = ANY(%s)",
        [days * 86400, list(ids)],
    )
    execute(
        "UPDATE notifications.notifications SET created_at = now() - make_interval(secs => %s)"
        " WHERE id IN (SELECT notification_id FROM notifications.notification_deliveries"
        " WHERE id = ANY(%s))",
        [days * 86400, list(ids)],
    )


def set_status(ids, status: str) -> None:
    execute(
        "UPDATE notifications.notification_deliveries SET status = %s,"
        " attempts = CASE WHEN %s = 'processing' THEN 1 ELSE attempts END,"
        " attempted_at = now() WHERE id = ANY(%s)",
        [status, status, list(ids)],
    )


def remaining(ids) -> set[int]:
    return set(NotificationDelivery.objects.filter(id__in=ids).values_list("id", flat=True))


@pytest.fixture
def rows(db, user):
    """Deliveries of every state at every age that matters."""
    made = {}
    for name, status, days in [
        ("sent_old", "sent", 31),
        ("sent_young", "sent", 29),
        ("failed_between", "failed", 60),
        ("dead_between", "dead", 60),
        ("failed_old", "failed", 91),
        ("dead_old", "dead", 91),
        ("pending_ancient", "pending", 400),
        ("processing_ancient", "processing", 400),
    ]:
        ids = make_deliveries(user, 3, channel="email")
        if status in {"failed", "dead"}:
            finish(ids, status=status)
        elif status != "pending":
            set_status(ids, status)
        age(ids, days=days)
        made[name] = ids
    return made


def test_old_finished_rows_go_and_everything_else_stays(rows):
    pruned = retention.prune(policy(batch=4))
    gone = {"sent_old", "failed_old", "dead_old"}
    for name, ids in rows.items():
        assert remaining(ids) == (set() if name in gone else set(ids)), name
    assert (pruned.sent, pruned.finished) == (3, 6)
    assert pruned.complete
    # A notification goes with its last delivery; the others keep theirs.
    kept = set(Notification.objects.values_list("deliveries__id", flat=True))
    assert kept == set().union(*(set(ids) for n, ids in rows.items() if n not in gone))
    assert pruned.notifications == 9


def skip(ids, reason: str = "opted_out") -> None:
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'skipped', skip_reason = %s"
        " WHERE id = ANY(%s)",
        [reason, list(ids)],
    )


def test_skipped_rows_are_kept_as_long_as_sent_ones_not_as_failed_ones(db, user):
    """A skipped row is a record that all went as the recipient wanted: it goes with the sent
    rows, after OUTBOX_KEEP_SENT_DAYS, not with the failed and dead ones staff look into."""
    old, young, failed = (make_deliveries(user, 2, channel="email") for _ in range(3))
    skip(old)
    skip(young, "no_address")
    finish(failed, status="failed")
    age(old, days=31)
    age(young, days=29)
    age(failed, days=31)
    assert retention.due(policy()) == {
        "sent": 0,
        "skipped": 2,
        "finished": 0,
        "empty_notifications": 0,
        "throttle_counts": 0,
    }
    pruned = retention.prune(policy())
    assert (pruned.sent, pruned.skipped_deliveries, pruned.finished) == (0, 2, 0)
    assert pruned.deliveries == 2
    assert remaining(old + young + failed) == set(young + failed)
    assert retention.last_run().report["skipped_deliveries"] == 2


def test_batches_are_bounded_and_the_cursor_is_kept_between_runs(rows):
    first = retention.prune(policy(batch=2))
    # 24 rows under the sent horizon's 29 days … every batch looks at two rows.
    assert first.batches >= 12
    assert first.longest_batch_seconds < 5
    second = retention.prune(policy(batch=2))
    # Nothing new behind either horizon. The sent walk reads one short batch from where it
    # stopped; the finished walk starts again from the oldest row, where only the six ancient
    # unfinished rows it passed are left: three full batches and a short one.
    assert second.batches == 1 + 4
    assert second.deliveries == 0


def test_a_row_the_finished_walk_passed_unfinished_goes_once_it_has_finished(db, user):
    ids = make_deliveries(user, 2, channel="email")
    age(ids, days=100)
    assert retention.prune(policy()).deliveries == 0  # pending: never deleted
    finish(ids[:1], status="dead")  # given up on later, behind both cursors
    assert retention.due(policy())["finished"] == 1
    pruned = retention.prune(policy())
    assert (pruned.finished, remaining(ids)) == (1, {ids[1]})


def test_a_long_run_that_keeps_committing_is_not_taken_over(rows):
    # Started an hour ago, but its last batch committed just now: alive, so a second run waits.
    execute(
        "INSERT INTO notifications.outbox_retention (id) VALUES (1) ON CONFLICT DO NOTHING;"
        " UPDATE notifications.outbox_retention SET running_since = now() - interval '1 hour',"
        " last_started_at = now() - interval '1 hour', alive_at = now()"
    )
    assert retention.prune(policy()).skipped
    execute("UPDATE notifications.outbox_retention SET alive_at = now() - interval '6 minutes'")
    assert not retention.prune(policy()).skipped


def test_a_run_that_was_taken_over_stops_and_leaves_the_new_runs_state_alone(rows, monkeypatch):
    """Between two batches (where it sleeps), the run is declared dead and another claims
    pruning. Its next batch is rolled back, and it neither moves a cursor nor releases."""
    taker = {}

    def claimed_meanwhile(seconds):
        if not taker:
            execute(
                "UPDATE notifications.outbox_retention SET running_since = clock_timestamp(),"
                " last_started_at = clock_timestamp(), alive_at = clock_timestamp()"
            )
            taker["state"] = state()

    def state():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT sent_after_at, sent_after_id, finished_after_id, running_since,"
                " last_report::text FROM notifications.outbox_retention"
            )
            return cursor.fetchone()

    monkeypatch.setattr(retention.time, "sleep", claimed_meanwhile)
    pruned = retention.prune(policy(batch=1, pause=0.01))
    assert pruned.taken_over and not pruned.complete
    # One batch (the oldest row, an ancient pending one: kept) committed before the takeover;
    # the next was rolled back, so the cursor stayed where the taker found it.
    assert pruned.batches == 1
    assert taker["state"][1] == rows["pending_ancient"][0]
    assert state() == taker["state"]
    assert not pruned.skipped and retention.prune(policy()).skipped  # the taker's claim holds


def test_a_notification_keeps_its_delivery_on_another_channel(db, user):
    (old,) = make_deliveries(user, 1, channel="email")
    notification = NotificationDelivery.objects.get(pk=old).notification
    other = NotificationDelivery.objects.create(notification=notification, channel="demo")
    set_status([old], "sent")
    age([old], days=40)
    retention.prune(policy())
    assert not NotificationDelivery.objects.filter(pk=old).exists()
    assert Notification.objects.filter(pk=notification.pk).exists()
    assert NotificationDelivery.objects.filter(pk=other.pk).exists()


def test_a_dead_row_retried_after_the_sent_walk_passed_is_pruned_by_the_finished_walk(db, user):
    ids = make_deliveries(user, 2, channel="email")
    finish(ids, status="dead")
    age(ids, days=95)
    # The finished walk has not reached them yet (a long keep), the sent walk passes them.
    retention.prune(policy(keep_sent=timedelta(days=1), keep_finished=timedelta(days=100)))
    assert remaining(ids) == set(ids)
    # A staff member retries one; it is sent later, behind the sent walk's cursor.
    set_status(ids[:1], "sent")
    retention.prune(policy(keep_sent=timedelta(days=1), keep_finished=timedelta(days=100)))
    assert remaining(ids) == set(ids)
    retention.prune(policy(keep_sent=timedelta(days=1), keep_finished=timedelta(days=90)))
    assert remaining(ids) == set()


def test_notifications_that_never_had_a_delivery_are_swept_when_old(db, user):
    empty_old = Notification.objects.create(user=user, type="t", message_key="test.note")
    empty_young = Notification.objects.create(user=user, type="t", message_key="test.note")
    execute(
        "UPDATE notifications.notifications SET created_at = now() - interval '100 days'"
        " WHERE id = %s",
        [empty_old.pk],
    )
    assert retention.due(policy())["empty_notifications"] == 1
    retention.prune(policy())
    assert list(Notification.objects.values_list("pk", flat=True)) == [empty_young.pk]


def test_one_run_at_a_time_and_a_dead_run_is_taken_over(rows):
    execute(
        "INSERT INTO notifications.outbox_retention (id, running_since) VALUES (1, now())"
        " ON CONFLICT (id) DO UPDATE SET running_since = now()"
    )
    busy = retention.prune(policy())
    assert busy.skipped and busy.other_started_at is not None
    assert remaining(rows["sent_old"]) == set(rows["sent_old"])
    execute("UPDATE notifications.outbox_retention SET running_since = now() - interval '1 hour'")
    assert not retention.prune(policy()).skipped
    assert remaining(rows["sent_old"]) == set()


def test_the_last_run_is_recorded(rows):
    pruned = retention.prune(policy())
    last = retention.last_run()
    assert last.finished_at is not None and last.running_since is None
    assert last.report["deliveries"] == pruned.deliveries == 9


def test_dry_run_counts_and_deletes_nothing(rows, capsys):
    call_command("prune_outbox", "--dry-run", "--sent-days", "30", "--finished-days", "90")
    out = capsys.readouterr().out
    assert (
        "Due: 3 sent and 0 skipped deliveries older than 30 days, 6 failed, dead or cancelled "
        "older than 90 days"
    ) in out
    assert NotificationDelivery.objects.count() == 24


def test_the_command_prunes_and_reports(rows, capsys):
    call_command("prune_outbox", "--sent-days", "30", "--finished-days", "90", "--batch", "5")
    report = json.loads(capsys.readouterr().out)
    assert (report["sent"], report["finished"], report["complete"]) == (3, 6, True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sent-days", "0"], "0 is out of range"),
        (["--batch", "many"], "'many' is not a whole number"),
        (["--pause", "-1"], "-1 is out of range"),
        (["--sent-days", "100", "--finished-days", "30"], "at least as long as sent ones"),
    ],
)
def test_bad_options_are_refused_with_a_reason(db, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("prune_outbox", *args)


def test_pruning_beside_a_running_drain_loses_nothing_in_flight(
    transactional_db, user, smtp_server
):
    """Old pending rows being drained while prune runs in a loop with a one-day keep: every
    one is delivered exactly once (a sent row may then go), and the old sent rows go."""
    in_flight = make_deliveries(user, 1500, channel="email")
    age(in_flight, days=40)
    done_before = make_deliveries(user, 1500, channel="email")
    set_status(done_before, "sent")
    age(done_before, days=40)
    stop_pruning = threading.Event()
    runs = []

    def keep_pruning():
        from django.db import connection

        try:
            while not stop_pruning.is_set():
                runs.append(retention.prune(policy(keep_sent=timedelta(days=1), batch=100)))
        finally:
            connection.close()

    pruner = threading.Thread(target=keep_pruning)
    drain = start_drain("--batch-size", "50", url=database_url(), smtp_port=smtp_server.port)
    pruner.start()
    try:
        delivered = poll(
            lambda: len(smtp_server.mailbox.message_ids()) >= 1500, seconds=180, every=0.5
        )
    finally:
        stop_pruning.set()
        pruner.join(60)
        code, output = stop(drain)
    assert delivered, output[-2000:]
    assert code == 0, output[-2000:]
    received = smtp_server.mailbox.message_ids()
    assert {int(m.split("-")[1].split("@")[0]) for m in received} == set(in_flight)
    assert set(received.values()) == {1}, "each sent exactly once"
    retention.prune(policy(keep_sent=timedelta(days=1)))
    assert remaining(done_before) == set()
    assert (
        not NotificationDelivery.objects.exclude(status=Status.SENT)
        .filter(id__in=in_flight)
        .exists()
    )
    assert sum(run.deliveries for run in runs) > 0, "the pruner ran while the drain did"


def test_an_entry_in_the_inbox_outlives_its_deliveries_until_it_is_archived(db, user):
    kept, archived, _never_in_the_inbox = (
        NotificationDelivery.objects.get(pk=pk).notification_id
        for pk in make_deliveries(user, 3, channel="email")
    )
    execute(
        "UPDATE notifications.notifications SET inbox_at = now() WHERE id = ANY(%s)",
        [[kept, archived]],
    )
    execute("UPDATE notifications.notifications SET archived_at = now() WHERE id = %s", [archived])
    ids = list(NotificationDelivery.objects.values_list("id", flat=True))
    set_status(ids, "sent")
    age(ids, days=100)
    retention.prune(policy())
    # The log is gone; the entry the recipient still has in their inbox is not.
    assert remaining(ids) == set()
    assert list(Notification.objects.values_list("pk", flat=True)) == [kept]
    assert retention.due(policy())["empty_notifications"] == 0
    # Archived at last, it is swept as any notification without a delivery.
    execute("UPDATE notifications.notifications SET archived_at = now() WHERE id = %s", [kept])
    assert retention.due(policy())["empty_notifications"] == 1
    retention.prune(policy())
    assert not Notification.objects.exists()
