"""The inbox's read model on real PostgreSQL: cursors, keyset pages across ties, the owner's
rows only, the capped unread count, the state and its ETag, the marks, the in-app channel
putting notifications (and a digest's items) in, the reads' plans on a few thousand rows, and
the state endpoint as a browser meets it."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, time, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from notifications import inbox, worker
from notifications.enqueue import send_notification
from notifications.inbox import UNREAD_CAP, BadCursor, Cursor
from notifications.models import Notification
from recipients import preferences
from recipients.models import Cadence, ChannelAddress, DigestChoice, Recipient
from tests.dbclock import database_clock_at
from tests.helpers import notify

pytestmark = pytest.mark.django_db

# The inbox's instants in these tests: a morning, one entry (or a few at once) a second.
T0 = datetime(2026, 6, 1, 9, tzinfo=UTC)
STATE_URL = "/account/inbox/state/"


@pytest.fixture
def other(django_user_model):
    return django_user_model.objects.create_user("someone-else", email="else@example.com")


def delivered(user, count: int, *, at=T0, step=timedelta(seconds=1), per_instant=1, **fields):
    """count notifications in user's inbox, per_instant of them at each instant from at
    onwards, step apart (newest last); each with its label "n<i>"."""
    return Notification.objects.bulk_create(
        [
            Notification(
                user=user,
                type="test.note",
                message_key="test.note",
                message_params={"label": f"n{i}"},
                inbox_at=at + (i // per_instant) * step,
                **fields,
            )
            for i in range(count)
        ]
    )


def newest_first(notifications) -> list[uuid.UUID]:
    return [n.id for n in sorted(notifications, key=lambda n: (n.inbox_at, n.id), reverse=True)]


def walk(user, *, size: int) -> list[uuid.UUID]:
    """Every entry of user's inbox, page after page of size."""
    seen = []
    before = None
    for _ in range(1000):
        page = inbox.page(user, language="en", before=before, size=size)
        seen += [entry.id for entry in page.entries]
        if page.next is None:
            return seen
        # The cursor goes through the query string as text.
        before = Cursor.parse(str(page.next))
    raise AssertionError("the pages never ended")


# --- Cursors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "moment",
    [T0, datetime(2026, 6, 1, 9, 0, 0, 123456, tzinfo=UTC), datetime(1970, 1, 1, tzinfo=UTC)],
    ids=["whole-second", "microseconds", "epoch"],
)
def test_a_cursor_reads_back_as_itself(moment):
    cursor = Cursor(moment, uuid.uuid4())
    text = str(cursor)
    assert text.isascii() and " " not in text
    assert Cursor.parse(text) == cursor


HEX = uuid.UUID(int=1).hex
MOMENT = "1780304400000000"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param(MOMENT, id="no-dot"),
        pytest.param(f"abc.{HEX}", id="letters"),
        pytest.param(f"-5.{HEX}", id="negative"),
        pytest.param(f" 5.{HEX}", id="space"),
        pytest.param(f"1.5.{HEX}", id="two-dots"),
        # Longer than any instant this site writes (and past datetime's year 9999).
        pytest.param(f"{'9' * 18}.{HEX}", id="too-long"),
        pytest.param(f"{MOMENT}.", id="no-id"),
        pytest.param(f"{MOMENT}.not-hex-at-all-not-hex-at-all-xx", id="bad-hex"),
        pytest.param(f"{MOMENT}.{HEX}ff", id="long-hex"),
        pytest.param(f"{MOMENT}.{HEX[:-2]}", id="short-hex"),
        # Digits, but not ASCII ones: int() would read them.
        pytest.param(f"\u0661\u0662\u0663.{HEX}", id="arabic-indic-digits"),
        pytest.param(f"\uff11\uff12.{HEX}", id="fullwidth-digits"),
        # uuid.UUID(hex=…) would read each of these as the same id; str() writes plain hex.
        pytest.param(f"{MOMENT}.{HEX[:-1]}\u0661", id="unicode-digit-in-id"),
        pytest.param(f"{MOMENT}.{{{HEX}}}", id="braced-id"),
        pytest.param(f"{MOMENT}.urn:uuid:{HEX}", id="urn-id"),
        pytest.param(f"{MOMENT}.{uuid.UUID(int=1)}", id="dashed-id"),
        pytest.param(f"{MOMENT}.{'AB' * 16}", id="upper-case-id"),
    ],
)
def test_a_cursor_this_site_did_not_write_is_refused(text):
    with pytest.raises(BadCursor):
        Cursor.parse(text)


