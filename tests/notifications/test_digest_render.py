"""How a carrier reads: its subject and body by kind and window, the items' times on the
recipient's clock (a time for a short window, date and time for a long one), the cap, and the
data a webhook gets. render() as a table; then one carrier through a drain to a channel."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from notifications import digests, worker
from notifications.enqueue import send_notification
from recipients.models import Cadence, DigestChoice
from tests.helpers import execute
from tests.notifications.channels import RecordingChannel
from transports import discord, telegram

JUNE = datetime(2026, 6, 1, 7, tzinfo=UTC)  # 09:00 in Berlin (summer time)


def items(*created: datetime, total: int | None = None, key: str = "welcome") -> digests.Items:
    newest = tuple(
        digests.Item(uuid.uuid4(), key, {"name": f"n{place}"}, moment)
        for place, moment in enumerate(created)
    )
    return digests.Items(total if total is not None else len(newest), newest)


def params(*, kind=digests.DIGEST_KIND, since: datetime, until: datetime) -> dict:
    return {
        "category": "account",
        "kind": kind,
        "since": since.isoformat(),
        "until": until.isoformat(),
    }


def render(window: timedelta, gathered: digests.Items, *, kind=digests.DIGEST_KIND, **where):
    return digests.render(
        params=params(kind=kind, since=JUNE, until=JUNE + window),
        items=gathered,
        language=where.get("language", "en"),
        time_zone=where.get("time_zone", "Europe/Berlin"),
    )


@pytest.mark.parametrize(
    ("window", "kind", "subject"),
    [
        (timedelta(hours=1), digests.DIGEST_KIND, "Your hourly digest: 2 notifications in"),
        (timedelta(hours=24), digests.DIGEST_KIND, "Your daily digest: 2 notifications in"),
        # The night the clocks go back a daily window lasts 25 hours: still a daily digest.
        (timedelta(hours=25), digests.DIGEST_KIND, "Your daily digest: 2 notifications in"),
        (timedelta(days=7), digests.DIGEST_KIND, "Your weekly digest: 2 notifications in"),
        (timedelta(hours=1), digests.THROTTLE_KIND, "2 more notifications in"),
    ],
)
def test_the_subject_says_which_digest_it_is(window, kind, subject):
    rendered = render(window, items(JUNE, JUNE), kind=kind)
    assert rendered.subject == f"{subject} “Your account”"


def test_one_item_is_counted_in_the_singular():
    rendered = render(timedelta(hours=24), items(JUNE))
    assert rendered.subject == "Your daily digest: 1 notification in “Your account”"
    assert rendered.body.startswith("1 notification in “Your account” since 06/01/2026 9 a.m.:")


def test_an_hourly_digest_lists_its_items_by_time_on_the_recipients_clock():
    # 07:05 and 07:40 UTC are 09:05 and 09:40 in Berlin; newest first as given.
    rendered = render(
        timedelta(hours=1), items(JUNE + timedelta(minutes=40), JUNE + timedelta(minutes=5))
    )
    lines = rendered.body.splitlines()
    assert lines[0] == "2 notifications in “Your account” since 9 a.m.:"
    assert lines[2:] == ["• 9:40 a.m. Welcome to v10r, n0", "• 9:05 a.m. Welcome to v10r, n1"]


def test_a_daily_digest_lists_its_items_by_date_and_time():
    rendered = render(timedelta(hours=24), items(JUNE + timedelta(hours=20)))
    # 03:00 UTC on the 2nd is 05:00 in Berlin.
    assert "• 06/02/2026 5 a.m. Welcome to v10r, n0" in rendered.body


def test_the_dates_and_times_are_in_the_recipients_format_and_zone():
    rendered = render(
        timedelta(hours=24),
        items(JUNE + timedelta(hours=20, minutes=15)),
        language="de",
        time_zone="America/New_York",
    )
    # 03:15 UTC on the 2nd is 23:15 on the 1st in New York; German writes it 01.06.2026 23:15.
    assert "• 01.06.2026 23:15 " in rendered.body
    assert "03.06.2026" not in rendered.body
    hourly = render(timedelta(hours=1), items(JUNE), language="de", time_zone="Europe/Berlin")
    assert "• 09:00 " in hourly.body


def test_a_throttle_digest_says_how_many_more_since_when():
    rendered = render(timedelta(hours=1), items(JUNE, JUNE), kind=digests.THROTTLE_KIND)
    assert rendered.body.startswith(
        "2 more notifications in “Your account” since 9 a.m., gathered into one message:"
    )


def test_past_the_cap_the_rest_are_counted():
    shown = [JUNE] * digests.SHOWN_ITEMS
    rendered = render(timedelta(hours=1), items(*shown, total=digests.SHOWN_ITEMS + 7))
    assert rendered.body.count("• ") == digests.SHOWN_ITEMS
    assert rendered.body.endswith("…and 7 more.")
    assert rendered.subject.startswith("Your hourly digest: 27 notifications")


def test_an_item_whose_message_is_gone_is_still_listed():
    rendered = render(timedelta(hours=1), items(JUNE, key="removed.since"))
    assert "• 9 a.m. A notification that can no longer be shown" in rendered.body
    assert rendered.params["items"][0]["type"] == "removed.since"


def test_the_data_a_webhook_gets_says_the_same_as_the_text():
    gathered = items(JUNE + timedelta(minutes=1), JUNE)
    rendered = render(timedelta(hours=1), gathered)
    assert rendered.params == {
        "kind": "digest",
        "category": "account",
        "since": JUNE.isoformat(),
        "until": (JUNE + timedelta(hours=1)).isoformat(),
        "count": 2,
        "items": [
            {
                "id": str(item.notification_id),
                "type": "welcome",
                "subject": f"Welcome to v10r, n{place}",
                "created_at": item.created_at.isoformat(),
            }
            for place, item in enumerate(gathered.newest)
        ],
    }


def test_telegram_and_discord_carry_the_listing_as_their_text():
    rendered = render(timedelta(hours=1), items(JUNE, JUNE))
    text = telegram.message_text(subject=rendered.subject, body=rendered.body, action_url="")
    assert "• 9 a.m. Welcome to v10r, n1" in text
    [embed] = discord.message(subject=rendered.subject, body=rendered.body, action_url="")["embeds"]
    assert embed["description"] == rendered.body


@pytest.mark.django_db
def test_a_carrier_reaches_its_channel_with_the_text_and_the_data(user):
    DigestChoice.objects.create(user=user, category="account", cadence=Cadence.HOURLY)
    for name in ("Ada", "Ben"):
        send_notification(user=user, type="welcome", params={"name": name}, channels=["recording"])
    execute("UPDATE notifications.notification_deliveries SET next_attempt_at = now()")
    assert worker.drain_once().sent == 1
    [outgoing] = RecordingChannel.seen
    assert outgoing.type == outgoing.message_key == digests.DIGEST
    assert outgoing.subject == "Your hourly digest: 2 notifications in “Your account”"
    assert [i["subject"] for i in outgoing.params["items"]] == [
        "Welcome to v10r, Ben",
        "Welcome to v10r, Ada",
    ]
    assert outgoing.params["count"] == 2 and outgoing.params["kind"] == "digest"
    assert "Welcome to v10r, Ben" in outgoing.body
