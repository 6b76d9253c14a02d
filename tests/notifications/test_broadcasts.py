"""A broadcast gives each recipient what send_notification would have: the same rows, statuses,
reasons and due times, decided for a chunk at once. Twins (two users set up alike) are sent the
same message, one by a broadcast, one by send_notification, on a stopped database clock, and
their rows compared field by field."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.db import connection

from notifications import broadcasts, outbox
from notifications.drain import LANE_NAMES
from notifications.enqueue import send_notification
from notifications.models import (
    Broadcast,
    BroadcastChunk,
    ChunkStatus,
    DigestItem,
    Notification,
    NotificationDelivery,
)
from recipients import audiences, catalogue, preferences
from recipients.models import (
    Audience,
    AudienceKind,
    ChannelAddress,
    ChannelPreference,
    Recipient,
)
from recipients.windows import Digest
from tests.dbclock import database_clock_at

pytestmark = pytest.mark.django_db

# 23:30 UTC: 00:30 in Berlin, inside a 22:00-07:00 night.
NOW = datetime(2026, 12, 7, 23, 30, tzinfo=UTC)
PARAMS = {"name": "Ada"}


def plain(user):
    pass


def no_email(user):
    user.email = ""
    user.save(update_fields=["email"])


def opted_out_of_email(user):
    preferences.choose(user, choices={("account", "email"): False})


def telegram(user):
    ChannelAddress.objects.create(user=user, channel="telegram", address="123456")


def telegram_off(user):
    ChannelAddress.objects.create(user=user, channel="telegram", address="123456", is_active=False)


def asleep(user):
    Recipient.objects.create(
        user=user,
        time_zone="Europe/Berlin",
        quiet_start=time(22),
        quiet_end=time(7),
        quiet_email=True,
    )
    telegram(user)


def asleep_but_email_waits(user):
    Recipient.objects.create(
        user=user, time_zone="Europe/Berlin", quiet_start=time(22), quiet_end=time(7)
    )
    telegram(user)


def awake(user):
    Recipient.objects.create(
        user=user, time_zone="Asia/Tokyo", quiet_start=time(13), quiet_end=time(15)
    )
    telegram(user)


def unknown_zone(user):
    Recipient.objects.create(
        user=user, time_zone="Mars/Olympus", quiet_start=time(22), quiet_end=time(7)
    )
    telegram(user)


def daily_digest(user):
    preferences.choose_digests(user, digests={"account": Digest("daily", 9)})


def digest_and_asleep(user):
    asleep(user)
    preferences.choose_digests(user, digests={"account": Digest("hourly")})


def everything_off(user):
    telegram(user)
    preferences.choose(
        user,
        choices={
            ("account", "email"): False,
            ("account", "telegram"): False,
            ("account", "inapp"): False,
        },
    )


def only_telegram_for_security(user):
    telegram(user)
    preferences.choose(user, choices={("security", "email"): False})


def security_all_off(user):
    # What the preference centre refuses to save, but stored choices may say all the same
    # (written past it here): the required rule keeps the first channel on.
    telegram(user)
    for channel in ("email", "telegram", "inapp"):
        ChannelPreference.objects.create(
            user=user, category="security", channel=channel, enabled=False
        )


PROFILES = [
    plain,
    no_email,
    opted_out_of_email,
    telegram,
    telegram_off,
    asleep,
    asleep_but_email_waits,
    awake,
    unknown_zone,
    daily_digest,
    digest_and_asleep,
    everything_off,
    only_telegram_for_security,
    security_all_off,
]


@pytest.fixture
def twins(django_user_model):
    """Per profile, one user for the broadcast and one for send_notification."""
    pairs = []
    for number, profile in enumerate(PROFILES):
        pair = []
        for side in ("b", "s"):
            user = django_user_model.objects.create_user(
                f"{side}{number}", email=f"{side}{number}@example.com"
            )
            profile(user)
            pair.append(user)
        pairs.append(tuple(pair))
    return pairs


def expand_all() -> int:
    recipients = 0
    while (expanded := broadcasts.expand_next(lanes=LANE_NAMES)) is not None:
        recipients += expanded.recipients
    return recipients


def _at(value):
    """A time as compared: "now" for the moment of the send, whichever clock stamped it (a
    column's default reads the real one, which the stopped clock does not move)."""
    if isinstance(value, datetime) and (
        value == NOW or abs(value - datetime.now(UTC)) < timedelta(minutes=10)
    ):
        return "now"
    return value


def rows_of(notification: Notification) -> list[tuple]:
    rows = NotificationDelivery.objects.filter(notification=notification).values_list(
        "channel",
        "lane",
        "status",
        "skip_reason",
        "next_attempt_at",
        "held_until",
        "held_from",
        "decided_version",
        "attempts",
    )
    carriers = DigestItem.objects.filter(notification=notification).values_list(
        "carrier__channel",
        "carrier__next_attempt_at",
        "carrier__held_until",
        "carrier__notification__message_params",
    )
    rows = [tuple(map(_at, row)) for row in rows]
    carriers = [("carrier", *map(_at, c[:3]), c[3]["kind"]) for c in carriers]
    return sorted(rows, key=repr) + sorted(carriers, key=repr)


CASES = {
    "own channels": {"type": "welcome", "params": PARAMS},
    "named channels": {
        "type": "welcome",
        "params": PARAMS,
        "channels": ["telegram", "email", "inapp"],
    },
    "required category": {
        "type": "account.sign_up_taken",
        "params": {"site_name": "v10r", "username": "ada", "sign_in_url": "/", "reset_url": "/"},
    },
    "scheduled, low lane": {
        "type": "welcome",
        "params": PARAMS,
        "send_at": NOW + timedelta(hours=3),
        "priority": "low",
        "cancel_key": "winter-news",
    },
}


@pytest.mark.parametrize("case", CASES)
def test_each_recipient_gets_what_a_send_of_their_own_gives(case, twins):
    arguments = CASES[case]
    with database_clock_at(NOW):
        broadcast = broadcasts.send_broadcast(
            audience=[b for b, _ in twins], action_url="/news/", **arguments
        )
        for _, single in twins:
            send_notification(user=single, action_url="/news/", **arguments)
        assert expand_all() == len(twins)
    assert broadcast.recipients == len(twins)
    for (by_broadcast, by_one), profile in zip(twins, PROFILES, strict=True):
        mine = Notification.objects.get(user=by_broadcast, broadcast=broadcast)
        theirs = Notification.objects.get(user=by_one, type=arguments["type"])
        for field in ("type", "message_key", "message_params", "action_url", "cancel_key"):
            assert getattr(mine, field) == getattr(theirs, field), (profile.__name__, field)
        assert rows_of(mine) == rows_of(theirs), profile.__name__
        assert rows_of(mine), profile.__name__


def test_a_throttle_counts_the_broadcast_as_a_send_of_its_own(twins, settings):
    settings.NOTIFICATION_THROTTLES = {"account": (1, 3600)}
    users = [user for pair in twins for user in pair]
    with database_clock_at(NOW):
        firsts = [  # each one's first of the window: sent on its own
            send_notification(user=user, type="welcome", params=PARAMS).notification.pk
            for user in users
        ]
        broadcast = broadcasts.send_broadcast(
            audience=[b for b, _ in twins], type="welcome", params=PARAMS
        )
        for _, single in twins:
            send_notification(user=single, type="welcome", params=PARAMS)
        expand_all()
    joined = 0
    for (by_broadcast, by_one), profile in zip(twins, PROFILES, strict=True):
        mine = Notification.objects.get(user=by_broadcast, broadcast=broadcast)
        theirs = Notification.objects.exclude(pk__in=firsts).get(user=by_one, type="welcome")
        assert rows_of(mine) == rows_of(theirs), profile.__name__
        joined += DigestItem.objects.filter(notification=mine).count()
    assert joined > 0  # the case holds someone past the throttle


def test_the_recipients_are_the_members_when_it_is_sent(django_user_model):
    audience = Audience.objects.create(name="Readers", key="readers", kind=AudienceKind.STATIC)
    first = [
        django_user_model.objects.create_user(f"r{n}", email=f"r{n}@x.example") for n in range(3)
    ]
    audiences.add(audience, first)
    gone = django_user_model.objects.create_user("gone", email="gone@x.example", is_active=False)
    audiences.add(audience, [gone])
    broadcast = broadcasts.send_broadcast(audience="readers", type="welcome", params=PARAMS)
    late = django_user_model.objects.create_user("late", email="late@x.example")
    audiences.add(audience, [late])
    expand_all()
    assert broadcast.recipients == 3
    assert set(Notification.objects.filter(broadcast=broadcast).values_list("user", flat=True)) == {
        u.pk for u in first
    }


def test_chunks_split_the_recipients_and_each_is_expanded_once(django_user_model, settings):
    settings.BROADCAST_CHUNK_SIZE = 4
    users = [
        django_user_model.objects.create_user(f"c{n}", email=f"c{n}@x.example") for n in range(10)
    ]
    broadcast = broadcasts.send_broadcast(audience=users, type="welcome", params=PARAMS)
    chunks = BroadcastChunk.objects.filter(broadcast=broadcast).order_by("number")
    assert [len(c.user_ids) for c in chunks] == [4, 4, 2]
    expand_all()
    assert set(chunks.values_list("status", flat=True)) == {ChunkStatus.DONE}
    # A chunk put back (its drain went quiet after committing) makes nothing twice.
    chunks.filter(number=0).update(status=ChunkStatus.PENDING)
    assert expand_all() == 0
    assert Notification.objects.filter(broadcast=broadcast).count() == 10
    assert NotificationDelivery.objects.filter(notification__broadcast=broadcast).count() == 20
    progress = broadcasts.progress(Broadcast.objects.get(pk=broadcast.pk))
    assert (progress.total, progress.expanded, progress.done) == (10, 10, True)
    assert progress.channels == {"email": {"queued": 10}, "inapp": {"queued": 10}}


def test_a_chunk_whose_fence_moved_on_rolls_back(django_user_model):
    users = [
        django_user_model.objects.create_user(f"f{n}", email=f"f{n}@x.example") for n in range(3)
    ]
    broadcast = broadcasts.send_broadcast(audience=users, type="welcome", params=PARAMS)
    chunk = BroadcastChunk.objects.get(broadcast=broadcast)
    real = broadcasts._expand

    def overtaken(*args, **kwargs):
        made = real(*args, **kwargs)
        # Meanwhile its lease ran out and another drain claimed it.
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE notifications.broadcast_chunks SET attempts = attempts + 1 WHERE id = %s",
                [chunk.pk],
            )
        return made

    broadcasts._expand = overtaken
    try:
        assert broadcasts.expand_next(lanes=LANE_NAMES).recipients == 0
    finally:
        broadcasts._expand = real
    assert not Notification.objects.filter(broadcast=broadcast).exists()