# --- Pages -----------------------------------------------------------------------------------


def test_pages_are_newest_first_and_ties_at_one_instant_go_by_id(user):
    made = delivered(user, 12, per_instant=4)  # three instants, four entries each
    page = inbox.page(user, language="en", size=20)
    assert [e.id for e in page.entries] == newest_first(made)
    assert page.entries[0].inbox_at == T0 + timedelta(seconds=2)
    assert page.next is None
    assert page.entries[0].subject == "A notification from the queue"
    # Rendered from the entry's own parameters: the newest instant holds n8 to n11.
    assert any(f"“n{i}”" in page.entries[0].body for i in range(8, 12))


@pytest.mark.parametrize("size", [20, 7, 5, 1])
def test_walking_every_page_finds_each_entry_once_across_ties(user, other, size):
    # 45 entries, five at each instant: many page boundaries fall inside a tie.
    made = delivered(user, 45, per_instant=5)
    delivered(other, 30, per_instant=5)  # interleaved in time with user's
    seen = walk(user, size=size)
    assert len(seen) == len(set(seen)) == 45
    assert seen == newest_first(made)


def test_the_last_page_has_no_next(user):
    delivered(user, inbox.PAGE_SIZE)
    assert inbox.page(user, language="en").next is None
    delivered(user, 1, at=T0 - timedelta(hours=1))
    first = inbox.page(user, language="en")
    assert first.next == first.entries[-1].cursor
    rest = inbox.page(user, language="en", before=first.next)
    assert (len(rest.entries), rest.next) == (1, None)


def test_a_cursor_is_a_place_not_a_row_so_archiving_its_entry_loses_nothing(user):
    made = delivered(user, 30)
    first = inbox.page(user, language="en")
    assert inbox.archive(user, first.next.id)  # the last entry shown, where the cursor points
    rest = inbox.page(user, language="en", before=first.next)
    assert [e.id for e in rest.entries] == newest_first(made)[20:]


def test_a_user_sees_only_their_own_entries(user, other):
    delivered(other, 5)
    mine = delivered(user, 2, at=T0 + timedelta(minutes=5))
    assert [e.id for e in inbox.page(user, language="en").entries] == newest_first(mine)
    assert inbox.unread_count(user) == 2
    assert inbox.unread_count(other) == 5


def test_notifications_not_yet_delivered_are_not_in_the_inbox(user):
    [shown] = delivered(user, 1)
    notify(user, channels=["recording"])  # a notification, but never through the inbox
    Notification.objects.create(user=user, type="test.note", message_key="test.note")
    assert [e.id for e in inbox.page(user, language="en").entries] == [shown.id]
    assert inbox.unread_count(user) == 1
    assert inbox.state(user).newest == Cursor(shown.inbox_at, shown.id)


def test_archived_entries_leave_the_pages_and_the_count(user):
    made = delivered(user, 3)
    assert inbox.archive(user, made[1].id)
    assert [e.id for e in inbox.page(user, language="en").entries] == [made[2].id, made[0].id]
    assert inbox.unread_count(user) == 2
    # Archived reads as read too: staff still see the row, and it counts nowhere.
    made[1].refresh_from_db()
    assert made[1].read_at is not None and made[1].archived_at is not None


# --- The unread count ------------------------------------------------------------------------


