"""The staff console: lists, Needs Attention, Retry, and who may do what."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission

from notifications import heartbeat, outbox
from notifications.models import NotificationDelivery, Status
from tests.helpers import execute, finish, make_deliveries, mark_failed, mark_sent

NEEDS = "/admin/notifications/needsattention/"
FAILED = "/admin/notifications/faileddelivery/"
DELIVERIES = "/admin/notifications/notificationdelivery/"
NOTIFICATIONS = "/admin/notifications/notification/"


@pytest.fixture
def dead(db, user):
    ids = make_deliveries(user, 2)
    finish(ids, status="dead")
    return ids


@pytest.fixture
def failed(db, user):
    ids = make_deliveries(user, 1)
    finish(ids, status="failed")
    return ids


def staff(django_user_model, name: str, *perms: str):
    person = django_user_model.objects.create_user(name, password="pw-123456789", is_staff=True)
    for codename in perms:
        person.user_permissions.add(Permission.objects.get(codename=codename))
    return person


VIEW = (
    "view_needsattention",
    "view_faileddelivery",
    "view_notificationdelivery",
    "view_notification",
)


def test_the_delivery_list_shows_derived_status_and_offers_no_add(admin_client, user, db):
    [retrying, sent] = make_deliveries(user, 2)
    claims = {c.id: c for c in outbox.claim(batch_size=2)}
    mark_failed(claims[retrying], code="UPSTREAM_503", message="x", retryable=True)
    mark_sent(claims[sent], provider_message_id="m")
    body = admin_client.get(DELIVERIES).content.decode()
    assert 'class="status-badge status-retrying"' in body
    assert 'class="status-badge status-sent"' in body
    assert "A notification from the queue" in body  # the rendered title
    assert "notificationdelivery/add/" not in body
    only_retrying = admin_client.get(DELIVERIES + "?status=retrying").content.decode()
    assert "status-retrying" in only_retrying and "status-sent" not in only_retrying
    assert admin_client.get(DELIVERIES + "add/").status_code == 403


def test_the_titles_follow_the_staff_members_language(admin_client, user, db):
    make_deliveries(user, 1)
    body = admin_client.get("/ru" + DELIVERIES).content.decode()
    assert "Уведомление из очереди" in body


def test_the_notification_page_shows_its_deliveries_inline(admin_client, user, db):
    [delivery_id] = make_deliveries(user, 1)
    notification_id = NotificationDelivery.objects.get(pk=delivery_id).notification_id
    body = admin_client.get(f"/admin/notifications/notification/{notification_id}/change/")
    assert body.status_code == 200
    assert "recording" in body.content.decode()


def test_needs_attention_lists_dead_rows_and_counts_them_on_the_index(admin_client, dead, failed):
    body = admin_client.get(NEEDS).content.decode()
    # Two rows, each with its Retry; no status column (every row here is dead).
    assert body.count('class="button retry-button"') == 2
    assert "status-badge" not in body
    assert "Needs attention (2)" in admin_client.get("/admin/").content.decode()


def test_the_needs_attention_count_is_grouped_in_the_staff_members_language(admin_client, user):
    finish(make_deliveries(user, 1234), status="dead")
    assert "Needs attention (1,234)" in admin_client.get("/admin/").content.decode()
    russian = admin_client.get("/ru/admin/").content.decode()
    assert re.search(r"\(1[\s\u00a0\u202f]234\)", russian), "ru groups thousands with a space"


def test_a_retry_requeues_the_row_and_is_recorded(admin_client, dead):
    response = admin_client.post(NEEDS + f"{dead[0]}/retry/")
    assert response.status_code == 302
    stored = NotificationDelivery.objects.get(pk=dead[0])
    assert (stored.status, stored.attempt_base) == (Status.PENDING, stored.attempts)
    entry = LogEntry.objects.get(object_id=str(dead[0]))
    assert entry.user.username == "admin"
    assert "Retried" in entry.get_change_message()


def test_retrying_a_row_that_is_no_longer_dead_changes_nothing_and_says_so(admin_client, dead):
    admin_client.post(NEEDS + f"{dead[0]}/retry/")
    response = admin_client.post(NEEDS + f"{dead[0]}/retry/", follow=True)
    assert "no longer in this list; nothing changed for it" in response.content.decode()
    assert LogEntry.objects.filter(object_id=str(dead[0])).count() == 1


def test_bulk_retry(admin_client, dead):
    response = admin_client.post(
        NEEDS, {"action": "retry_selected", "_selected_action": dead}, follow=True
    )
    assert "2 deliveries requeued." in response.content.decode()
    assert set(NotificationDelivery.objects.values_list("status", flat=True)) == {Status.PENDING}


def test_failed_rows_need_a_confirmation_that_explains_why_retrying_is_pointless(
    admin_client, failed
):
    body = admin_client.get(FAILED).content.decode()
    assert "status-failed" in body and "retry-button" not in body
    asked = admin_client.post(FAILED, {"action": "retry_failed", "_selected_action": failed})
    assert "will almost always fail the same way" in asked.content.decode()
    assert NotificationDelivery.objects.get(pk=failed[0]).status == Status.FAILED
    admin_client.post(
        FAILED, {"action": "retry_failed", "_selected_action": failed, "confirmed": "yes"}
    )
    assert NotificationDelivery.objects.get(pk=failed[0]).status == Status.PENDING


# --- Who may do what --------------------------------------------------------------------------

ROLES = ["anonymous", "non-staff", "staff", "staff+retry", "superuser"]


@pytest.fixture
def as_role(client, django_user_model, db):
    def login(role: str):
        if role == "non-staff":
            client.force_login(django_user_model.objects.create_user("plain"))
        elif role == "staff":
            client.force_login(staff(django_user_model, "viewer", *VIEW))
        elif role == "staff+retry":
            client.force_login(staff(django_user_model, "fixer", *VIEW, "retry_delivery"))
        elif role == "superuser":
            client.force_login(
                django_user_model.objects.create_superuser("root", "root@example.com", "pw")
            )
        return client

    return login


@pytest.mark.parametrize(
    ("role", "list_code", "detail_code", "post_code", "get_code", "retried"),
    [
        ("anonymous", 302, 302, 302, 302, False),
        ("non-staff", 302, 302, 302, 302, False),
        ("staff", 200, 200, 403, 405, False),
        ("staff+retry", 200, 200, 302, 405, True),
        ("superuser", 200, 200, 302, 405, True),
    ],
)
def test_the_permission_matrix(
    as_role, dead, role, list_code, detail_code, post_code, get_code, retried
):
    client = as_role(role)
    listing = client.get(NEEDS)
    assert listing.status_code == list_code
    if list_code == 200:
        assert ("retry-button" in listing.content.decode()) is retried
    assert client.get(NEEDS + f"{dead[0]}/change/").status_code == detail_code
    assert client.get(NEEDS + f"{dead[0]}/retry/").status_code == get_code
    response = client.post(NEEDS + f"{dead[0]}/retry/")
    assert response.status_code == post_code
    if post_code == 302 and not retried:
        assert "/admin/login/" in response["Location"]
    status = NotificationDelivery.objects.get(pk=dead[0]).status
    assert status == (Status.PENDING if retried else Status.DEAD)


def test_the_bulk_action_is_hidden_from_staff_without_the_permission(as_role, dead):
    body = as_role("staff").get(NEEDS).content.decode()
    assert "retry_selected" not in body


def test_retry_needs_the_csrf_token(django_user_model, dead):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser("r", "r@example.com", "pw"))
    assert client.post(NEEDS + f"{dead[0]}/retry/").status_code == 403


def test_search_finds_by_notification_id_error_code_or_recipient(
    admin_client, user, dead, django_user_model
):
    other = django_user_model.objects.create_user("zed", email="zed@elsewhere.org")
    [theirs] = make_deliveries(other, 1)
    notification_id = NotificationDelivery.objects.get(pk=theirs).notification_id

    def found(term: str) -> int:
        body = admin_client.get(DELIVERIES, {"q": term}).content.decode()
        return body.count('class="field-channel"')

    assert found(str(notification_id)) == 1
    assert found("UPSTREAM_503") == 2
    assert found("elsewhere.org") == 1
    assert found("READER") == 2  # username, case-insensitive
    assert found("nobody-here") == 0


def test_counts_are_bounded_and_the_page_says_when_they_are_not_exact(
    admin_client, user, monkeypatch
):
    from notifications.admin.lists import BoundedCountPaginator

    monkeypatch.setattr(BoundedCountPaginator, "CAP", 3)
    make_deliveries(user, 5)
    filtered = admin_client.get(DELIVERIES + "?channel=recording").content.decode()
    assert "more than 3" in filtered
    execute("ANALYZE notifications.notification_deliveries")
    whole = admin_client.get(DELIVERIES).content.decode()
    assert "≈ 5" in whole and "estimated from the table" in whole
    exact = admin_client.get(DELIVERIES + "?status=dead").content.decode()
    assert "0 deliveries" in " ".join(exact.split())


def test_every_admin_page_offers_the_other_languages(admin_client):
    body = admin_client.get("/ru" + DELIVERIES).content.decode()
    assert f'<a href="{DELIVERIES}" hreflang="en" lang="en"' in body
    assert f'<a href="/de{DELIVERIES}" hreflang="de" lang="de"' in body


def test_a_filter_value_longer_than_its_column_finds_nothing_instead_of_failing(admin_client, dead):
    response = admin_client.get("/admin/notifications/faileddelivery/?error_code=" + "X" * 65)
    assert response.status_code == 200
    assert response.context["cl"].result_count == 0


@pytest.mark.parametrize(
    "path",
    [
        "/admin/notifications/notificationdelivery/?channel=%00",
        "/admin/notifications/needsattention/?channel=%00",
        "/admin/notifications/faileddelivery/?error_code=%00",
        "/admin/notifications/notificationdelivery/?q=a%00b",
        "/admin/notifications/notification/?q=%00",
    ],
)
def test_a_filter_or_search_with_a_nul_byte_is_a_400_not_a_500(admin_client, dead, path):
    # No text column holds a NUL; every query string carrying one is refused before any view.
    assert admin_client.get(path).status_code == 400


# --- What the history says about a retry ------------------------------------------------------


@pytest.mark.parametrize("how", ["button", "action"])
def test_a_retry_is_recorded_against_the_delivery_whose_page_still_has_it(admin_client, dead, how):
    if how == "button":
        admin_client.post(NEEDS + f"{dead[0]}/retry/")
    else:
        admin_client.post(NEEDS, {"action": "retry_selected", "_selected_action": [dead[0]]})
    entry = LogEntry.objects.get(object_id=str(dead[0]))
    # Not the Needs attention proxy, whose page no longer finds a row that is not dead.
    assert entry.content_type.model_class() is NotificationDelivery
    assert entry.get_admin_url() == DELIVERIES + f"{dead[0]}/change/"
    page = admin_client.get(entry.get_admin_url())
    assert page.status_code == 200
    # A name without words or a status: it is stored once, and read in any language later.
    assert entry.object_repr == f"#{dead[0]} · recording"


@pytest.mark.parametrize(
    ("retried_in", "read_in", "note"),
    [
        ("", "", "Retried (requeued with a fresh budget)."),
        ("", "/ru", "Повторено (возвращено в очередь с новым запасом попыток)."),
        ("", "/de", "Wiederholt (mit frischem Budget neu eingereiht)."),
        ("/ru", "", "Retried (requeued with a fresh budget)."),
    ],
)
def test_the_history_tells_of_a_retry_in_the_readers_language(
    admin_client, dead, retried_in, read_in, note
):
    admin_client.post(f"{retried_in}{NEEDS}{dead[0]}/retry/")
    body = admin_client.get(f"{read_in}{DELIVERIES}{dead[0]}/history/").content.decode()
    assert f"<td data-change-message>{note}</td>" in body


def test_a_dead_rows_history_on_needs_attention_is_the_deliverys_own(admin_client, dead):
    admin_client.post(NEEDS + f"{dead[0]}/retry/")
    # Dead again (its fresh budget spent), so back on Needs attention.
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'dead' WHERE id = %s",
        [dead[0]],
    )
    response = admin_client.get(NEEDS + f"{dead[0]}/history/", follow=True)
    assert response.redirect_chain == [(DELIVERIES + f"{dead[0]}/history/", 302)]
    assert "Retried (requeued with a fresh budget)." in response.content.decode()


# --- Grammar: whole sentences per list, counts in the right plural form ----------------------


@pytest.mark.parametrize(
    ("path", "prefix", "title"),
    [
        (NEEDS, "", "Select a delivery needing attention to view or retry"),
        (NEEDS, "/ru", "Выберите доставку, требующую внимания, чтобы просмотреть или повторить её"),
        (
            NEEDS,
            "/de",
            "Zustellung, die Aufmerksamkeit braucht, zum Ansehen oder Wiederholen auswählen",
        ),
        (FAILED, "", "Select a failed delivery to view"),
        (FAILED, "/ru", "Выберите неудавшуюся доставку для просмотра"),
        (FAILED, "/de", "Fehlgeschlagene Zustellung zum Ansehen auswählen"),
        (DELIVERIES, "", "Select a delivery to view"),
        (DELIVERIES, "/ru", "Выберите доставку для просмотра"),
        (DELIVERIES, "/de", "Zustellung zum Ansehen auswählen"),
        (NOTIFICATIONS, "/ru", "Выберите уведомление для просмотра"),
        (NOTIFICATIONS, "/de", "Benachrichtigung zum Ansehen auswählen"),
    ],
)
def test_each_list_is_titled_in_a_sentence_of_its_own(admin_client, dead, path, prefix, title):
    response = admin_client.get(prefix + path)
    assert response.context["title"] == title
    assert f"<h1>{title}</h1>" in response.content.decode()
    assert f"<title>{title} |" in response.content.decode()


def test_needs_attention_offers_to_retry_in_its_title_only_to_who_may(as_role, dead):
    response = as_role("staff").get("/ru" + NEEDS)
    assert response.context["title"] == "Выберите доставку, требующую внимания, для просмотра"


@pytest.mark.parametrize(
    ("path", "prefix", "title"),
    [
        (NEEDS, "/ru", "Просмотр доставки, требующей внимания"),
        (NEEDS, "/de", "Zustellung ansehen, die Aufmerksamkeit braucht"),
        (DELIVERIES, "", "View delivery"),
        (DELIVERIES, "/ru", "Просмотр доставки"),
        (DELIVERIES, "/de", "Zustellung ansehen"),
    ],
)
def test_each_delivery_page_is_titled_in_a_sentence_of_its_own(
    admin_client, dead, path, prefix, title
):
    response = admin_client.get(f"{prefix}{path}{dead[0]}/change/")
    body = response.content.decode()
    assert f"<h1>{title}</h1>" in body
    assert f"<h2>#{dead[0]} · recording</h2>" in body  # the subtitle: the row's own name


@pytest.mark.parametrize(
    ("prefix", "title"),
    [
        ("/ru", "Просмотр неудавшейся доставки"),
        ("/de", "Fehlgeschlagene Zustellung ansehen"),
    ],
)
def test_a_failed_deliverys_page_is_titled_in_a_sentence_of_its_own(
    admin_client, failed, prefix, title
):
    body = admin_client.get(f"{prefix}{FAILED}{failed[0]}/change/").content.decode()
    assert f"<h1>{title}</h1>" in body


def result_count(body: str) -> str:
    [count] = re.findall(r"<span data-result-count>(.*?)</span>", body, re.S)
    return re.sub(r"[ \t\n]+", " ", count).strip()  # no-break spaces are kept: they group


@pytest.mark.parametrize(
    ("rows", "prefix", "needing_attention", "deliveries"),
    [
        (1, "", "1 delivery needs attention", "1 delivery"),
        (12, "", "12 deliveries need attention", "12 deliveries"),
        # Russian: one for 1, 21, 31…; few for 2–4, 22–24…; many for 5–20, 25–30…
        (1, "/ru", "1 доставка требует внимания", "1 доставка"),
        (3, "/ru", "3 доставки требуют внимания", "3 доставки"),
        (12, "/ru", "12 доставок требуют внимания", "12 доставок"),
        (21, "/ru", "21 доставка требует внимания", "21 доставка"),
        (1, "/de", "1 Zustellung braucht Aufmerksamkeit", "1 Zustellung"),
        (12, "/de", "12 Zustellungen brauchen Aufmerksamkeit", "12 Zustellungen"),
    ],
)
def test_counts_take_the_plural_form_their_number_asks_for(
    admin_client, user, rows, prefix, needing_attention, deliveries
):
    finish(make_deliveries(user, rows), status="dead")
    assert result_count(admin_client.get(prefix + NEEDS).content.decode()) == needing_attention
    listed = admin_client.get(prefix + DELIVERIES + "?status=dead").content.decode()
    assert result_count(listed) == deliveries


@pytest.mark.parametrize(
    ("prefix", "failed_count", "notification_count"),
    [
        ("/ru", "5 неудавшихся доставок", "5 уведомлений"),
        ("/de", "5 fehlgeschlagene Zustellungen", "5 Benachrichtigungen"),
    ],
)
def test_every_list_counts_in_its_own_words(
    admin_client, user, prefix, failed_count, notification_count
):
    finish(make_deliveries(user, 5), status="failed")
    assert result_count(admin_client.get(prefix + FAILED).content.decode()) == failed_count
    listed = admin_client.get(prefix + NOTIFICATIONS).content.decode()
    assert result_count(listed) == notification_count


@pytest.mark.parametrize(
    ("prefix", "dead", "interval", "estimated", "capped"),
    [
        ("", "1,234", "every 0.5 s", "≈ 1,234 deliveries", "more than 1,000 deliveries"),
        (
            "/ru",
            "1\u00a0234",
            "каждые 0,5 с",
            "≈ 1\u00a0234 доставки",
            "более 1\u00a0000 доставок",
        ),
        ("/de", "1.234", "alle 0,5 s", "≈ 1.234 Zustellungen", "mehr als 1.000 Zustellungen"),
    ],
)
def test_numbers_are_grouped_and_decimals_separated_the_languages_way(
    admin_client, user, monkeypatch, prefix, dead, interval, estimated, capped
):
    """On the dashboard, and in a list's count, estimated or capped."""
    from notifications.admin.lists import BoundedCountPaginator

    monkeypatch.setattr(BoundedCountPaginator, "CAP", 1000)
    insert_dead_rows(user, 1234)
    execute("ANALYZE notifications.notification_deliveries")
    heartbeat.beat(worker="box:1", interval=timedelta(seconds=0.5), report={})
    body = admin_client.get(prefix + "/admin/").content.decode()
    assert f'<dd data-count="dead">{dead}</dd>' in body
    assert interval in body
    assert result_count(admin_client.get(prefix + DELIVERIES).content.decode()) == (
        f'<abbr title="{ESTIMATED[prefix]}">{estimated}</abbr>'
    )
    filtered = admin_client.get(prefix + DELIVERIES + "?status=dead").content.decode()
    assert result_count(filtered) == capped