def test_cancel_stops_the_expansion_and_withdraws_what_is_queued(django_user_model, settings):
    settings.BROADCAST_CHUNK_SIZE = 2
    users = [
        django_user_model.objects.create_user(f"x{n}", email=f"x{n}@x.example") for n in range(6)
    ]
    broadcast = broadcasts.send_broadcast(audience=users, type="welcome", params=PARAMS)
    assert broadcasts.expand_next(lanes=LANE_NAMES).recipients == 2
    counts = broadcasts.cancel_broadcast(broadcast)
    assert counts.cancelled == 4  # two recipients, email and inbox
    assert expand_all() == 0
    assert Notification.objects.filter(broadcast=broadcast).count() == 2
    assert set(
        BroadcastChunk.objects.filter(broadcast=broadcast).values_list("status", flat=True)
    ) == {ChunkStatus.DONE, ChunkStatus.CANCELLED}
    assert not NotificationDelivery.objects.filter(
        notification__broadcast=broadcast, status="pending"
    ).exists()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"audience": "nobody-has-this-key"}, "No audience has the key"),
        ({"audience": 42}, "audience must be an Audience"),
        ({"audience": ["ada"]}, "lists users or user ids"),
        ({"audience": [], "type": "nope"}, "Unknown notification type"),
        ({"audience": [], "channels": ["pigeon"]}, "Unknown channel"),
        ({"audience": [], "priority": "urgent"}, "Unknown priority"),
        ({"audience": [], "params": {}}, "name"),
    ],
)
def test_bad_arguments_are_refused_with_what_is_wrong(arguments, error):
    arguments = {"type": "welcome", "params": PARAMS, **arguments}
    with pytest.raises((ValueError, TypeError), match=error):
        broadcasts.send_broadcast(**arguments)
    assert not Broadcast.objects.exists()