def test_the_unread_count_stops_past_the_cap(user):
    delivered(user, UNREAD_CAP)
    assert inbox.unread_count(user) == UNREAD_CAP
    assert inbox.badge(UNREAD_CAP) == "99"
    delivered(user, 30, at=T0 + timedelta(hours=1))
    assert inbox.unread_count(user) == UNREAD_CAP + 1
    assert inbox.badge(inbox.unread_count(user)) == "99+"
    assert inbox.state(user).unread == UNREAD_CAP + 1


def test_read_entries_are_not_counted(user):
    delivered(user, 3)
    delivered(user, 2, at=T0 + timedelta(hours=1), read_at=T0)
    assert inbox.unread_count(user) == 3
    assert [inbox.badge(n) for n in (0, 1, 3)] == ["", "1", "3"]


# --- The state and its ETag ------------------------------------------------------------------


def test_the_etag_changes_with_each_change_the_page_shows(user):
    made = delivered(user, 3)
    tags = [inbox.state(user).etag]

    def changed() -> bool:
        tags.append(inbox.state(user).etag)
        return tags[-1] != tags[-2]

    delivered(user, 1, at=T0 + timedelta(minutes=1))
    assert changed(), "a new entry"
    assert inbox.mark_read(user, made[0].id)
    assert changed(), "a read"
    assert inbox.mark_unread(user, made[0].id)
    assert changed(), "an unread"
    assert tags[-1] == tags[1], "a state, not a history: as it was before the read"
    assert inbox.mark_all_read(user) == 4
    assert changed(), "mark all read"
    newest = inbox.page(user, language="en").entries[0]
    assert inbox.archive(user, newest.id)
    assert changed(), "archiving the newest"


def test_the_etag_stays_while_nothing_the_page_shows_changes(user, other):
    made = delivered(user, 3)
    delivered(user, 1, at=T0 - timedelta(hours=1), read_at=T0)
    before = inbox.state(user)
    assert inbox.state(user).etag == before.etag
    notify(user, channels=["recording"])  # not through the inbox
    delivered(other, 2, at=T0 + timedelta(hours=1))
    assert not inbox.mark_read(other, made[2].id)
    assert inbox.mark_read(user, made[0].id)
    assert inbox.mark_unread(user, made[0].id)  # back as it was
    assert inbox.mark_all_read(user, through=Cursor(T0 - timedelta(days=1), uuid.UUID(int=0))) == 0
    oldest = Notification.objects.get(read_at__isnull=False, user=user)
    assert inbox.archive(user, oldest.id)  # read, and not the newest
    after = inbox.state(user)
    assert after == before
    assert after.etag == before.etag


def test_past_the_cap_a_read_leaves_the_etag_as_the_badge_is(user):
    # The tag is of what the header shows: 105 unread and 104 both read "99+".
    made = delivered(user, UNREAD_CAP + 6)
    before = inbox.state(user)
    assert inbox.mark_read(user, made[0].id)  # the oldest: the newest entry stays
    assert inbox.state(user).etag == before.etag
    assert inbox.badge(inbox.unread_count(user)) == "99+"


def test_an_empty_inbox_has_a_state_too(user):
    empty = inbox.state(user)
    assert (empty.unread, empty.newest) == (0, None)
    delivered(user, 1)
    assert inbox.state(user).etag != empty.etag


# --- Marks -----------------------------------------------------------------------------------


def test_mark_all_read_through_a_cursor_leaves_later_entries_unread(user):
    made = delivered(user, 9, per_instant=3)
    order = newest_first(made)  # three instants; order[3:6] share the middle one
    through = next(n for n in made if n.id == order[4])
    changed = inbox.mark_all_read(user, through=Cursor(through.inbox_at, through.id))
    assert changed == 5
    unread = set(Notification.objects.filter(read_at__isnull=True).values_list("id", flat=True))
    # The newer ones (above through in the list, including its newer tie) stay unread.
    assert unread == set(order[:4])
    assert inbox.mark_all_read(user) == 4
    assert inbox.unread_count(user) == 0


