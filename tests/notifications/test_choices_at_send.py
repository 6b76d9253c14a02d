"""Choices hold until the send, on real PostgreSQL and a real SMTP server: what a recipient
changes after a delivery was queued (a category turned off, an address gone, quiet hours set,
moved or cleared, a digest chosen or dropped) applies when a drain claims it."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from notifications import outbox, worker
from notifications.enqueue import send_notification
from notifications.models import NotificationDelivery, SkipReason, Status
from recipients import preferences, tokens
from recipients.models import ChannelAddress, ChannelPreference, DigestChoice, Recipient
from recipients.windows import Digest
from tests.dbclock import database_clock_at

BERLIN = ZoneInfo("Europe/Berlin")
# 23:30 on a winter night in Berlin: inside quiet hours of 22:00–07:00, which end at 07:00.
# In the future, so a row queued now (its time is the real clock's: a column default reads
# pg_catalog.now(), which tests.dbclock leaves alone) is due by then.
NIGHT = datetime(2036, 1, 14, 23, 30, tzinfo=BERLIN)
MORNING = datetime(2036, 1, 15, 7, 0, tzinfo=BERLIN)


@pytest.fixture
def ada(django_user_model):
    return django_user_model.objects.create_user("ada", email="ada@example.com")


def welcome(user, **options):
    """A message of the category "account", which recipients choose."""
    return send_notification(
        user=user, type="welcome", params={"name": "Ada"}, channels=["email"], **options
    )


def reset(user):
    """A message of the category "security": required, never muted or held."""
    return send_notification(
        user=user,
        type="account.password_reset",
        params={"url": "https://v10r.example/r/1", "site_name": "v10r", "username": "ada"},
        channels=["email"],
    )


def the_row(enqueued) -> NotificationDelivery:
    return NotificationDelivery.objects.get(notification=enqueued.notification)


def make_due(*rows: NotificationDelivery) -> None:
    """Wind a scheduled row's time forward to now, as if its moment had come."""
    NotificationDelivery.objects.filter(pk__in=[r.pk for r in rows]).update(
        next_attempt_at=datetime(2000, 1, 1, tzinfo=UTC)
    )


def quiet_at_night(user, *, email: bool = True) -> None:
    Recipient.objects.update_or_create(
        user=user,
        defaults={
            "time_zone": "Europe/Berlin",
            "quiet_start": time(22),
            "quiet_end": time(7),
            "quiet_email": email,
        },
    )


# --- Turned off after the enqueue -------------------------------------------------------------


