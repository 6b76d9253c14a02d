from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from core import ratelimit
from jobs import registry, runner
from jobs.models import Status as RunStatus
from jobs.models import Trigger
from notifications import metrics
from notifications.models import DrainMetric, Notification, NotificationDelivery, Status
from notifications.signals import outbox_idle
from notifications.worker import Worker
from showcases import queue_demo
from tests.helpers import make_deliveries

pytestmark = pytest.mark.django_db


def execute(sql: str, params=None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


# What housekeeping deletes or folds. Never the outbox's deliveries: they are prune-outbox's.
KINDS = (
    "rate_limit_windows",
    "sessions",
    "unconfirmed_sign_ups",
    "demo_notifications",
    "metric_rows_folded",
)


def report(**deleted: int) -> dict[str, int]:
    """What the housekeeping job reports: the rows deleted of each kind named, none of the
    rest."""
    return dict.fromkeys(KINDS, 0) | deleted


def run_housekeeping() -> dict[str, int]:
    """Run the housekeeping job as the sweep does, through the runner and its lease; return
    its result."""
    outcome = runner.run(registry.get("housekeeping"), trigger=Trigger.SCHEDULER)
    assert outcome.status == RunStatus.SUCCEEDED, outcome.error
    return outcome.result


@pytest.fixture
def leftovers(django_user_model):
    """Two of each kind: one housekeeping must delete, one it must keep."""
    ratelimit.hit(key="old", limit=1, window=timedelta(minutes=1))
    ratelimit.hit(key="fresh", limit=1, window=timedelta(minutes=1))
    execute(
        "UPDATE v10r_rate_limit_windows SET window_start = now() - interval '2 hours' "
        "WHERE key = 'old'"
    )
    for key, expires in (("expired", -1), ("live", 1)):
        store = SessionStore(session_key=None)
        store.create()
        Session.objects.filter(pk=store.session_key).update(
            session_key=key * 4, expire_date=timezone.now() + timedelta(days=expires)
        )
    visitor = queue_demo.demo_user()
    old_sent, old_pending, new_sent = make_deliveries(visitor, 3, channel="demo")
    reader = django_user_model.objects.create_user("reader", email="r@example.com")
    [old_real] = make_deliveries(reader, 1, channel="email")
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'sent', "
        "created_at = now() - interval '11 minutes' WHERE id = ANY(%s)",
        [[old_sent, old_real]],
    )
    execute(
        "UPDATE notifications.notification_deliveries "
        "SET created_at = now() - interval '11 minutes' WHERE id = %s",
        [old_pending],
    )
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'sent' WHERE id = %s",
        [new_sent],
    )
    return {"gone": old_sent, "kept": [old_pending, new_sent, old_real]}


def test_housekeeping_deletes_what_expired_or_finished_and_keeps_the_rest(leftovers):
    assert run_housekeeping() == report(rate_limit_windows=1, sessions=1, demo_notifications=1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT key FROM v10r_rate_limit_windows")
        assert cursor.fetchall() == [("fresh",)]
    assert list(Session.objects.values_list("session_key", flat=True)) == ["livelivelivelive"]
    assert not NotificationDelivery.objects.filter(pk=leftovers["gone"]).exists()
    # A finished demo row's notification goes with it; pending demo rows, recent ones and
    # real deliveries stay, however old.
    assert Notification.objects.filter(user=queue_demo.demo_user()).count() == 2
    assert set(NotificationDelivery.objects.values_list("pk", flat=True)) == set(leftovers["kept"])
    assert run_housekeeping() == report()


def retire_metric_rows() -> None:
    """Leave the counts of a drain process gone for two hours: housekeeping's to fold."""
    tally = metrics.Tally()
    tally.add("sends", "email|sent", 3)
    tally.flush(worker="gone-host:1")
    execute(
        "UPDATE notifications.drain_metrics SET updated_at = now() - interval '2 hours'"
        " WHERE worker = 'gone-host:1'"
    )


def test_housekeeping_folds_the_metric_rows_of_processes_gone_for_an_hour(db):
    retire_metric_rows()
    assert run_housekeeping()["metric_rows_folded"] == 1
    assert set(DrainMetric.objects.values_list("worker", flat=True)) == {metrics.RETIRED}


def test_a_resting_drain_leaves_every_periodic_duty_but_the_reaper_to_the_jobs(
    leftovers, django_user_model, client, settings
):
    # Everything the drain's idle tick once deleted or folded is due: an old sent delivery
    # (prune-outbox's), retired metric rows and the receivers' leftovers (housekeeping's).
    reader = django_user_model.objects.create_user("old-reader", email="o@example.com")
    [old_sent] = make_deliveries(reader, 1, channel="email")
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'sent',"
        " created_at = now() - interval '31 days' WHERE id = %s",
        [old_sent],
    )
    retire_metric_rows()
    called = []

    def spy(sender, **kwargs):
        called.append(sender)
        return {}

    outbox_idle.connect(spy, dispatch_uid="test.spy")
    settings.CRON_SECRET = "s" * 32
    loop = Worker(name="test-loop:1", interval=timedelta(seconds=2))
    try:
        # A loop's resting ticks, and the cron's drain: the first resting tick is where the
        # drain used to tidy up.
        for _ in range(2):
            assert not loop.tick().more_due
        answer = client.post("/cron/drain", HTTP_AUTHORIZATION=f"Bearer {'s' * 32}")
        assert answer.status_code == 200
        assert set(answer.json()) == {"report"}
        assert called == []
        assert NotificationDelivery.objects.filter(pk=old_sent).exists()
        assert NotificationDelivery.objects.filter(pk=leftovers["gone"]).exists()
        assert Session.objects.filter(session_key="expired" * 4).exists()
        assert "gone-host:1" in set(DrainMetric.objects.values_list("worker", flat=True))
        with connection.cursor() as cursor:
            # No prune started: retention's row was never written.
            cursor.execute("SELECT count(*) FROM notifications.outbox_retention")
            assert cursor.fetchone() == (0,)

        # The jobs do all of it (and the spy was listening all along). Two demo rows: the
        # drain sent the old pending one meanwhile.
        assert run_housekeeping() == report(
            rate_limit_windows=1, sessions=1, demo_notifications=2, metric_rows_folded=1
        )
        assert called == [None]
        pruned = runner.run(registry.get("prune-outbox"), trigger=Trigger.SCHEDULER)
        assert pruned.status == RunStatus.SUCCEEDED, pruned.error
    finally:
        loop.close()
        outbox_idle.disconnect(dispatch_uid="test.spy")
    assert not NotificationDelivery.objects.filter(pk=old_sent).exists()


