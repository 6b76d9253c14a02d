"""The inbox page (/account/inbox/) and its actions, through Django's test client on the real
database: what it lists and in which order and language, its pages, its refusals (a cursor
it did not write, another user's entry, a GET, a missing CSRF token), its answers with and
without htmx, and the header's badge (its count, its cap, and the queries it costs)."""

from __future__ import annotations

import html
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts import inbox_views
from notifications import inbox, worker
from notifications.enqueue import send_notification
from notifications.models import Notification

pytestmark = pytest.mark.django_db

INBOX = "/account/inbox/"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HTMX = {"HX-Request": "true"}


@pytest.fixture
def signed_in(client, ada):
    client.force_login(ada)
    return client


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", email="bob@example.com")


def put(user, *, at=T0, label="x", read=False, action_url="", key="test.note", params=None):
    """A notification already in user's inbox since at (as the in-app channel leaves it)."""
    return Notification.objects.create(
        user=user,
        type=key,
        message_key=key,
        message_params=params if params is not None else {"label": label},
        action_url=action_url,
        inbox_at=at,
        read_at=at if read else None,
    )


def text(response) -> str:
    return html.unescape(response.content.decode())


def ids(response) -> list[str]:
    """The entries' ids in the order the answer lists them."""
    return re.findall(r'data-entry-id="([0-9a-f-]{36})"', response.content.decode())


def older_link(response) -> str | None:
    # The "Older" link's (the language links repeat the page's own ?before=).
    found = re.search(
        r'data-inbox-more>\s*<a class="button button-quiet" '
        r'href="/account/inbox/\?before=([0-9a-f.]+)"',
        response.content.decode(),
    )
    return found.group(1) if found else None


def reload(row) -> Notification:
    return Notification.objects.get(pk=row.pk)


# --- The page ---------------------------------------------------------------------------------


def test_signed_out_the_inbox_asks_for_a_sign_in(client):
    response = client.get(INBOX)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("accounts:sign_in"))
    assert "next=/account/inbox/" in response["Location"]


def test_an_action_whose_session_ended_asks_for_a_sign_in_in_the_whole_window(client):
    for url in (
        reverse("accounts:inbox_read", args=[uuid.uuid4()]),
        reverse("accounts:inbox_read_all"),
    ):
        # Without htmx: Django's redirect to the sign-in page.
        plain = client.post(url)
        assert plain.status_code == 302
        assert plain["Location"].startswith(reverse("accounts:sign_in"))
        # With htmx: told to load it (HX-Redirect), not handed it to swap into the entry.
        told = client.post(url, headers=HTMX)
        assert told.status_code == 200 and told.content == b""
        assert told["HX-Redirect"].startswith(reverse("accounts:sign_in"))
        assert "next=/account/inbox/" in told["HX-Redirect"]


def test_the_url_names_resolve_under_each_language():
    assert reverse("accounts:inbox") == INBOX
    entry = uuid.uuid4()
    assert reverse("accounts:inbox_read", args=[entry]) == f"/account/inbox/{entry}/read/"
    assert reverse("accounts:inbox_read_all") == "/account/inbox/read-all/"


def test_entries_are_listed_newest_first_with_their_time_and_unread_mark(signed_in, ada, bob):
    oldest = put(ada, at=T0, label="first", read=True)
    middle = put(ada, at=T0 + timedelta(minutes=1), label="second")
    newest = put(ada, at=T0 + timedelta(minutes=2), label="third")
    put(bob, at=T0 + timedelta(minutes=3), label="bobs")
    response = signed_in.get(INBOX)
    assert response.status_code == 200
    assert ids(response) == [str(newest.pk), str(middle.pk), str(oldest.pk)]
    page = text(response)
    assert "Queued as “third”" in page and "bobs" not in page
    assert '<time class="fine-print" datetime="2026-03-01T12:02:00+00:00">' in page
    # Two unread, each said in words beside its bar.
    assert page.count("data-unread>Unread</span>") == 2
    assert {"private", "no-cache"} <= set(response["Cache-Control"].split(", "))
    assert "Cookie" in response["Vary"]