def test_the_first_rows_are_claimable_while_later_chunks_wait(django_user_model, settings):
    settings.BROADCAST_CHUNK_SIZE = 2
    users = [
        django_user_model.objects.create_user(f"e{n}", email=f"e{n}@x.example") for n in range(6)
    ]
    broadcast = broadcasts.send_broadcast(
        audience=users, type="welcome", params=PARAMS, priority="low"
    )
    broadcasts.expand_next(lanes=LANE_NAMES)
    claimed = outbox.claim(batch_size=100)
    assert len(claimed) == 4  # two recipients, email and inbox
    assert {d.lane for d in claimed} == {"low"}
    assert BroadcastChunk.objects.filter(broadcast=broadcast, status="pending").count() == 2


def test_a_password_reset_goes_before_a_low_lane_broadcast(django_user_model, settings):
    settings.BROADCAST_CHUNK_SIZE = 2
    users = [
        django_user_model.objects.create_user(f"p{n}", email=f"p{n}@x.example") for n in range(6)
    ]
    low = broadcasts.send_broadcast(audience=users, type="welcome", params=PARAMS, priority="low")
    broadcasts.expand_next(lanes=LANE_NAMES)
    reset = send_notification(
        user=users[-1],
        type="account.password_reset",
        params={"site_name": "v10r", "username": "p5", "url": "https://v10r.example/r/"},
        channels=["email"],
        priority="high",
    )
    # Of everything due, the reset is claimed first...
    (first,) = outbox.claim(batch_size=1)
    assert first.notification_id == reset.notification.pk
    # ...and a high-lane broadcast's chunks are expanded before the low one's that came first.
    high = broadcasts.send_broadcast(
        audience=users[:2], type="welcome", params=PARAMS, priority="high"
    )
    assert broadcasts.expand_next(lanes=LANE_NAMES).broadcast_id == high.pk
    assert broadcasts.expand_next(lanes=LANE_NAMES).broadcast_id == low.pk


