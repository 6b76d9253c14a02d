from __future__ import annotations

from datetime import UTC, datetime, time

import pytest
from django.db import transaction
from django.db.models.signals import post_save

from notifications import worker
from notifications.enqueue import add_channels, send_notification
from notifications.models import Notification, NotificationDelivery
from recipients import catalogue, preferences
from recipients.models import Recipient
from recipients.windows import Digest
from tests.dbclock import database_clock_at
from tests.helpers import notify
from tests.notifications.channels import RecordingChannel


def welcome(user, *, channels):
    """Queue the welcome message for user on channels."""
    return send_notification(
        user=user, type="welcome", params={"name": "Ada"}, channels=channels
    ).notification


def demo(user, *, channels=("recording",), **options):
    """Queue the queue demo's message for user on channels, with send_notification's options."""
    return send_notification(
        user=user,
        type="test.note",
        params={"label": "a"},
        channels=list(channels),
        **options,
    ).notification


def test_send_writes_the_notification_and_one_pending_delivery_per_channel(db, user):
    notification = welcome(user, channels=["email", "recording", "email"])
    deliveries = notification.deliveries.order_by("channel")
    assert [(d.channel, d.status, d.attempts) for d in deliveries] == [
        ("email", "pending", 0),
        ("recording", "pending", 0),
    ]
    assert NotificationDelivery.objects.due().count() == 2


def test_enqueue_rolls_back_with_the_callers_transaction(db, user):
    with pytest.raises(RuntimeError), transaction.atomic():
        welcome(user, channels=["recording"])
        raise RuntimeError("the caller's own work failed")
    assert Notification.objects.count() == 0
    assert NotificationDelivery.objects.count() == 0


def test_the_same_notification_and_channel_never_make_two_rows(db, user):
    notification = notify(user, channels=["recording"])
    add_channels(notification=notification, channels=["recording", "email"])
    add_channels(notification=notification, channels=["email"])
    assert sorted(notification.deliveries.values_list("channel", flat=True)) == [
        "email",
        "recording",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"channels": ["pigeon"]}, "Unknown channel(s) 'pigeon'; known:"),
        ({"channels": []}, "at least one channel"),
        ({"type": "nope"}, "Unknown notification type 'nope'; known types: "),
        ({"type": ""}, "Unknown notification type ''; known types: "),
        ({"params": {}}, "needs the parameter(s): label"),
        ({"params": {"label": object()}}, "JSON-serialisable"),
    ],
)
def test_bad_input_is_refused_at_enqueue_time_with_a_clear_error(db, user, kwargs, message):
    arguments = {
        "user": user,
        "type": "test.note",
        "params": {"label": "x"},
        "channels": ["recording"],
    } | kwargs
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        send_notification(**arguments)
    assert Notification.objects.count() == 0


def test_channels_must_be_a_list_not_a_string(db, user):
    with pytest.raises(TypeError, match="list of channel names"):
        notify(user, channels="email")


@pytest.mark.parametrize(
    ("language", "subject"),
    [
        ("en", "Welcome to v10r, Ada"),
        ("ru", "Добро пожаловать в v10r, Ada"),
        ("de", "Willkommen bei v10r, Ada"),
    ],
)
def test_messages_are_rendered_at_delivery_in_the_recipients_language(db, user, language, subject):
    welcome(user, channels=["recording"])
    # The preference is read when the delivery is sent, not when it was queued.
    Recipient.objects.create(user=user, language=language)
    worker.drain_once()
    [outgoing] = RecordingChannel.seen
    assert outgoing.subject == subject
    assert outgoing.language == language


def test_every_message_has_a_translation_in_every_language():
    for key, message in catalogue.MESSAGES.items():
        english = catalogue.render(key=key, params=_blanks(message), language="en")
        for language in ("ru", "de"):
            rendered = catalogue.render(key=key, params=_blanks(message), language=language)
            assert rendered.subject != english.subject, (key, language)
            assert rendered.body != english.body, (key, language)


def _blanks(message):
    import string

    names = {
        name
        for template in (str(message.subject), str(message.body))
        for _, name, _, _ in string.Formatter().parse(template)
        if name
    }
    return dict.fromkeys(names, "X")


@pytest.mark.parametrize(
    ("key", "params"),
    [("no.such.message", {}), ("welcome", {})],
    ids=["removed key", "missing parameter"],
)
def test_a_stored_notification_that_cannot_be_rendered_shows_its_key(key, params):
    shown = catalogue.render_or_key(key=key, params=params, language="ru")
    assert (shown.subject, shown.body) == (key, key)
    ok = catalogue.render_or_key(key="welcome", params={"name": "Ада"}, language="ru")
    assert ok.subject == "Добро пожаловать в v10r, Ада"