def test_a_scheduled_email_queued_before_a_one_click_unsubscribe_is_skipped_not_sent(
    db, ada, mail_to
):
    # The first email carries the unsubscribe link; a second was scheduled for tomorrow.
    welcome(ada)
    assert worker.drain_once().sent == 1
    [first] = mail_to.mailbox.messages
    scheduled = welcome(ada, send_at=datetime.now(UTC) + timedelta(days=1))
    url = urlsplit(first["List-Unsubscribe"][1:-1])
    response = Client(enforce_csrf_checks=True).post(
        url.path,
        data="List-Unsubscribe=One-Click",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 200
    make_due(the_row(scheduled))
    report = worker.drain_once()
    assert (report.claimed, report.sent, report.unwanted) == (1, 0, 1)
    row = the_row(scheduled)
    assert (row.status, row.skip_reason) == (Status.SKIPPED, SkipReason.OPTED_OUT)
    assert row.error_message == outbox.SKIPPED_AT_CLAIM
    assert len(mail_to.mailbox.messages) == 1  # the first one only


def test_a_category_turned_off_in_the_centre_skips_what_is_already_queued(db, ada, mail_to):
    queued = welcome(ada)
    preferences.choose(ada, choices={("account", "email"): False})
    assert worker.drain_once().unwanted == 1
    assert (the_row(queued).status, the_row(queued).skip_reason) == ("skipped", "opted_out")
    assert mail_to.mailbox.messages == []


def test_a_category_turned_on_again_before_the_send_is_sent(db, ada, mail_to):
    queued = welcome(ada)
    preferences.choose(ada, choices={("account", "email"): False})
    preferences.choose(ada, choices={("account", "email"): True})
    assert worker.drain_once().sent == 1
    assert the_row(queued).status == Status.SENT
    assert len(mail_to.mailbox.messages) == 1


def test_a_required_category_is_sent_whatever_the_stored_choices_say(db, ada, mail_to):
    queued = reset(ada)
    # The centre refuses this for a required category; a row written by hand says it anyway.
    ChannelPreference.objects.create(user=ada, category="security", channel="email", enabled=False)
    quiet_at_night(ada)
    with database_clock_at(NIGHT):
        assert worker.drain_once().sent == 1
    assert the_row(queued).status == Status.SENT


def test_an_address_removed_after_the_enqueue_is_skipped_no_address(db, ada):
    # The "blocked" test channel refuses every send: only a skip leaves the row unsent.
    address = ChannelAddress.objects.create(user=ada, channel="blocked", address="42")
    queued = send_notification(
        user=ada, type="welcome", params={"name": "Ada"}, channels=["blocked"]
    )
    address.delete()
    assert worker.drain_once().unwanted == 1
    row = the_row(queued)
    assert (row.status, row.skip_reason) == (Status.SKIPPED, SkipReason.NO_ADDRESS)


def test_the_recheck_reads_a_batch_in_a_fixed_number_of_queries_whatever_its_size(
    db, django_user_model
):
    def queries_for(count: int) -> int:
        for n in range(count):
            user = django_user_model.objects.create_user(f"r{count}-{n}", email=f"{n}@x.example")
            preferences.choose(user, choices={("account", "webhook"): True})
            quiet_at_night(user, email=False)
            send_notification(
                user=user, type="welcome", params={"name": "A"}, channels=["recording"]
            )
        with CaptureQueriesContext(connection) as seen:
            report = worker.drain_once(batch_size=100)
        assert report.sent == count
        return len(seen)

    assert queries_for(2) == queries_for(20)


def test_a_batch_whose_recipients_changed_nothing_since_reads_no_choices(db, django_user_model):
    # The in-app channel renders nothing: before the choices held until the send, a batch of
    # it read nothing about its recipients, and one whose recipients changed nothing still
    # reads nothing. A change since the enqueue makes the claim say so (rechoose).
    users = [
        django_user_model.objects.create_user(f"reader{n}", email=f"r{n}@example.com")
        for n in range(3)
    ]
    for user in users:
        preferences.choose(user, choices={("account", "webhook"): True})  # before: no matter
        send_notification(user=user, type="welcome", params={"name": "A"}, channels=["inapp"])
    with CaptureQueriesContext(connection) as seen:
        assert worker.drain_once(batch_size=10).sent == 3
    assert not any("channel_preferences" in q["sql"] for q in seen.captured_queries)

    later = send_notification(
        user=users[0], type="welcome", params={"name": "A"}, channels=["inapp"]
    )
    preferences.choose(users[0], choices={("account", "inapp"): False})
    with CaptureQueriesContext(connection) as seen:
        assert worker.drain_once(batch_size=10).unwanted == 1
    assert [q for q in seen.captured_queries if "channel_preferences" in q["sql"]]
    assert the_row(later).skip_reason == SkipReason.OPTED_OUT


# --- Quiet hours, set, moved or cleared after the enqueue --------------------------------------


def test_quiet_hours_set_after_the_enqueue_hold_the_row_at_its_claim_unspent(db, ada, mail_to):
    queued = welcome(ada)
    quiet_at_night(ada)
    with database_clock_at(NIGHT):
        report = worker.drain_once()
    assert (report.claimed, report.held, report.sent) == (1, 1, 0)
    row = the_row(queued)
    assert row.status == Status.PENDING
    assert row.next_attempt_at == row.held_until == MORNING
    assert row.attempts == row.attempt_base == 1  # the claim is not counted against the budget
    assert mail_to.mailbox.messages == []
    with database_clock_at(MORNING):
        assert worker.drain_once().sent == 1
    assert len(mail_to.mailbox.messages) == 1


def test_quiet_hours_that_do_not_hold_email_leave_an_email_to_go(db, ada, mail_to):
    welcome(ada)
    quiet_at_night(ada, email=False)
    with database_clock_at(NIGHT):
        assert worker.drain_once().sent == 1


def test_clearing_quiet_hours_releases_the_rows_they_held_at_once(db, ada, mail_to):
    quiet_at_night(ada)
    with database_clock_at(NIGHT):
        queued = welcome(ada)
        assert the_row(queued).held_until == MORNING
        recipient = Recipient.objects.get(user=ada)
        recipient.quiet_start = recipient.quiet_end = None
        recipient.save()
        row = the_row(queued)
        assert (row.held_until, row.held_from) == (None, None)
        assert worker.drain_once().sent == 1
    assert len(mail_to.mailbox.messages) == 1


def test_a_released_row_goes_back_to_its_own_time_not_to_now(db, ada):
    # Scheduled for 23:45, inside the window: held until 07:00; without quiet hours, 23:45.
    quiet_at_night(ada)
    at = NIGHT + timedelta(minutes=15)
    with database_clock_at(NIGHT):
        queued = welcome(ada, send_at=at)
        assert the_row(queued).next_attempt_at == MORNING
        Recipient.objects.filter(user=ada).get().save()  # unchanged: held again at the claim
        assert the_row(queued).next_attempt_at == at
        recipient = Recipient.objects.get(user=ada)
        recipient.quiet_start, recipient.quiet_end = None, None
        recipient.save()
        assert the_row(queued).next_attempt_at == at
        assert worker.drain_once().claimed == 0  # not yet: 23:45 has not come


def test_moving_the_window_holds_a_row_until_the_new_end(db, ada, mail_to):
    quiet_at_night(ada)
    with database_clock_at(NIGHT):
        queued = welcome(ada)
        recipient = Recipient.objects.get(user=ada)
        recipient.quiet_end = time(9)
        recipient.save()
        assert worker.drain_once().held == 1
    assert the_row(queued).next_attempt_at == MORNING + timedelta(hours=2)


def test_the_centres_quiet_hours_form_releases_what_it_held(db, ada, client, mail_to):
    quiet_at_night(ada)
    client.force_login(ada)
    with database_clock_at(NIGHT):
        queued = welcome(ada)
        response = client.post(
            "/account/notifications/",
            {"section": "quiet", "time_zone": "Europe/Berlin", "quiet_start": "", "quiet_end": ""},
        )
        assert response.status_code == 302
        assert Recipient.objects.get(user=ada).quiet_start is None
        assert the_row(queued).held_until is None
        assert worker.drain_once().sent == 1


# --- Digests ----------------------------------------------------------------------------------


def hourly(user):
    preferences.choose_digests(user, digests={"account": Digest("hourly")})


def carrier_of(enqueued) -> NotificationDelivery:
    return NotificationDelivery.objects.get(pk=enqueued.digested["email"])


def test_a_pending_digest_is_skipped_when_its_channel_is_turned_off_before_it_goes(
    db, ada, mail_to
):
    hourly(ada)
    gathered = welcome(ada)
    carrier = carrier_of(gathered)
    preferences.choose(ada, choices={("account", "email"): False})
    make_due(carrier)
    assert worker.drain_once().unwanted == 1
    carrier.refresh_from_db()
    assert (carrier.status, carrier.skip_reason) == (Status.SKIPPED, SkipReason.OPTED_OUT)
    assert mail_to.mailbox.messages == []


def test_dropping_a_digest_sends_what_it_gathered_now(db, ada, mail_to):
    hourly(ada)
    carrier = carrier_of(welcome(ada))
    assert worker.drain_once().claimed == 0  # the window has not ended
    preferences.choose_digests(ada, digests={"account": None})
    assert worker.drain_once().sent == 1
    carrier.refresh_from_db()
    assert carrier.status == Status.SENT
    assert "digest" in mail_to.mailbox.messages[0]["Subject"]


def test_a_digest_changed_to_a_sooner_window_goes_at_the_new_windows_end(db, ada):
    Recipient.objects.create(user=ada, time_zone="Europe/Berlin")
    with database_clock_at(NIGHT):
        preferences.choose_digests(ada, digests={"account": Digest("weekly", 9, 0)})
        carrier = carrier_of(welcome(ada))
        assert carrier.next_attempt_at > MORNING + timedelta(days=1)
        preferences.choose_digests(ada, digests={"account": Digest("daily", 9)})
    carrier.refresh_from_db()
    assert carrier.next_attempt_at == MORNING + timedelta(hours=2)


def test_a_digest_changed_to_a_later_window_keeps_its_own_end(db, ada):
    Recipient.objects.create(user=ada, time_zone="Europe/Berlin")
    with database_clock_at(NIGHT):
        preferences.choose_digests(ada, digests={"account": Digest("daily", 9)})
        carrier = carrier_of(welcome(ada))
        preferences.choose_digests(ada, digests={"account": Digest("weekly", 9, 0)})
    carrier.refresh_from_db()
    assert carrier.next_attempt_at == MORNING + timedelta(hours=2)


def test_quiet_hours_set_after_a_digest_gathered_hold_its_carrier(db, ada, mail_to):
    hourly(ada)
    carrier = carrier_of(welcome(ada))
    quiet_at_night(ada)
    make_due(carrier)
    with database_clock_at(NIGHT):
        assert worker.drain_once().held == 1
    carrier.refresh_from_db()
    assert (carrier.status, carrier.next_attempt_at) == (Status.PENDING, MORNING)
    assert DigestChoice.objects.filter(user=ada).exists()
    assert mail_to.mailbox.messages == []


# --- What the pages say -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "words"),
    [
        ("", "nothing you turn off is sent after you save, scheduled messages and digests"),
        ("/ru", "после сохранения не придёт ничего из отключённого"),
        ("/de", "Nach dem Speichern wird nichts mehr verschickt"),
    ],
)
def test_the_centre_says_a_change_reaches_what_is_already_queued(db, ada, client, prefix, words):
    client.force_login(ada)
    response = client.get(prefix + "/account/notifications/")
    assert response.status_code == 200
    assert words in response.content.decode()


def test_the_unsubscribe_page_says_nothing_more_is_sent_scheduled_ones_included(db, ada, client):
    token = tokens.make(user_id=ada.pk, category="account", channel="email")
    response = client.post(f"/de/unsubscribe/{token}/", {"List-Unsubscribe": "One-Click"})
    assert response.status_code == 200
    assert "auch keine geplanten Nachrichten und keine Zusammenfassungen" in (
        response.content.decode()
    )
