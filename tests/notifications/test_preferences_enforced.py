"""The recipient's preferences kept at enqueue, on real PostgreSQL: every delivery asked for is
written, queued or skipped with its reason, in the caller's transaction; quiet hours hold a
delivery until the window ends, by the database clock."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import transports as channels
from notifications import outbox, worker
from notifications.enqueue import Enqueued, add_channels, send_notification
from notifications.models import Notification, NotificationDelivery, Status
from recipients import preferences
from recipients.models import ChannelAddress, ChannelPreference, Recipient
from tests.dbclock import database_clock_at
from tests.httppeers import TelegramPeer

BERLIN = ZoneInfo("Europe/Berlin")
TOKEN = "123456:test-token"


def welcome(user, *, channels=None, **options) -> Enqueued:
    """The welcome message (category account) for user."""
    return send_notification(
        user=user, type="welcome", params={"name": "Ada"}, channels=channels, **options
    )


def reset(user, *, channels=None) -> Enqueued:
    """A password reset (category security: required) for user."""
    return send_notification(
        user=user,
        type="account.password_reset",
        params={"url": "https://v10r.example/r/1", "site_name": "v10r", "username": "reader"},
        channels=channels,
    )


def rows(notification: Notification) -> list[tuple[str, str, str]]:
    return [
        (d.channel, d.status, d.skip_reason) for d in notification.deliveries.order_by("channel")
    ]


# --- Skip reasons ---------------------------------------------------------------------------


def test_a_channel_the_recipient_turned_off_is_written_as_skipped_opted_out(db, user):
    preferences.choose(user, choices={("account", "email"): False})
    enqueued = welcome(user, channels=["email", "recording"])
    assert enqueued.queued == ("recording",)
    assert enqueued.skipped == {"email": "opted_out"}
    assert rows(enqueued.notification) == [
        ("email", "skipped", "opted_out"),
        ("recording", "pending", ""),
    ]


def test_a_categorys_default_off_is_an_opt_out_too(db, user):
    # Account news reaches a webhook only when asked for (catalogue.CATEGORIES["account"]).
    ChannelAddress.objects.create(user=user, channel="webhook", address="https://h.example/")
    enqueued = welcome(user, channels=["webhook"])
    assert (enqueued.queued, enqueued.skipped) == ((), {"webhook": "opted_out"})
    preferences.choose(user, choices={("account", "webhook"): True})
    assert welcome(user, channels=["webhook"]).queued == ("webhook",)


def test_a_channel_without_an_address_is_written_as_skipped_no_address(db, django_user_model):
    nobody = django_user_model.objects.create_user("nobody")  # no email, no chat id
    enqueued = welcome(nobody, channels=["email", "telegram", "recording"])
    assert enqueued.queued == ("recording",)
    assert enqueued.skipped == {"email": "no_address", "telegram": "no_address"}


def test_a_channel_opted_out_of_with_no_address_on_it_is_skipped_no_address(db, user):
    # No address is the reason it cannot go, whatever the choice: telling staff the user
    # opted out would send them to the wrong setting.
    preferences.choose(user, choices={("account", "telegram"): False})
    enqueued = welcome(user, channels=["telegram", "recording"])
    assert (enqueued.queued, enqueued.skipped) == (("recording",), {"telegram": "no_address"})
    assert rows(enqueued.notification) == [
        ("recording", "pending", ""),
        ("telegram", "skipped", "no_address"),
    ]


def test_a_turned_off_address_is_written_as_skipped_channel_off(db, user):
    ChannelAddress.objects.create(user=user, channel="telegram", address="42", is_active=False)
    enqueued = welcome(user, channels=["telegram"])
    assert enqueued.skipped == {"telegram": "channel_off"}
    # A new active address beside the old one: reachable again.
    ChannelAddress.objects.create(user=user, channel="telegram", address="43")
    assert welcome(user, channels=["telegram"]).queued == ("telegram",)


def test_with_no_channels_named_an_opted_out_channel_is_recorded_as_skipped(db, user):
    ChannelAddress.objects.create(user=user, channel="telegram", address="42")
    preferences.choose(user, choices={("account", "telegram"): False})
    enqueued = welcome(user)
    assert (enqueued.queued, enqueued.skipped) == (("email", "inapp"), {"telegram": "opted_out"})


def test_every_row_written_is_skipped_when_nothing_is_wanted_and_nothing_wakes(
    db, user, django_capture_on_commit_callbacks
):
    preferences.choose(user, choices={("account", "email"): False})
    with django_capture_on_commit_callbacks() as woken:
        enqueued = welcome(user, channels=["email"])
    assert (enqueued.queued, enqueued.skipped) == ((), {"email": "opted_out"})
    assert woken == []
    with django_capture_on_commit_callbacks() as woken:
        welcome(user, channels=["recording"])
    assert len(woken) == 1


def test_skipped_rows_are_never_claimed(db, user):
    preferences.choose(user, choices={("account", "email"): False})
    welcome(user, channels=["email"])
    assert NotificationDelivery.objects.due().count() == 0
    assert outbox.claim(batch_size=10) == []
    assert NotificationDelivery.objects.get().status == Status.SKIPPED


# --- Required categories --------------------------------------------------------------------


def test_a_required_category_keeps_its_first_reachable_channel_whatever_is_stored(db, user):
    # The preference centre refuses this; a row written some other way must not mute it.
    ChannelPreference.objects.create(user=user, category="security", channel="email", enabled=False)
    enqueued = reset(user, channels=["telegram", "email"])
    assert enqueued.queued == ("email",)
    assert enqueued.skipped == {"telegram": "no_address"}


def test_a_required_category_opted_out_everywhere_is_kept_on_a_channel_with_an_address(db, user):
    # Written some other way than the centre: security off on telegram (where the user has
    # no chat id) and on email (where they have an address). The one kept on is email.
    for channel in ("telegram", "email"):
        ChannelPreference.objects.create(
            user=user, category="security", channel=channel, enabled=False
        )
    enqueued = reset(user, channels=["telegram", "email"])
    assert (enqueued.queued, enqueued.skipped) == (("email",), {"telegram": "no_address"})
    assert rows(enqueued.notification) == [
        ("email", "pending", ""),
        ("telegram", "skipped", "no_address"),
    ]


def test_a_required_category_with_another_channel_on_keeps_the_opt_out(db, user):
    ChannelAddress.objects.create(user=user, channel="telegram", address="42")
    preferences.choose(user, choices={("security", "email"): False})
    enqueued = reset(user, channels=["email", "telegram"])
    assert (enqueued.queued, enqueued.skipped) == (("telegram",), {"email": "opted_out"})


def test_a_required_category_with_no_address_at_all_is_still_recorded(
    db, django_user_model, settings
):
    nobody = django_user_model.objects.create_user("nobody")
    # Every account has an inbox, which reaches them.
    assert reset(nobody).queued == ("inapp",)
    # On a site without one, the email they do not have is recorded as skipped.
    settings.DELIVERY_CHANNELS = {
        name: path for name, path in settings.DELIVERY_CHANNELS.items() if name != "inapp"
    }
    enqueued = reset(nobody)
    assert (enqueued.queued, enqueued.skipped) == ((), {"email": "no_address"})


# --- The result, the transaction, the cost --------------------------------------------------


def test_the_result_is_frozen_and_names_the_notification(db, user):
    enqueued = welcome(user, channels=["recording"])
    assert isinstance(enqueued.notification, Notification)
    assert enqueued.notification.type == enqueued.notification.message_key == "welcome"
    with pytest.raises(dataclasses.FrozenInstanceError):
        enqueued.queued = ()


def test_a_rollback_of_the_callers_transaction_leaves_no_row_skipped_or_queued(db, user):
    preferences.choose(user, choices={("account", "email"): False})
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueued = welcome(user, channels=["email", "recording"])
        assert enqueued.skipped == {"email": "opted_out"}
        raise RuntimeError("the caller's own work failed")
    assert Notification.objects.count() == 0
    assert NotificationDelivery.objects.count() == 0


def test_an_unknown_type_is_refused_naming_the_known_ones(db, user):
    with pytest.raises(ValueError, match=r"Unknown notification type 'order\.shipped'; known"):
        send_notification(user=user, type="order.shipped", channels=["email"])
    assert Notification.objects.count() == 0


def test_enqueue_reads_the_preferences_in_one_query_and_writes_in_three(db, user):
    with CaptureQueriesContext(connection) as queries:
        welcome(user, channels=["email"])
    sql = [q["sql"] for q in queries.captured_queries]
    sql = [s for s in sql if s.split()[0] not in {"SAVEPOINT", "RELEASE"}]
    # The recipient's settings, choices and digests together; the notification, its count in
    # the category's throttle window, and its deliveries.
    assert [s.split()[0] for s in sql] == ["SELECT", "INSERT", "INSERT", "INSERT"]
    assert "throttle_counts" in sql[2]


def test_add_channels_keeps_the_preferences_too(db, user):
    notification = welcome(user, channels=["recording"]).notification
    preferences.choose(user, choices={("account", "email"): False})
    added = add_channels(notification=notification, channels=["email", "recording"])
    assert (added.queued, added.skipped) == ((), {"email": "opted_out"})
    assert rows(notification) == [("email", "skipped", "opted_out"), ("recording", "pending", "")]


def test_a_required_category_already_sent_elsewhere_keeps_an_added_channel_off(db, user):
    # Security off on email, on elsewhere: the notification goes out on "recording"; adding
    # email later must not send it there against the choice, since it reaches the user already.
    preferences.choose(user, choices={("security", "email"): False})
    notification = reset(user, channels=["recording"]).notification
    added = add_channels(notification=notification, channels=["email"])
    assert (added.queued, added.skipped) == ((), {"email": "opted_out"})


def test_a_required_category_skipped_everywhere_so_far_is_kept_on_an_added_channel(db, user):
    preferences.choose(user, choices={("security", "recording"): False})
    notification = reset(user, channels=["recording"]).notification
    assert rows(notification) == [("recording", "pending", "")]  # the first is kept
    # A notification whose only row was skipped (no address) gets its next channel kept.
    user.email = ""
    user.save()
    other = reset(user, channels=["email"]).notification
    assert rows(other) == [("email", "skipped", "no_address")]
    added = add_channels(notification=other, channels=["recording"])
    assert added.queued == ("recording",)


# --- Quiet hours ----------------------------------------------------------------------------


@pytest.fixture
def telegram_peer(settings):
    """The Bot API on loopback, with the telegram channel pointed at it."""
    peer = TelegramPeer(token=TOKEN)
    settings.TELEGRAM_BOT_TOKEN = TOKEN
    settings.TELEGRAM_API_BASE_URL = peer.base_url
    channels._load.cache_clear()
    yield peer
    for channel in channels.configured().values():
        channel.close()
    channels._load.cache_clear()
    peer.stop()


@pytest.fixture
def night_owl(user):
    """The reader, in Berlin, quiet from 22:00 to 07:00, with a Telegram chat."""
    Recipient.objects.create(
        user=user, time_zone="Europe/Berlin", quiet_start=time(22), quiet_end=time(7)
    )
    ChannelAddress.objects.create(user=user, channel="telegram", address="4242")
    return user


def test_a_telegram_message_at_23_in_berlin_waits_for_07_and_is_sent_then(
    db, night_owl, telegram_peer
):
    evening = datetime(2026, 12, 2, 23, tzinfo=BERLIN)
    morning = datetime(2026, 12, 3, 7, tzinfo=BERLIN)
    with database_clock_at(evening):
        enqueued = welcome(night_owl, channels=["telegram"])
    assert enqueued.queued == ("telegram",)
    delivery = NotificationDelivery.objects.get()
    assert delivery.held_until == delivery.next_attempt_at == morning
    assert delivery.held_until.astimezone(BERLIN).time() == time(7)
    with database_clock_at(morning - timedelta(minutes=1)):
        assert outbox.claim(batch_size=10) == []
    with database_clock_at(morning):
        report = worker.drain_once()
    assert report.sent == 1
    [message] = telegram_peer.messages
    assert message["chat_id"] == "4242"
    assert NotificationDelivery.objects.get().status == Status.SENT


def test_quiet_hours_hold_only_interrupting_channels_and_never_a_required_category(db, night_owl):
    with database_clock_at(datetime(2026, 12, 2, 23, tzinfo=BERLIN)):
        welcome(night_owl, channels=["telegram", "email"])
        reset(night_owl, channels=["telegram"])
    held = dict(
        NotificationDelivery.objects.values_list("notification__type", "channel").filter(
            held_until__isnull=False
        )
    )
    assert held == {"welcome": "telegram"}
    assert NotificationDelivery.objects.filter(held_until__isnull=True).count() == 2


def test_quiet_hours_hold_a_browser_push_as_they_hold_a_bot_message(db, night_owl):
    ChannelAddress.objects.create(
        user=night_owl, channel="webpush", address="https://push.example.com/send/1"
    )
    with database_clock_at(datetime(2026, 12, 2, 23, tzinfo=BERLIN)):
        welcome(night_owl, channels=["webpush"])
    delivery = NotificationDelivery.objects.get()
    assert delivery.channel == "webpush"
    assert delivery.held_until == datetime(2026, 12, 3, 7, tzinfo=BERLIN)


def test_quiet_hours_hold_email_when_the_recipient_asks(db, night_owl):
    Recipient.objects.filter(user=night_owl).update(quiet_email=True)
    with database_clock_at(datetime(2026, 12, 2, 23, tzinfo=BERLIN)):
        welcome(night_owl, channels=["email"])
    assert NotificationDelivery.objects.get().held_until == datetime(2026, 12, 3, 7, tzinfo=BERLIN)


def test_a_delivery_due_outside_the_window_is_not_held(db, night_owl):
    with database_clock_at(datetime(2026, 12, 2, 21, 59, tzinfo=BERLIN)):
        welcome(night_owl, channels=["telegram"])
    delivery = NotificationDelivery.objects.get()
    assert delivery.held_until is None
    assert delivery.next_attempt_at <= datetime.now(UTC)


def test_a_send_at_inside_the_window_is_held_to_its_end(db, night_owl):
    with database_clock_at(datetime(2026, 12, 2, 12, tzinfo=BERLIN)):
        welcome(night_owl, channels=["telegram"], send_at=datetime(2026, 12, 3, 1, tzinfo=BERLIN))
        welcome(night_owl, channels=["recording"], send_at=datetime(2026, 12, 3, 1, tzinfo=BERLIN))
    by_channel = {d.channel: d for d in NotificationDelivery.objects.all()}
    assert by_channel["telegram"].next_attempt_at == datetime(2026, 12, 3, 7, tzinfo=BERLIN)
    # A channel quiet hours do not hold keeps the time its sender asked for.
    assert by_channel["recording"].next_attempt_at == datetime(2026, 12, 3, 1, tzinfo=BERLIN)
    assert by_channel["recording"].held_until is None


# --- What staff see -------------------------------------------------------------------------

DELIVERIES = "/admin/notifications/notificationdelivery/"


def test_the_admin_lists_a_skipped_row_with_its_reason_and_filters_by_reason(
    db, admin_client, user
):
    preferences.choose(user, choices={("account", "email"): False})
    welcome(user, channels=["email", "telegram", "recording"])
    page = admin_client.get(DELIVERIES).content.decode()
    assert '<span class="status-badge status-skipped">skipped (opted out)</span>' in page
    assert '<span class="status-badge status-skipped">skipped (no address)</span>' in page
    listed = admin_client.get(f"{DELIVERIES}?skip_reason=opted_out").context["cl"].result_list
    assert [(d.channel, d.skip_reason) for d in listed] == [("email", "opted_out")]
    # A reason no row can have lists nothing, and fails nothing.
    for bogus in ("nope", "x" * 500):
        response = admin_client.get(DELIVERIES, {"skip_reason": bogus})
        assert response.status_code == 200
        assert list(response.context["cl"].result_list) == []
    # A NUL is refused before any view, as in every other filter.
    assert admin_client.get(f"{DELIVERIES}?skip_reason=%00").status_code == 400
    skipped = NotificationDelivery.objects.get(channel="email")
    detail = admin_client.get(f"{DELIVERIES}{skipped.pk}/change/").content.decode()
    assert "opted out" in detail
    # The notification's own page lists its deliveries with the same words.
    page = f"/admin/notifications/notification/{skipped.notification_id}/change/"
    assert "skipped (opted out)" in admin_client.get(page).content.decode()


def test_the_admin_shows_a_held_row_held_until_the_windows_end_in_the_recipients_zone(
    db, admin_client, night_owl
):
    with database_clock_at(datetime(2026, 12, 2, 23, tzinfo=BERLIN)):
        welcome(night_owl, channels=["telegram"])
        page = admin_client.get(DELIVERIES).content.decode()
        delivery = NotificationDelivery.objects.get()
        detail = admin_client.get(f"{DELIVERIES}{delivery.pk}/change/").content.decode()
    assert "held until 07:00 (Europe/Berlin)" in page
    assert "held until 07:00 (Europe/Berlin)" in detail