def act_twice(action, *, user, entry) -> None:
    """Do action to entry a minute after T0 and again a minute later; it says yes both times."""
    for minute in (1, 2):
        with database_clock_at(T0 + timedelta(minutes=minute)):
            assert action(user, entry.id)


def test_mark_read_twice_keeps_the_first_moment(user):
    [entry] = delivered(user, 1)
    act_twice(inbox.mark_read, user=user, entry=entry)
    entry.refresh_from_db()
    assert entry.read_at == T0 + timedelta(minutes=1)
    assert inbox.mark_unread(user, entry.id)
    entry.refresh_from_db()
    assert entry.read_at is None


def test_archive_twice_is_archive_once(user):
    [entry] = delivered(user, 1)
    act_twice(inbox.archive, user=user, entry=entry)
    entry.refresh_from_db()
    assert entry.archived_at == entry.read_at == T0 + timedelta(minutes=1)
    # Once out of the inbox, it cannot be marked.
    assert not inbox.mark_read(user, entry.id)
    assert not inbox.mark_unread(user, entry.id)


def test_another_users_entries_cannot_be_marked_or_archived(user, other):
    [theirs] = delivered(other, 1)
    [read] = delivered(other, 1, read_at=T0)
    snapshot = list(Notification.objects.order_by("id").values())
    assert not inbox.mark_read(user, theirs.id)
    assert not inbox.mark_unread(user, read.id)
    assert not inbox.archive(user, theirs.id)
    assert not inbox.archive(user, read.id)
    assert inbox.mark_all_read(user) == 0
    assert not inbox.mark_read(user, uuid.uuid4())
    assert list(Notification.objects.order_by("id").values()) == snapshot


def test_an_undelivered_notification_cannot_be_marked_or_archived(user):
    pending = Notification.objects.create(user=user, type="test.note", message_key="test.note")
    assert not inbox.mark_read(user, pending.id)
    assert not inbox.archive(user, pending.id)
    pending.refresh_from_db()
    assert (pending.read_at, pending.archived_at) == (None, None)


# --- The in-app channel, through a real drain -------------------------------------------------


def test_a_notification_sent_in_app_is_in_the_inbox_once_the_drain_sends_it(user):
    sent = notify(user, channels=["inapp"], label="hello")
    assert inbox.page(user, language="en").entries == ()
    report = worker.drain_once()
    assert (report.claimed, report.sent) == (1, 1)
    [entry] = inbox.page(user, language="en").entries
    assert entry.id == sent.id
    assert "hello" in entry.body
    assert not entry.read
    assert inbox.unread_count(user) == 1
    delivery = sent.deliveries.get()
    assert (delivery.channel, delivery.status) == ("inapp", "sent")


def test_every_account_has_the_inbox_among_its_channels(django_user_model):
    nobody = django_user_model.objects.create_user("no-address")  # no email, no addresses
    enqueued = send_notification(user=nobody, type="test.note", params={"label": "x"})
    assert enqueued.queued == ("inapp",)
    worker.drain_once()
    assert [e.id for e in inbox.page(nobody, language="en").entries] == [enqueued.notification.id]


def test_a_digest_through_the_inbox_puts_its_items_in(user):
    DigestChoice.objects.create(user=user, category="account", cadence=Cadence.HOURLY)
    morning = datetime(2026, 6, 1, 8, 10, tzinfo=UTC)
    with database_clock_at(morning):
        sent = [
            send_notification(
                user=user, type="welcome", params={"name": f"Guest {n}"}, channels=["inapp"]
            )
            for n in range(3)
        ]
        assert all(s.digested.keys() == {"inapp"} and not s.queued for s in sent)
        assert worker.drain_once().claimed == 0  # the window is still open
    assert inbox.page(user, language="en").entries == ()
    at_nine = datetime(2026, 6, 1, 9, 0, 1, tzinfo=UTC)
    with database_clock_at(at_nine):
        assert worker.drain_once().sent == 1
    entries = inbox.page(user, language="en").entries
    # The items themselves, not the carrier: the inbox lists notifications.
    assert {e.id for e in entries} == {s.notification.id for s in sent}
    assert all(e.inbox_at == at_nine for e in entries)
    assert sorted(e.subject for e in entries) == [f"Welcome to v10r, Guest {n}" for n in range(3)]
    assert inbox.unread_count(user) == 3