def test_the_housekeeping_command_reports_what_it_deleted(leftovers, capsys):
    call_command("housekeeping")
    assert capsys.readouterr().out.strip() == (
        "metric_rows_folded=0 rate_limit_windows=1 sessions=1 demo_notifications=1 "
        "unconfirmed_sign_ups=0"
    )


def test_dead_demo_rows_are_finished_and_pruned_but_never_need_attention(django_user_model):
    [dead] = make_deliveries(queue_demo.demo_user(), 1, channel="demo")
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'dead', attempts = 5 "
        "WHERE id = %s",
        [dead],
    )
    assert NotificationDelivery.objects.filter(status=Status.DEAD).count() == 1
    assert NotificationDelivery.objects.needs_attention().count() == 0
    execute(
        "UPDATE notifications.notification_deliveries "
        "SET created_at = now() - interval '11 minutes' WHERE id = %s",
        [dead],
    )
    assert queue_demo.prune() == 1


def test_a_notification_on_demo_and_another_channel_is_left_alone_and_the_rest_go_on(
    django_user_model,
):
    from notifications.enqueue import send_notification

    visitor = queue_demo.demo_user()
    mixed = send_notification(
        user=visitor,
        type="queue.demo",
        params={"label": "x", "fail": False},
        channels=["demo", "email"],
    ).notification
    [plain] = make_deliveries(visitor, 1, channel="demo")
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'sent', "
        "created_at = now() - interval '11 minutes' WHERE channel = 'demo'"
    )
    assert queue_demo.prune() == 1
    assert not NotificationDelivery.objects.filter(pk=plain).exists()
    assert mixed.deliveries.count() == 2
    assert queue_demo.prune() == 0  # and it is not picked again and again


def test_one_kind_failing_does_not_stop_the_others(leftovers, monkeypatch, caplog):
    from django.db import DatabaseError

    def broken(**kwargs):
        raise DatabaseError("simulated")

    monkeypatch.setattr(queue_demo, "prune", broken)
    assert run_housekeeping() == report(rate_limit_windows=1, sessions=1)
    assert "deleting demo notifications failed" in caplog.text


def test_housekeeping_leaves_old_deliveries_to_the_prune_job(db, django_user_model):
    # Only prune-outbox prunes the outbox: were housekeeping to prune as well, the two jobs'
    # runs (two slugs, two leases) could prune at once.
    user = django_user_model.objects.create_user("reader")
    old = make_deliveries(user, 5, channel="email")
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'sent',"
        " created_at = now() - interval '31 days' WHERE id = ANY(%s)",
        [old],
    )
    young = make_deliveries(user, 1, channel="email")
    run_housekeeping()
    assert NotificationDelivery.objects.count() == 6
    outcome = runner.run(registry.get("prune-outbox"), trigger=Trigger.SCHEDULER)
    assert outcome.status == RunStatus.SUCCEEDED, outcome.error
    assert outcome.result["deliveries"] == 5
    assert list(NotificationDelivery.objects.values_list("pk", flat=True)) == young


def test_a_receiver_that_raises_is_logged_and_the_other_apps_still_tidy_up(leftovers, caplog):
    def broken(sender, **kwargs):
        raise RuntimeError("simulated")

    outbox_idle.connect(broken, dispatch_uid="test.broken")
    try:
        found = run_housekeeping()
    finally:
        outbox_idle.disconnect(dispatch_uid="test.broken")
    assert found == report(rate_limit_windows=1, sessions=1, demo_notifications=1)
    assert "housekeeping: test_a_receiver_that_raises" in caplog.text
    assert "RuntimeError: simulated" in caplog.text
