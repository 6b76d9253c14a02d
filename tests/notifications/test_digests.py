"""Digests as carrier deliveries: events join the open carrier of their window in their own
transactions, a claimed carrier is never joined, and a carrier is sent like any row, its items
rendered in the recipient's language. On real PostgreSQL, with the database clock moved."""

from __future__ import annotations

import email
import email.policy
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from notifications import digests, outbox, worker
from notifications.enqueue import send_notification
from notifications.models import (
    DigestItem,
    Notification,
    NotificationDelivery,
    Status,
    ThrottleCount,
)
from recipients import windows
from recipients.models import Cadence, DigestChoice, Recipient
from tests.dbclock import database_clock_at
from tests.helpers import welcome_by_email

pytestmark = pytest.mark.django_db

BERLIN = ZoneInfo("Europe/Berlin")
# A Monday in June, 08:10 in Berlin (06:10 UTC): before a daily 09:00 digest.
MORNING = datetime(2026, 6, 1, 8, 10, tzinfo=BERLIN)


@pytest.fixture
def reader(django_user_model):
    user = django_user_model.objects.create_user("leser", email="leser@example.com")
    Recipient.objects.create(user=user, language="de", time_zone="Europe/Berlin")
    DigestChoice.objects.create(user=user, category="account", cadence=Cadence.DAILY, hour=9)
    return user


def carriers():
    return NotificationDelivery.objects.filter(notification__type=digests.DIGEST)


def window(cadence, zone="Europe/Berlin", at=None, **when):
    return windows.window(windows.Digest(cadence, **when), time_zone=zone, at=at)


@pytest.mark.parametrize(
    ("at", "end"),
    [
        # Summer time: 09:00 in Berlin is 07:00 UTC.
        (datetime(2026, 6, 1, 8, 59, tzinfo=BERLIN), datetime(2026, 6, 1, 7, tzinfo=UTC)),
        (datetime(2026, 6, 1, 9, 0, tzinfo=BERLIN), datetime(2026, 6, 2, 7, tzinfo=UTC)),
        # The night the clocks go back: the window lasts 25 hours and still ends at 09:00.
        (datetime(2026, 10, 24, 12, tzinfo=BERLIN), datetime(2026, 10, 25, 8, tzinfo=UTC)),
        # The night they go forward: 23 hours.
        (datetime(2026, 3, 28, 12, tzinfo=BERLIN), datetime(2026, 3, 29, 7, tzinfo=UTC)),
    ],
)
def test_a_daily_window_ends_at_the_chosen_hour_on_the_recipients_clock(at, end):
    with database_clock_at(datetime(2025, 1, 1, tzinfo=UTC)):
        found = window(Cadence.DAILY, at=at, hour=9)
    assert found.end == end
    assert found.end.astimezone(BERLIN).hour == 9
    assert found.end.astimezone(BERLIN) - found.start.astimezone(BERLIN) == timedelta(days=1)


def test_the_autumn_window_is_25_hours_long():
    with database_clock_at(datetime(2025, 1, 1, tzinfo=UTC)):
        found = window(Cadence.DAILY, at=datetime(2026, 10, 24, 12, tzinfo=BERLIN), hour=9)
    assert found.end - found.start == timedelta(hours=25)


def test_a_weekly_window_ends_on_the_chosen_weekday():
    with database_clock_at(datetime(2025, 1, 1, tzinfo=UTC)):
        # Monday 1 June, 08:10: a Monday 09:00 digest ends in 50 minutes, a Friday one on the 5th.
        monday = window(Cadence.WEEKLY, at=MORNING, hour=9, weekday=0)
        friday = window(Cadence.WEEKLY, at=MORNING, hour=9, weekday=4)
        # At 09:00 itself the Monday window has closed: the next one ends a week later.
        later = window(Cadence.WEEKLY, at=MORNING.replace(hour=9, minute=0), hour=9, weekday=0)
    assert monday.end == datetime(2026, 6, 1, 9, tzinfo=BERLIN)
    assert friday.end == datetime(2026, 6, 5, 9, tzinfo=BERLIN)
    assert later.end == datetime(2026, 6, 8, 9, tzinfo=BERLIN)