def test_an_empty_inbox_says_so(signed_in):
    page = text(signed_in.get(INBOX))
    assert "Your inbox is empty." in page
    assert "data-inbox-empty>" in page  # shown, not hidden


def test_archived_and_undelivered_notifications_are_not_listed(signed_in, ada):
    kept = put(ada, label="kept")
    gone = put(ada, label="gone", at=T0 + timedelta(seconds=1))
    Notification.objects.filter(pk=gone.pk).update(archived_at=T0)
    Notification.objects.create(user=ada, type="test.note", message_key="test.note")
    assert ids(signed_in.get(INBOX)) == [str(kept.pk)]


@pytest.mark.parametrize(
    ("prefix", "subject"),
    [
        ("", "Welcome to v10r, Ada"),
        ("/ru", "Добро пожаловать в v10r, Ada"),
        ("/de", "Willkommen bei v10r, Ada"),
    ],
)
def test_entries_are_rendered_in_the_pages_language(signed_in, ada, prefix, subject):
    put(ada, key="welcome", params={"name": "Ada"})
    response = signed_in.get(prefix + INBOX)
    assert response.status_code == 200
    page = text(response)
    assert subject in page
    assert f'lang="{prefix.strip("/") or "en"}"' in page
    assert len(ids(response)) == 1


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("/account/notifications/", True),
        ("https://example.org/orders/42", True),
        ("http://example.org/", True),
        ("javascript:alert(1)", False),
        (" javascript:alert(1)", False),
        ("data:text/html,<b>x</b>", False),
        ("//evil.example/", False),
        ("/\\evil.example/", False),
        ("java\tscript:alert(1)", False),
    ],
)
def test_only_relative_and_http_links_become_links(signed_in, ada, url, linked):
    put(ada, action_url=url)
    page = signed_in.get(INBOX).content.decode()
    subject = re.search(r'<h2 class="inbox-subject"[^>]*>(.*?)</h2>', page).group(1)
    assert ("<a href=" in subject) is linked
    if linked:
        assert f'<a href="{html.escape(url)}">' in subject
    assert inbox.safe_link(url) == (url if linked else "")


