from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from core import ratelimit
from notifications.models import Notification, NotificationDelivery, Status
from notifications.signals import outbox_idle
from showcases import queue_demo
from tests.helpers import database_url, make_deliveries, poll, start_drain, stop
from v10r import housekeeping

pytestmark = pytest.mark.django_db


def execute(sql: str, params=None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


# What housekeeping deletes or folds.
KINDS = (
    "rate_limit_windows",
    "sessions",
    "unconfirmed_sign_ups",
    "demo_notifications",
    "deliveries_pruned",
    "metric_rows_folded",
)


def report(**deleted: int) -> dict[str, int]:
    """What housekeeping.run() reports: the rows deleted of each kind named, none of the rest."""
    return dict.fromkeys(KINDS, 0) | deleted


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
    tidied = housekeeping.run()
    assert tidied.as_dict() == report(rate_limit_windows=1, sessions=1, demo_notifications=1)
    with connection.cursor() as cursor:
        cursor.execute("SELECT key FROM v10r_rate_limit_windows")
        assert cursor.fetchall() == [("fresh",)]
    assert list(Session.objects.values_list("session_key", flat=True)) == ["livelivelivelive"]
    assert not NotificationDelivery.objects.filter(pk=leftovers["gone"]).exists()
    # A finished demo row's notification goes with it; pending demo rows, recent ones and
    # real deliveries stay, however old.
    assert Notification.objects.filter(user=queue_demo.demo_user()).count() == 2
    assert set(NotificationDelivery.objects.values_list("pk", flat=True)) == set(leftovers["kept"])
    assert housekeeping.run().as_dict() == report()


@pytest.mark.django_db(transaction=True)
def test_a_running_drain_loop_tidies_up_on_its_idle_ticks(leftovers, smtp_server):
    drain = start_drain(url=database_url(), smtp_port=smtp_server.port)
    try:
        tidied = poll(
            lambda: (
                not Session.objects.filter(session_key="expired" * 4).exists()
                and not NotificationDelivery.objects.filter(pk=leftovers["gone"]).exists()
            ),
            seconds=30,
        )
    finally:
        code, output = stop(drain)
    assert tidied, output
    assert code == 0
    assert "'rate_limit_windows': 1, 'sessions': 1, 'demo_notifications': " in output


def test_the_housekeeping_command_reports_what_it_deleted(leftovers, capsys):
    call_command("housekeeping")
    assert capsys.readouterr().out.strip() == (
        "deliveries_pruned=0 metric_rows_folded=0 rate_limit_windows=1 sessions=1 "
        "demo_notifications=1 unconfirmed_sign_ups=0"
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
    tidied = housekeeping.run()
    assert tidied.as_dict() == report(rate_limit_windows=1, sessions=1)
    assert "deleting demo notifications failed" in caplog.text


def test_housekeeping_prunes_old_finished_deliveries_a_slice_at_a_time(db, django_user_model):
    user = django_user_model.objects.create_user("reader")
    old = make_deliveries(user, 5, channel="email")
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'sent',"
        " created_at = now() - interval '31 days' WHERE id = ANY(%s)",
        [old],
    )
    young = make_deliveries(user, 1, channel="email")
    assert housekeeping.run().as_dict()["deliveries_pruned"] == 5
    assert list(NotificationDelivery.objects.values_list("pk", flat=True)) == young


def test_a_receiver_that_raises_is_logged_and_the_other_apps_still_tidy_up(leftovers, caplog):
    def broken(sender, **kwargs):
        raise RuntimeError("simulated")

    outbox_idle.connect(broken, dispatch_uid="test.broken")
    try:
        tidied = housekeeping.run()
    finally:
        outbox_idle.disconnect(dispatch_uid="test.broken")
    assert tidied.as_dict() == report(rate_limit_windows=1, sessions=1, demo_notifications=1)
    assert "housekeeping: test_a_receiver_that_raises" in caplog.text
    assert "RuntimeError: simulated" in caplog.text