def test_an_hourly_window_ends_at_the_next_hour_in_a_half_hour_zone():
    kolkata = ZoneInfo("Asia/Kolkata")
    with database_clock_at(datetime(2025, 1, 1, tzinfo=UTC)):
        found = window(
            Cadence.HOURLY, "Asia/Kolkata", at=datetime(2026, 6, 1, 14, 5, tzinfo=kolkata)
        )
    assert found.end == datetime(2026, 6, 1, 15, tzinfo=kolkata)


def test_ten_events_make_one_carrier_due_at_the_digest_hour(reader):
    with database_clock_at(MORNING):
        results = [welcome_by_email(reader, f"Gast {n}") for n in range(10)]
    assert all(r.digested.keys() == {"email"} and not r.queued for r in results)
    [carrier] = carriers()
    assert carrier.status == Status.PENDING
    assert carrier.next_attempt_at == datetime(2026, 6, 1, 9, tzinfo=BERLIN)
    assert DigestItem.objects.filter(carrier=carrier).count() == 10
    # The events themselves have no delivery of their own on the channel.
    assert not NotificationDelivery.objects.exclude(pk=carrier.pk).exists()


def test_the_digest_is_one_email_in_the_recipients_language_listing_all_ten(reader, mail_to):
    with database_clock_at(MORNING):
        for n in range(10):
            welcome_by_email(reader, f"Gast {n}")
        assert worker.drain_once().claimed == 0  # not yet due
    with database_clock_at(datetime(2026, 6, 1, 9, 0, 1, tzinfo=BERLIN)):
        assert worker.drain_once().sent == 1
    [raw] = mail_to.mailbox.raw
    message = email.message_from_bytes(raw, policy=email.policy.default)
    body = message.get_content()
    assert message["Content-Language"] == "de"
    assert "10" in message["Subject"]
    for n in range(10):
        assert f"Gast {n}" in body
    # Newest first.
    assert body.index("Gast 9") < body.index("Gast 0")
    # The digest's category may be turned off from the email itself.
    assert message["List-Unsubscribe"].startswith("<https://v10r.example/")


def test_an_event_after_its_carrier_was_claimed_joins_the_next_window(reader):
    with database_clock_at(MORNING):
        welcome_by_email(reader, "früh")
    with database_clock_at(datetime(2026, 6, 1, 9, 0, 1, tzinfo=BERLIN)):
        [claimed] = outbox.claim(batch_size=10)
    # An event whose transaction began before 09:00 computes the 09:00 window, finds its
    # carrier claimed, and joins tomorrow's.
    with database_clock_at(datetime(2026, 6, 1, 8, 59, 59, tzinfo=BERLIN)):
        late = welcome_by_email(reader, "spät")
    assert late.digested["email"] != claimed.id
    tomorrow = NotificationDelivery.objects.get(pk=late.digested["email"])
    assert tomorrow.next_attempt_at == datetime(2026, 6, 2, 9, tzinfo=BERLIN)
    assert DigestItem.objects.filter(carrier_id=claimed.id).count() == 1


def test_a_required_category_is_never_gathered(django_user_model):
    user = django_user_model.objects.create_user("sec", email="sec@example.com")
    DigestChoice.objects.create(user=user, category="security", cadence=Cadence.HOURLY)
    result = send_notification(
        user=user,
        type="account.password_reset",
        params={"username": "sec", "site_name": "v10r", "url": "https://x/"},
        channels=["email"],
    )
    assert result.queued == ("email",) and not result.digested


def test_an_opted_out_channel_gets_no_carrier_but_a_skipped_row(reader):
    from recipients import preferences

    preferences.choose(reader, choices={("account", "email"): False})
    with database_clock_at(MORNING):
        result = welcome_by_email(reader, "x")
    assert result.skipped == {"email": "opted_out"} and not result.digested
    assert not carriers().exists()


def test_a_digest_due_in_quiet_hours_waits_for_their_end(reader):
    Recipient.objects.filter(user=reader).update(
        quiet_start=time(8, 30), quiet_end=time(10), quiet_email=True
    )
    with database_clock_at(MORNING):
        welcome_by_email(reader, "x")
    [carrier] = carriers()
    assert carrier.next_attempt_at == datetime(2026, 6, 1, 10, tzinfo=BERLIN)
    assert carrier.held_until == carrier.next_attempt_at