def test_two_transactions_adding_the_same_channel_at_once_make_one_row(transactional_db, user):
    """The second insert waits on the first's uncommitted row, then skips it: no
    IntegrityError, whichever commits first. A read-then-insert would see nothing to skip
    (the first row is not yet committed) and fail once the first commits."""
    import threading

    from django.db import connection

    from tests.helpers import poll

    notification = notify(user, channels=["email"])
    second: dict = {}

    def add_in_a_second_transaction():
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    second["pid"] = cursor.fetchone()[0]
                add_channels(notification=notification, channels=["recording"])
        except Exception as exc:  # noqa: BLE001 - reported to the test's thread
            second["error"] = exc
        finally:
            connection.close()

    with transaction.atomic():
        add_channels(notification=notification, channels=["recording"])
        thread = threading.Thread(target=add_in_a_second_transaction)
        thread.start()

        def waiting_on_our_row() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted",
                    [second.get("pid", -1)],
                )
                return cursor.fetchone()[0] > 0

        assert poll(waiting_on_our_row, seconds=10), "the second insert never waited"
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert "error" not in second, second.get("error")
    assert sorted(notification.deliveries.values_list("channel", flat=True)) == [
        "email",
        "recording",
    ]


def test_adding_channels_is_one_insert_that_skips_what_is_there(db, user):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    notification = notify(user, channels=["email"])
    with CaptureQueriesContext(connection) as queries:
        added = add_channels(notification=notification, channels=["email", "recording"])
    # Read: the channels it has, the recipient's settings and choices; written: one insert.
    # (Its savepoint's statements aside: the test runs in a transaction.)
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"].upper()]
    [insert] = [sql for sql in statements if not sql.startswith("SELECT")]
    assert insert.startswith("INSERT") and insert.endswith("ON CONFLICT DO NOTHING")
    assert len(statements) == 3
    # The channel it had already is neither queued again nor reported.
    assert (added.queued, added.skipped) == (("recording",), {})


# --- Priority, send_at ------------------------------------------------------------------------


def test_a_priority_names_the_lane_and_the_default_is_normal(db, user):
    from notifications import outbox

    urgent = demo(user, priority="high")
    plain = welcome(user, channels=["recording"])
    assert urgent.deliveries.get().lane == "high"
    assert plain.deliveries.get().lane == "normal"
    [first, second] = outbox.claim(batch_size=2)
    assert {first.lane, second.lane} == {"high", "normal"}


def test_an_unknown_priority_is_refused_naming_the_known_ones(db, user):
    with pytest.raises(ValueError, match="Unknown priority 'urgent'; known: high, normal, low"):
        demo(user, priority="urgent")
    assert Notification.objects.count() == 0


def later(user, send_at):
    return demo(user, channels=["recording", "email"], send_at=send_at)


def test_send_at_holds_the_deliveries_until_then_by_the_database_clock(db, user):
    from datetime import timedelta

    from notifications import outbox
    from tests.helpers import db_now

    now = db_now()
    notification = later(user, now + timedelta(hours=2))
    assert {d.next_attempt_at for d in notification.deliveries.all()} == {now + timedelta(hours=2)}
    assert outbox.claim(batch_size=10) == []
    # Staff may send it now.
    ids = list(notification.deliveries.values_list("pk", flat=True))
    assert outbox.send_now(ids) == set(ids)
    assert len(outbox.claim(batch_size=10)) == 2


def test_a_send_at_already_past_means_now_on_the_database_clock(db, user):
    from datetime import UTC, datetime

    from tests.helpers import db_now

    notification = later(user, datetime(2001, 1, 1, tzinfo=UTC))
    assert {d.next_attempt_at for d in notification.deliveries.all()} == {db_now()}


def test_a_naive_or_non_datetime_send_at_is_refused(db, user):
    from datetime import date, datetime

    with pytest.raises(ValueError, match="aware datetime"):
        later(user, datetime(2030, 1, 1))  # noqa: DTZ001 - naive on purpose
    with pytest.raises(TypeError, match="send_at must be a datetime, not date"):
        later(user, date(2030, 1, 1))
    with pytest.raises(TypeError):
        later(user, "2030-01-01T00:00:00Z")
    assert Notification.objects.count() == 0