def test_the_inbox_is_a_channel_the_recipient_may_turn_off_per_category(user):
    preferences.choose(user, choices={("account", "inapp"): False})
    enqueued = send_notification(user=user, type="welcome", params={"name": "Ada"})
    assert enqueued.skipped == {"inapp": "opted_out"}
    worker.drain_once()
    assert inbox.page(user, language="en").entries == ()


def test_quiet_hours_do_not_hold_the_inbox(user):
    # Quiet from midnight to 23:59 on UTC's clock: noon is inside.
    Recipient.objects.create(
        user=user, time_zone="UTC", quiet_start=time(0), quiet_end=time(23, 59)
    )
    ChannelAddress.objects.create(user=user, channel="telegram", address="42")
    noon = datetime(2026, 6, 1, 12, tzinfo=UTC)
    with database_clock_at(noon):
        sent = send_notification(
            user=user, type="welcome", params={"name": "Ada"}, channels=["inapp", "telegram"]
        ).notification
        held = {d.channel: d.held_until for d in sent.deliveries.all()}
        # Telegram interrupts, so it waits for the window's end; the inbox does not.
        assert held == {"inapp": None, "telegram": datetime(2026, 6, 1, 23, 59, tzinfo=UTC)}
    # On the real clock: the delivery's due time is its column's default, the real now().
    assert worker.drain_once().sent == 1
    assert [e.id for e in inbox.page(user, language="en").entries] == [sent.id]


# --- Plans on a few thousand rows -------------------------------------------------------------

# One INSERT for many rows: users' ids × count each, a second apart with four at each
# instant, all but every tenth one read (an inbox's old entries mostly are).
MANY_SQL = """
INSERT INTO notifications.notifications
    (id, user_id, type, message_key, message_params, action_url, inbox_at, read_at)
SELECT gen_random_uuid(), u, 'test.note', 'test.note', jsonb_build_object('label', 'n' || n),
       '', %(at)s - (n / 4) * interval '1 second',
       CASE WHEN n %% 10 <> 0 THEN %(at)s END
FROM unnest(%(users)s::int[]) AS u, generate_series(1, %(count)s) AS n
"""


@pytest.fixture
def crowded(user, django_user_model):
    """user with 3,000 entries (and some archived, some undelivered), among 20 other users'
    12,000; the table analysed."""
    others = django_user_model.objects.bulk_create(
        [django_user_model(username=f"crowd-{n}", password="!") for n in range(20)]
    )
    with connection.cursor() as cursor:
        cursor.execute(MANY_SQL, {"at": T0, "users": [user.pk], "count": 3000})
        cursor.execute(MANY_SQL, {"at": T0, "users": [o.pk for o in others], "count": 600})
        cursor.execute(
            "UPDATE notifications.notifications SET archived_at = %(at)s"
            " WHERE user_id = %(user)s AND (message_params->>'label') LIKE 'n%%7'",
            {"at": T0, "user": user.pk},
        )
        cursor.execute("ANALYZE notifications.notifications")
    return user


def nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def plan_of(sql: str, params=None, *, analyse: bool = False) -> list[dict]:
    options = "ANALYZE, FORMAT JSON" if analyse else "FORMAT JSON"
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN ({options}) {sql}", params)
        [[explained]] = cursor.fetchall()
    if isinstance(explained, str):
        explained = json.loads(explained)
    return list(nodes(explained[0]["Plan"]))


def statement_of(call) -> str:
    """The one statement call() sends, as sent."""
    with CaptureQueriesContext(connection) as queries:
        call()
    [query] = queries.captured_queries
    return query["sql"]