ESTIMATED = {
    "": "estimated from the table's statistics, not counted",
    "/ru": "оценка по статистике таблицы, без подсчёта",
    "/de": "aus der Tabellenstatistik geschätzt, nicht gezählt",
}


def insert_dead_rows(user, count: int) -> None:
    """count dead deliveries (one notification each) in two statements, for counts that are
    too many to drive through the outbox one claim at a time."""
    execute(
        "INSERT INTO notifications.notifications (id, user_id, type, message_key, "
        "message_params, action_url) SELECT gen_random_uuid(), %s, 'bulk', 'test.note', "
        "'{}', '' FROM generate_series(1, %s)",
        [user.pk, count],
    )
    execute(
        "INSERT INTO notifications.notification_deliveries "
        "(notification_id, channel, status, attempts) "
        "SELECT id, 'recording', 'dead', 5 FROM notifications.notifications WHERE type = 'bulk'"
    )


@pytest.mark.parametrize(
    ("prefix", "select_all"),
    [
        ("", "Select all 3 deliveries needing attention"),
        ("/ru", "Выбрать все доставки, требующие внимания (3)"),
        ("/de", "Alle 3 Zustellungen auswählen, die Aufmerksamkeit brauchen"),
    ],
)
def test_select_all_names_the_list_in_its_own_words(
    admin_client, user, monkeypatch, prefix, select_all
):
    from notifications.admin.retry import NeedsAttentionAdmin

    monkeypatch.setattr(NeedsAttentionAdmin, "list_per_page", 2)  # more rows than a page holds
    finish(make_deliveries(user, 3), status="dead")
    body = admin_client.get(prefix + NEEDS).content.decode()
    assert f'<a role="button" href="#">{select_all}</a>' in body


@pytest.mark.parametrize(
    ("prefix", "blank", "run", "by_date", "search"),
    [
        (
            "",
            "- Select an option -",
            "Run",
            "By creation date",
            "Search deliveries needing attention",
        ),
        (
            "/ru",
            "- Выберите вариант -",
            "Запустить",
            "дата создания",  # Django's Russian heads a filter with its name alone
            "Поиск доставок, требующих внимания",
        ),
        (
            "/de",
            "- Bitte auswählen -",
            "Ausführen",
            "Nach Erstellungsdatum",
            "Zustellungen durchsuchen, die Aufmerksamkeit brauchen",
        ),
    ],
)
def test_the_list_around_the_rows_speaks_the_admins_language(
    admin_client, dead, prefix, blank, run, by_date, search
):
    body = admin_client.get(prefix + NEEDS).content.decode()
    text = " ".join(re.sub(r"<[^>]+>", " ", body).split())
    assert f'<option value="" selected>{blank}</option>' in body
    assert f">{run}</button>" in body
    assert by_date in text
    assert f'<h2 id="changelist-search-form" class="visually-hidden">{search}</h2>' in body