def test_a_send_to_a_recipient_who_chose_nothing_is_one_statement(
    db, user, settings, django_assert_num_queries
):
    # Decided as for one who chose nothing, and written by the statement that checks it
    # (enqueue's UNCHOSEN_SQL); no throttle counts it, and nothing gathers it.
    settings.NOTIFICATION_THROTTLE_LIMIT = 0
    with django_assert_num_queries(1):
        sent = send_notification(
            user=user, type="welcome", params={"name": "Ada"}, channels=["email", "recording"]
        )
    assert sent.queued == ("email", "recording")
    assert NotificationDelivery.objects.filter(notification=sent.notification).count() == 2


@pytest.mark.parametrize(
    "choice",
    ["opted out of email", "a digest", "quiet hours on email", "a choice on another channel"],
)
def test_a_send_to_a_recipient_who_chose_is_decided_by_their_choices(
    db, user, settings, django_assert_num_queries, choice
):
    # The statement that assumed they chose nothing writes nothing; their choices are read and
    # the send decided by them, in two more statements.
    settings.NOTIFICATION_THROTTLE_LIMIT = 0
    expected = {"email": None, "recording": None}
    if choice == "opted out of email":
        preferences.choose(user, choices={("account", "email"): False})
        expected["email"] = "opted_out"
    elif choice == "a digest":
        preferences.choose_digests(user, digests={"account": Digest("daily", 9)})
    elif choice == "quiet hours on email":
        Recipient.objects.create(
            user=user, quiet_start=time(0), quiet_end=time(23, 59), quiet_email=True
        )
    else:
        preferences.choose(user, choices={("account", "webhook"): True})
    # Their choices' read after the first statement; a held send reads its window's end too;
    # a digest's join, its carrier and the savepoint around them take eight in all.
    queries = {"a choice on another channel": 1, "opted out of email": 3, "a digest": 8}
    with django_assert_num_queries(queries.get(choice, 4)):
        sent = send_notification(
            user=user, type="welcome", params={"name": "Ada"}, channels=["email", "recording"]
        )
    rows = dict(
        NotificationDelivery.objects.filter(notification=sent.notification).values_list(
            "channel", "skip_reason"
        )
    )
    if choice == "a digest":
        assert set(sent.digested) == {"email", "recording"}
    elif choice == "quiet hours on email":
        held = NotificationDelivery.objects.get(notification=sent.notification, channel="email")
        assert held.held_until is not None
    else:
        assert {c: r or None for c, r in rows.items()} == expected


def test_the_notification_returned_is_the_one_stored(db, user, settings):
    settings.NOTIFICATION_THROTTLE_LIMIT = 0
    sent = send_notification(
        user=user,
        type="welcome",
        params={"name": "Ada"},
        channels=["email"],
        action_url="/inbox/",
        cancel_key="k-1",
    ).notification
    stored = Notification.objects.get(pk=sent.pk)
    fields = ("user_id", "type", "message_key", "message_params", "action_url", "cancel_key")
    assert [getattr(sent, f) for f in fields] == [getattr(stored, f) for f in fields]
    assert sent.created_at == stored.created_at
    assert not sent._state.adding
    # Saved again, it is updated, not inserted a second time.
    sent.action_url = "/elsewhere/"
    sent.save(update_fields=["action_url"])
    assert Notification.objects.get().action_url == "/elsewhere/"


def test_a_receiver_of_a_notifications_save_still_hears_each_send(db, user, settings):
    settings.NOTIFICATION_THROTTLE_LIMIT = 0
    heard = []

    def receiver(sender, instance, created, **kwargs):
        heard.append((instance.pk, created))

    post_save.connect(receiver, sender=Notification)
    try:
        notification = welcome(user, channels=["email"])
    finally:
        post_save.disconnect(receiver, sender=Notification)
    assert heard == [(notification.pk, True)]
    assert notification.deliveries.get().status == "pending"


def test_the_one_statement_send_reads_the_clock_the_claim_reads(db, user, settings):
    # The function that writes it keeps its plans for the session, and still reads now() as
    # the caller's statements do: here the tests' clock, set twice.
    settings.NOTIFICATION_THROTTLE_LIMIT = 0
    for moment in (datetime(2030, 1, 1, tzinfo=UTC), datetime(2031, 6, 1, tzinfo=UTC)):
        with database_clock_at(moment):
            sent = send_notification(
                user=user, type="welcome", params={"name": "Ada"}, channels=["email"]
            )
        row = NotificationDelivery.objects.get(notification=sent.notification)
        assert row.next_attempt_at == moment