def assert_reads_by_index(plan: list[dict], index: str) -> None:
    types = [node["Node Type"] for node in plan]
    assert not {"Seq Scan", "Sort", "Incremental Sort", "Bitmap Heap Scan"} & set(types), types
    used = {node.get("Index Name") for node in plan} - {None}
    assert used == {index}, (used, types)


def test_the_first_page_reads_the_inbox_index_in_order(crowded):
    sql = statement_of(lambda: inbox.page(crowded, language="en"))
    assert_reads_by_index(plan_of(sql), "notifications_inbox")


def test_a_deep_page_starts_its_index_scan_at_the_cursor(crowded):
    deep = inbox.page(crowded, language="en", size=2500).next
    sql = statement_of(lambda: inbox.page(crowded, language="en", before=deep))
    plan = plan_of(sql, analyse=True)
    assert_reads_by_index(plan, "notifications_inbox")
    [scan] = [node for node in plan if node.get("Index Name")]
    # The row comparison is a bound of the scan, not a filter after it: the scan reads the
    # page's 21 rows and no more.
    assert "ROW(inbox_at, id) <" in scan["Index Cond"]
    assert scan.get("Rows Removed by Filter", 0) == 0
    assert scan["Actual Rows"] == inbox.PAGE_SIZE + 1


def test_the_unread_count_reads_the_unread_index(crowded):
    sql = statement_of(lambda: inbox.unread_count(crowded))
    plan = plan_of(sql, analyse=True)
    assert_reads_by_index(plan, "notifications_inbox_unread")
    [scan] = [node for node in plan if node.get("Index Name")]
    assert scan["Actual Rows"] == UNREAD_CAP + 1


def test_the_state_reads_both_indexes(crowded):
    plan = plan_of(inbox.STATE_SQL, {"user": crowded.pk})
    types = [node["Node Type"] for node in plan]
    assert not {"Seq Scan", "Sort", "Incremental Sort", "Bitmap Heap Scan"} & set(types), types
    used = {node.get("Index Name") for node in plan} - {None}
    assert used == {"notifications_inbox", "notifications_inbox_unread"}


# --- The state endpoint ----------------------------------------------------------------------


@pytest.fixture
def signed_in(user):
    browser = Client()
    browser.force_login(user)
    return browser


def assert_private(response) -> None:
    cache = {part.strip() for part in response["Cache-Control"].split(",")}
    assert {"private", "no-cache"} <= cache
    assert "Cookie" in {part.strip() for part in response["Vary"].split(",")}


def test_the_state_answers_with_an_etag_then_304_until_it_changes(signed_in, user):
    delivered(user, 2)
    first = signed_in.get(STATE_URL)
    assert first.status_code == 200
    assert first["Content-Type"] == "application/json"
    assert first.json() == {
        "unread": 2,
        "badge": "2",
        "newest": str(inbox.state(user).newest),
    }
    etag = first["ETag"]
    assert etag.strip('"') == inbox.state(user).etag
    assert_private(first)

    again = signed_in.get(STATE_URL, headers={"if-none-match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert_private(again)

    delivered(user, 1, at=T0 + timedelta(minutes=1))
    changed = signed_in.get(STATE_URL, headers={"if-none-match": etag})
    assert changed.status_code == 200
    assert changed["ETag"] != etag
    assert changed.json()["unread"] == 3


def test_the_state_of_a_full_inbox_says_99_plus(signed_in, user):
    delivered(user, UNREAD_CAP + 5)
    assert signed_in.get(STATE_URL).json()["badge"] == "99+"


def test_an_empty_inbox_has_no_newest(signed_in):
    assert signed_in.get(STATE_URL).json() == {"unread": 0, "badge": "", "newest": None}


def test_the_state_is_refused_to_a_visitor_who_is_not_signed_in(user):
    delivered(user, 1)
    response = Client().get(STATE_URL)
    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "Sign in to see your inbox."}
    assert "ETag" not in response
    assert_private(response)


def test_the_state_is_read_only(signed_in):
    response = signed_in.post(STATE_URL)
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert signed_in.head(STATE_URL).status_code == 200