def test_past_the_throttle_events_fold_into_one_digest(django_user_model, settings, mail_to):
    settings.NOTIFICATION_THROTTLES = {"account": (3, 3600)}
    user = django_user_model.objects.create_user("many", email="many@example.com")
    start = datetime(2027, 6, 1, 14, 0, 5, tzinfo=UTC)  # after the rows' own now()
    with database_clock_at(start):
        results = [welcome_by_email(user, f"n{n}") for n in range(10)]
        assert worker.drain_once().sent == 3
    assert [bool(r.queued) for r in results] == [True] * 3 + [False] * 7
    [carrier] = carriers()
    assert carrier.next_attempt_at == datetime(2027, 6, 1, 15, tzinfo=UTC)
    with database_clock_at(datetime(2027, 6, 1, 15, 0, 1, tzinfo=UTC)):
        assert worker.drain_once().sent == 1
    last = email.message_from_bytes(mail_to.mailbox.raw[-1], policy=email.policy.default)
    body = last.get_content()
    # A window of an hour is read by the clock alone.
    assert "7 more notifications in “Your account” since 2 p.m., gathered into one" in body
    assert last["Subject"] == "7 more notifications in “Your account”"
    assert all(f"n{n}" in body for n in range(3, 10))
    assert Notification.objects.count() == 11  # ten events and one carrier


def test_a_send_scheduled_for_tomorrow_is_neither_counted_nor_folded_into_this_hours_throttle(
    django_user_model, settings
):
    settings.NOTIFICATION_THROTTLES = {"account": (1, 3600)}
    user = django_user_model.objects.create_user("planner", email="planner@example.com")
    start = datetime(2027, 6, 1, 14, 0, 5, tzinfo=UTC)
    tomorrow = start + timedelta(days=1)
    with database_clock_at(start):
        first = welcome_by_email(user, "now")
        scheduled = send_notification(
            user=user,
            type="welcome",
            params={"name": "tomorrow"},
            channels=["email"],
            send_at=tomorrow,
        )
        second = welcome_by_email(user, "again")
    assert (first.queued, scheduled.queued, second.queued) == (("email",), ("email",), ())
    assert scheduled.notification.deliveries.get().next_attempt_at == tomorrow
    # Only the hour's second send is past its limit of one, and only it is in the carrier.
    [carrier] = carriers()
    assert second.digested == {"email": carrier.id}
    assert list(DigestItem.objects.values_list("notification_id", flat=True)) == [
        second.notification.id
    ]
    hour = ThrottleCount.objects.get(user=user, category="account")
    assert (hour.window_end, hour.sent) == (datetime(2027, 6, 1, 15, tzinfo=UTC), 2)


def test_a_required_message_is_never_folded_into_a_throttle_digest(django_user_model, settings):
    # Even a throttle named for the category, or a site-wide one of a single send, is ignored.
    settings.NOTIFICATION_THROTTLES = {"security": (1, 3600)}
    settings.NOTIFICATION_THROTTLE_LIMIT = 1
    user = django_user_model.objects.create_user("locked", email="locked@example.com")
    results = [
        send_notification(
            user=user,
            type="account.password_reset",
            params={"username": "locked", "site_name": "v10r", "url": f"https://x/{n}"},
            channels=["email"],
        )
        for n in range(5)
    ]
    assert [(r.queued, r.digested) for r in results] == [(("email",), {})] * 5
    assert not carriers().exists()
    assert not ThrottleCount.objects.exists()


END = datetime(2027, 6, 1, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    "other",
    [
        {"user_id": 2},
        {"kind": digests.THROTTLE_KIND},
        {"category": "security"},
        {"end": END + timedelta(hours=1)},
    ],
    ids=["user", "kind", "category", "window"],
)
def test_carriers_differing_in_any_one_part_have_distinct_ids(other):
    # One recipient's digests of two categories in one window and channel are two carriers:
    # one id would put both categories' items in the first one made.
    one = {"user_id": 1, "kind": digests.DIGEST_KIND, "category": "account", "end": END}
    assert digests.carrier_id(**one) != digests.carrier_id(**(one | other))
    assert digests.carrier_id(**one) == digests.carrier_id(**dict(one))