def test_pages_walk_ties_on_the_same_moment_without_losing_or_repeating_one(signed_in, ada):
    # 45 entries, in threes on the same instant: the cursor's id breaks the ties.
    rows = [put(ada, at=T0 + timedelta(seconds=i // 3), label=f"n{i}") for i in range(45)]
    expected = [str(r.pk) for r in sorted(rows, key=lambda r: (r.inbox_at, r.pk), reverse=True)]
    seen, url, pages = [], INBOX, 0
    while url:
        response = signed_in.get(url)
        assert response.status_code == 200
        seen += ids(response)
        pages += 1
        cursor = older_link(response)
        url = f"{INBOX}?before={cursor}" if cursor else None
    assert pages == 3
    assert seen == expected


def test_a_fragment_or_htmx_request_answers_only_the_entries(signed_in, ada):
    rows = [put(ada, at=T0 + timedelta(seconds=i)) for i in range(inbox.PAGE_SIZE + 2)]
    for response in (
        signed_in.get(INBOX, {"fragment": "entries"}),
        signed_in.get(INBOX, headers=HTMX),
    ):
        body = response.content.decode()
        assert response.status_code == 200
        assert "<html" not in body and "<h1" not in body
        assert len(ids(response)) == inbox.PAGE_SIZE
        assert "data-inbox-more" in body
    cursor = older_link(response)
    more = signed_in.get(INBOX, {"before": cursor, "fragment": "entries"})
    assert ids(more) == [str(rows[1].pk), str(rows[0].pk)]
    assert "data-inbox-more" not in more.content.decode()


@pytest.mark.parametrize(
    "cursor",
    ["nope", "12.zz", "1" * 40, ".", "1." + "0" * 32 + "-" * 40, "1.not-a-uuid", "1.2.3", "-1.x"],
)
def test_a_cursor_the_site_did_not_write_is_a_400_page_that_says_so(signed_in, cursor):
    for response in (
        signed_in.get(INBOX, {"before": cursor}),
        signed_in.get(INBOX, {"before": cursor, "fragment": "entries"}),
    ):
        assert response.status_code == 400
        assert "This page of your inbox does not exist." in text(response)


def test_the_inbox_page_costs_a_bounded_number_of_queries(
    signed_in, ada, django_assert_max_num_queries
):
    for i in range(30):
        put(ada, at=T0 + timedelta(seconds=i), action_url="/x/")
    # The session, the user, one page of entries, the badge's count.
    with django_assert_max_num_queries(5):
        assert signed_in.get(INBOX).status_code == 200


# --- The actions ------------------------------------------------------------------------------

ACTIONS = ["inbox_read", "inbox_unread", "inbox_archive"]


def action(name: str, row) -> str:
    return reverse(f"accounts:{name}", args=[row.pk])


@pytest.mark.parametrize("name", ACTIONS)
def test_another_users_entry_or_an_unknown_one_is_a_404_and_unchanged(signed_in, bob, name):
    theirs = put(bob)
    assert signed_in.post(action(name, theirs)).status_code == 404
    assert signed_in.post(action(name, theirs), headers=HTMX).status_code == 404
    unknown = reverse(f"accounts:{name}", args=[uuid.uuid4()])
    assert signed_in.post(unknown).status_code == 404
    after = reload(theirs)
    assert (after.read_at, after.archived_at) == (None, None)


@pytest.mark.parametrize("name", [*ACTIONS, "inbox_read_all"])
def test_a_get_on_an_action_is_a_405(signed_in, ada, name):
    row = put(ada)
    url = reverse("accounts:inbox_read_all") if name == "inbox_read_all" else action(name, row)
    assert signed_in.get(url).status_code == 405
    assert reload(row).read_at is None


@pytest.mark.parametrize("name", [*ACTIONS, "inbox_read_all"])
def test_the_actions_need_the_csrf_token(ada, name):
    row = put(ada)
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    url = reverse("accounts:inbox_read_all") if name == "inbox_read_all" else action(name, row)
    assert client.post(url, {"through": str(inbox.Cursor(row.inbox_at, row.pk))}).status_code == 403
    assert reload(row).read_at is None
    # With the token the page gave, the same post goes through.
    page = client.get(INBOX).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = {"csrfmiddlewaretoken": token, "through": str(inbox.Cursor(row.inbox_at, row.pk))}
    assert client.post(url, data).status_code == 302


def test_signed_out_an_action_asks_for_a_sign_in_and_changes_nothing(client, ada):
    row = put(ada)
    response = client.post(action("inbox_read", row))
    assert response.status_code == 302 and "sign-in" in response["Location"]
    assert reload(row).read_at is None


def test_without_javascript_mark_read_and_unread_come_back_with_a_message(signed_in, ada):
    row = put(ada)
    response = signed_in.post(action("inbox_read", row))
    assert response.status_code == 302
    assert response["Location"] == f"{INBOX}#entry-{row.pk}"
    assert reload(row).read_at is not None
    page = text(signed_in.get(INBOX))
    assert "Marked as read." in page and "data-unread>" not in page
    response = signed_in.post(action("inbox_unread", row), follow=True)
    assert reload(row).read_at is None
    assert "Marked as unread." in text(response)


def test_without_javascript_archive_comes_back_to_the_page_it_was_on(signed_in, ada):
    row = put(ada)
    cursor = str(inbox.Cursor(T0 + timedelta(days=1), uuid.uuid4()))
    response = signed_in.post(action("inbox_archive", row), {"before": cursor})
    assert response["Location"] == f"{INBOX}?before={cursor}"
    # A before that is not a cursor is not carried back.
    other = put(ada, at=T0 + timedelta(seconds=1))
    response = signed_in.post(action("inbox_archive", other), {"before": "<script>"})
    assert response["Location"] == INBOX
    page = signed_in.get(INBOX)
    assert ids(page) == []
    assert "Archived. It is no longer in your inbox." in text(page)
    assert reload(row).archived_at is not None and reload(row).read_at is not None


def test_with_htmx_mark_read_answers_the_entry_the_status_and_the_badge(signed_in, ada):
    row = put(ada)
    put(ada, at=T0 + timedelta(seconds=1))
    response = signed_in.post(action("inbox_read", row), headers=HTMX)
    assert response.status_code == 200
    body = text(response)
    assert body.lstrip().startswith(f'<li class="inbox-entry" id="entry-{row.pk}"')
    assert "<html" not in body and "data-unread>" not in body
    assert 'data-action="unread"' in body
    assert re.search(r'id="inbox-status" role="status" hx-swap-oob="true">Marked as read.<', body)
    assert re.search(
        r'id="inbox-badge"[^>]*hx-swap-oob="true"><span[^>]*>, </span>'
        r"<span data-inbox-count>1</span>",
        body,
    )
    response = signed_in.post(action("inbox_unread", row), headers=HTMX)
    assert "data-unread>Unread" in text(response)
    assert "<span data-inbox-count>2</span>" in text(response)


def test_with_htmx_archive_answers_no_entry_so_it_goes(signed_in, ada):
    row = put(ada)
    response = signed_in.post(action("inbox_archive", row), headers=HTMX)
    assert response.status_code == 200
    body = text(response)
    assert "data-entry-id" not in body
    assert "Archived. It is no longer in your inbox." in body
    # No unread left: the badge is hidden.
    assert re.search(r'id="inbox-badge" data-inbox-badge hidden hx-swap-oob="true"', body)
    assert ids(signed_in.get(INBOX)) == []


def test_mark_all_read_leaves_an_entry_that_came_after_the_page_unread(signed_in, ada):
    shown = [put(ada, at=T0 + timedelta(seconds=i)) for i in range(3)]
    page = signed_in.get(INBOX).content.decode()
    through = re.search(r'name="through" value="([^"]+)"', page).group(1)
    assert through == str(inbox.Cursor(shown[-1].inbox_at, shown[-1].pk))
    # Delivered while the reader looked at the page, at the same instant as the newest shown.
    late = put(ada, at=shown[-1].inbox_at)
    if late.pk < shown[-1].pk:
        late = put(ada, at=shown[-1].inbox_at + timedelta(microseconds=1))
    response = signed_in.post(reverse("accounts:inbox_read_all"), {"through": through})
    assert response.status_code == 302 and response["Location"] == INBOX
    assert all(reload(row).read_at is not None for row in shown)
    assert reload(late).read_at is None
    assert "Everything you were shown is marked read." in text(signed_in.get(INBOX))


def test_mark_all_read_with_htmx_answers_the_region(signed_in, ada):
    rows = [put(ada, at=T0 + timedelta(seconds=i)) for i in range(2)]
    through = str(inbox.Cursor(rows[-1].inbox_at, rows[-1].pk))
    response = signed_in.post(
        reverse("accounts:inbox_read_all"), {"through": through}, headers=HTMX
    )
    body = text(response)
    assert response.status_code == 200
    assert body.lstrip().startswith('<section class="inbox-region" id="inbox-region"')
    assert "data-unread>" not in body and len(ids(response)) == 2
    assert "hx-swap-oob" in body and "Everything you were shown is marked read." in body


@pytest.mark.parametrize("through", ["nope", "1.2", "x" * 500])
def test_mark_all_read_with_a_bad_through_is_refused_and_marks_nothing(signed_in, ada, through):
    row = put(ada)
    response = signed_in.post(reverse("accounts:inbox_read_all"), {"through": through})
    assert response.status_code == 400
    assert "nothing was marked" in text(response)
    assert reload(row).read_at is None


def test_mark_all_read_without_through_marks_nothing(signed_in, ada):
    row = put(ada)
    assert signed_in.post(reverse("accounts:inbox_read_all")).status_code == 302
    assert reload(row).read_at is None


# --- Through the real channel -----------------------------------------------------------------


def test_a_notification_sent_and_drained_through_the_in_app_channel_is_listed(signed_in, ada):
    send_notification(user=ada, type="test.note", params={"label": "live"}, channels=["inapp"])
    assert ids(signed_in.get(INBOX)) == []
    worker.drain_once()
    response = signed_in.get(INBOX)
    assert len(ids(response)) == 1
    assert "Queued as “live”" in text(response)


# --- The header's badge -----------------------------------------------------------------------


def badge(response) -> str | None:
    """The header's count, or None when the page has no badge."""
    found = re.search(
        r'<span class="inbox-badge" id="inbox-badge" data-inbox-badge( hidden)?>'
        r".*?<span data-inbox-count>([^<]*)</span>",
        response.content.decode(),
    )
    if not found:
        return None
    return "" if found.group(1) else found.group(2)


def spoken(response) -> str:
    """The word a screen reader hears after the badge's count."""
    return re.search(
        r"<span [^>]*data-inbox-unread-word[^>]*> ([^<]*)</span>", response.content.decode()
    ).group(1)


@pytest.mark.parametrize(
    ("count", "word"),
    [(1, "непрочитанное"), (2, "непрочитанных"), (5, "непрочитанных"), (21, "непрочитанное")],
)
def test_the_word_after_the_count_agrees_with_it(signed_in, ada, count, word):
    Notification.objects.bulk_create(
        Notification(
            user=ada, type="test.note", message_key="test.note", inbox_at=T0 + timedelta(s)
        )
        for s in range(count)
    )
    response = signed_in.get("/ru/")
    assert badge(response) == str(count)
    assert spoken(response) == word


def test_the_badge_carries_the_word_for_every_plural_category_for_the_live_script(signed_in):
    body = signed_in.get("/ru/").content.decode()
    assert (
        'data-one="непрочитанное" data-few="непрочитанных" data-many="непрочитанных" '
        'data-other="непрочитанных"'
    ) in body


def test_the_header_shows_the_unread_count_on_every_page(signed_in, ada):
    for i in range(3):
        put(ada, at=T0 + timedelta(seconds=i))
    put(ada, read=True)
    for path, unread in (
        ("/", "unread"),
        ("/account/notifications/", "unread"),
        ("/de/", "ungelesen"),
        ("/ru/", "непрочитанных"),
    ):
        response = signed_in.get(path)
        assert badge(response) == "3"
        assert spoken(response) == unread
    assert 'href="/account/inbox/" class="inbox-link"' in signed_in.get("/").content.decode()


def test_the_badge_stops_at_99_plus(signed_in, ada):
    Notification.objects.bulk_create(
        Notification(
            user=ada, type="test.note", message_key="test.note", inbox_at=T0 + timedelta(s)
        )
        for s in range(inbox.UNREAD_CAP + 5)
    )
    assert badge(signed_in.get("/")) == "99+"


def test_with_nothing_unread_the_badge_is_hidden(signed_in, ada):
    put(ada, read=True)
    assert badge(signed_in.get("/")) == ""


def unread_queries(captured) -> list[str]:
    return [
        q["sql"]
        for q in captured.captured_queries
        if "notifications_notifications" in q["sql"]
        or '"notifications"."notifications"' in q["sql"]
    ]


def test_an_anonymous_visitor_has_no_badge_and_costs_no_inbox_query(client):
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/")
    assert response.status_code == 200
    assert badge(response) is None and "inbox-live.js" not in response.content.decode()
    assert unread_queries(captured) == []


def test_a_page_counts_the_unread_once(signed_in, ada):
    put(ada)
    with CaptureQueriesContext(connection) as captured:
        signed_in.get("/")
    assert len(unread_queries(captured)) == 1


def test_the_offline_page_has_no_badge_and_reads_no_inbox(signed_in, ada):
    put(ada)
    with CaptureQueriesContext(connection) as captured:
        response = signed_in.get("/offline/")
    assert response.status_code == 200
    body = response.content.decode()
    assert badge(response) is None
    assert "inbox-live.js" not in body and "data-inbox-link" not in body
    assert unread_queries(captured) == []


def test_signed_in_pages_load_the_live_script_with_the_state_url(signed_in):
    body = signed_in.get("/ru/").content.decode()
    assert 'data-state-url="/ru/account/inbox/state/"' in body
    assert re.search(r'<script type="module" src="/static/accounts/inbox-live[^"]*\.js"', body)


def test_an_entry_archived_elsewhere_between_the_mark_and_the_answer_just_leaves(
    signed_in, ada, monkeypatch
):
    row = put(ada)

    def mark_then_archived_in_another_tab(user, entry_id):
        marked = inbox.mark_read(user, entry_id)
        inbox.archive(user, entry_id)
        return marked

    monkeypatch.setitem(inbox_views.ACTIONS, "read", mark_then_archived_in_another_tab)
    response = signed_in.post(action("inbox_read", row), headers=HTMX)
    assert response.status_code == 200
    assert "data-entry-id" not in text(response)


def test_refusals_are_private_to_their_user_too(signed_in):
    for response in (
        signed_in.get(INBOX, {"before": "nope"}),
        signed_in.get(INBOX, {"before": "nope"}, headers=HTMX),
        signed_in.post(reverse("accounts:inbox_read_all"), {"through": "nope"}, headers=HTMX),
    ):
        assert response.status_code == 400
        assert "private" in response["Cache-Control"]
        assert "Cookie" in response["Vary"]


# --- Times in the reader's zone ---------------------------------------------------------------


def test_entries_are_dated_in_the_readers_saved_time_zone_and_the_page_says_which(signed_in, ada):
    from recipients.models import Recipient

    put(ada)  # T0: 12:00 UTC
    Recipient.objects.create(user=ada, time_zone="Asia/Tokyo")
    body = signed_in.get(INBOX).content.decode()
    assert 'datetime="2026-03-01T21:00:00+09:00"' in body
    assert 'data-time-zone="Asia/Tokyo"' in body
    assert "Times in Asia/Tokyo" in html.unescape(body)


def test_without_a_saved_zone_entries_are_dated_in_the_sites_zone_and_say_so(signed_in, ada):
    put(ada)
    body = signed_in.get(INBOX).content.decode()
    assert 'datetime="2026-03-01T12:00:00+00:00"' in body
    assert 'data-time-zone="UTC"' in body


def test_one_readers_zone_does_not_outlive_their_request(signed_in, ada, bob):
    from django.utils import timezone

    from recipients.models import Recipient

    Recipient.objects.create(user=ada, time_zone="Asia/Tokyo")
    signed_in.get(INBOX)
    assert timezone.get_current_timezone_name() == "UTC"
    put(bob)
    other = Client()
    other.force_login(bob)
    assert 'datetime="2026-03-01T12:00:00+00:00"' in other.get(INBOX).content.decode()


def test_a_page_that_shows_no_time_reads_no_zone_and_stays_the_same_for_everyone(signed_in, ada):
    from recipients.models import Recipient

    Recipient.objects.create(user=ada, time_zone="Asia/Tokyo")
    # The service worker keeps the offline page only while it does not vary on the cookie.
    response = signed_in.get("/offline/", HTTP_SEC_FETCH_MODE="same-origin")
    assert response.status_code == 200
    assert "Cookie" not in response.get("Vary", "")


# --- Links in a message's body ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        # A URL in a sentence: the full stop is the sentence's.
        (
            "See https://example.com/a?b=1&c=2.",
            'See <a href="https://example.com/a?b=1&amp;c=2" rel="nofollow noopener">'
            "https://example.com/a?b=1&amp;c=2</a>.",
        ),
        # In prose parentheses; a parenthesis of the URL's own stays.
        (
            "(http://example.com/wiki/A_(b))",
            '(<a href="http://example.com/wiki/A_(b)" rel="nofollow noopener">'
            "http://example.com/wiki/A_(b)</a>)",
        ),
        # Markup in the text stays text, inside and outside the URL.
        (
            '<b>x</b> https://example.com/"><script>',
            '&lt;b&gt;x&lt;/b&gt; <a href="https://example.com/" rel="nofollow noopener">'
            "https://example.com/</a>&quot;&gt;&lt;script&gt;",
        ),
        # Other schemes, bare domains and addresses are not links.
        (
            "javascript:alert(1) data:text/html,x example.com ada@example.com",
            "javascript:alert(1) data:text/html,x example.com ada@example.com",
        ),
        (
            "«https://example.com/путь»",
            '«<a href="https://example.com/путь" rel="nofollow '
            'noopener">https://example.com/путь</a>»',
        ),
        ("http:// and http://[::1 lead nowhere", "http:// and http://[::1 lead nowhere"),
    ],
)
def test_urls_in_a_body_become_links_and_nothing_else_does(body, shown):
    from accounts.templatetags.links import link_urls

    assert link_urls(body) == shown


def test_the_inbox_links_the_urls_in_an_entrys_body(signed_in, ada):
    put(
        ada,
        key="account.password_reset",
        params={
            "username": "ada",
            "site_name": "v10r",
            "url": "https://v10r.example/reset/x/",
        },
    )
    body = signed_in.get(INBOX).content.decode()
    assert (
        '<a href="https://v10r.example/reset/x/" rel="nofollow noopener">'
        "https://v10r.example/reset/x/</a>" in body
    )


# --- The state's limit per account --------------------------------------------------------

STATE = "/account/inbox/state/"


def test_the_state_is_limited_per_account_whatever_address_asks(signed_in, ada, bob, settings):
    settings.INBOX_STATE_POLLS_PER_MINUTE = 3
    # One session's cookie copied to many addresses: each within its own per-client limits.
    answers = [signed_in.get(STATE, REMOTE_ADDR=f"192.0.2.{n}") for n in range(1, 5)]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
    refused = answers[-1]
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json() == {
        "error": "Your inbox was asked for too often; the page asks again in "
        f"{refused['Retry-After']} s."
    }
    assert "private" in refused["Cache-Control"]
    # Another account polls on, from the same addresses.
    other = Client()
    other.force_login(bob)
    assert other.get(STATE, REMOTE_ADDR="192.0.2.4").status_code == 200


def test_a_refused_poll_reads_no_state(signed_in, settings, django_assert_max_num_queries):
    settings.INBOX_STATE_POLLS_PER_MINUTE = 1
    assert signed_in.get(STATE).status_code == 200
    # The session, the user and the hit; not the inbox's state.
    with django_assert_max_num_queries(3):
        assert signed_in.get(STATE).status_code == 429


def test_a_refused_poll_says_why_in_the_pages_language(signed_in, settings):
    settings.INBOX_STATE_POLLS_PER_MINUTE = 1
    signed_in.get("/ru" + STATE)
    refused = signed_in.get("/ru" + STATE)
    assert refused.status_code == 429
    assert refused.json()["error"].startswith("Входящие запрашивались слишком часто")