def test_the_reaper_puts_a_quiet_drains_chunk_back_however_often(django_user_model, settings):
    users = [
        django_user_model.objects.create_user(f"q{n}", email=f"q{n}@x.example") for n in range(4)
    ]
    settings.BROADCAST_CHUNK_SIZE = 2
    kept = broadcasts.send_broadcast(audience=users[:2], type="welcome", params=PARAMS)
    dropped = broadcasts.send_broadcast(audience=users[2:], type="welcome", params=PARAMS)
    # Both claimed as often as a delivery may be, by drains that went quiet an hour ago.
    BroadcastChunk.objects.update(
        status=ChunkStatus.EXPANDING,
        attempts=settings.DELIVERY_MAX_ATTEMPTS + 3,
        claimed_at=NOW - timedelta(hours=1),
    )
    Broadcast.objects.filter(pk=dropped.pk).update(cancelled_at=NOW)
    assert broadcasts.reclaim_stale_chunks(lease=timedelta(minutes=5)) == 2
    assert BroadcastChunk.objects.get(broadcast=kept).status == ChunkStatus.PENDING
    assert BroadcastChunk.objects.get(broadcast=dropped).status == ChunkStatus.CANCELLED
    assert expand_all() == 2
    assert Notification.objects.filter(broadcast=kept).count() == 2
    assert not Notification.objects.filter(broadcast=dropped).exists()


def test_a_carrier_claimed_already_sends_the_broadcast_in_the_next_window(twins):
    digest_twins = [pair for pair, p in zip(twins, PROFILES, strict=True) if p is daily_digest]
    users = [user for pair in digest_twins for user in pair]
    with database_clock_at(NOW):
        firsts = [  # each one's digest of today gathers one already...
            send_notification(user=user, type="welcome", params=PARAMS).notification.pk
            for user in users
        ]
        # ...and its carriers were claimed: what joins now goes in tomorrow's.
        NotificationDelivery.objects.filter(
            notification__user__in=users, notification__type="digest"
        ).update(status="processing", attempts=1)
        broadcast = broadcasts.send_broadcast(
            audience=[b for b, _ in digest_twins], type="welcome", params=PARAMS
        )
        for _, single in digest_twins:
            send_notification(user=single, type="welcome", params=PARAMS)
        expand_all()
    for by_broadcast, by_one in digest_twins:
        mine = Notification.objects.get(user=by_broadcast, broadcast=broadcast)
        theirs = Notification.objects.exclude(pk__in=firsts).get(user=by_one, type="welcome")
        assert rows_of(mine) == rows_of(theirs)
        (joined,) = {row[2] for row in rows_of(mine) if row[0] == "carrier"}
        assert joined > NOW + timedelta(hours=9)  # tomorrow's window, not today's


def test_a_chunk_that_fails_each_time_is_left_failed_and_staff_can_send_it_back(
    django_user_model, settings, monkeypatch
):
    settings.DELIVERY_MAX_ATTEMPTS = 2
    users = [
        django_user_model.objects.create_user(f"w{n}", email=f"w{n}@x.example") for n in range(2)
    ]
    broadcast = broadcasts.send_broadcast(audience=users, type="welcome", params=PARAMS)
    # A deploy took the message out of the catalogue while the broadcast waited.
    welcome = catalogue.MESSAGES["welcome"]
    monkeypatch.delitem(catalogue.MESSAGES, "welcome")
    assert expand_all() == 0
    chunk = BroadcastChunk.objects.get(broadcast=broadcast)
    assert (chunk.status, chunk.attempts) == (ChunkStatus.FAILED, 2)
    assert "no longer in the catalogue" in chunk.error
    monkeypatch.setitem(catalogue.MESSAGES, "welcome", welcome)
    assert broadcasts.retry_failed_chunks(broadcast) == 1
    assert expand_all() == 2
    chunk.refresh_from_db()
    assert (chunk.status, chunk.attempts, chunk.attempt_base) == (ChunkStatus.DONE, 3, 2)
