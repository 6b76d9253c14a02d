"""The deliveries list and a delivery's page: a scheduled row says when, staff who may change
deliveries send it now or cancel it, cancelled rows are a status of their own, lanes a column."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.contrib.admin.models import LogEntry

from notifications import enqueue, outbox, worker
from notifications.admin import schedule
from notifications.models import NotificationDelivery, Status
from tests.helpers import make_deliveries, mark_failed, update_delivery
from tests.notifications.test_admin import VIEW, staff

DELIVERIES = "/admin/notifications/notificationdelivery/"
NOTIFICATIONS = "/admin/notifications/notification/"
LATER = "'2030-01-02 15:04:00+00'"

pytestmark = pytest.mark.django_db


@pytest.fixture
def scheduled(user):
    """Two deliveries their sender asked to go out on 2 January 2030 at 15:04 UTC."""
    ids = []
    for label in ("first", "second"):
        notification = enqueue.send_notification(
            user=user,
            type="test.note",
            params={"label": label},
            channels=["recording"],
            send_at=datetime(2030, 1, 2, 15, 4, tzinfo=UTC),
        ).notification
        ids += notification.deliveries.values_list("pk", flat=True)
    return ids


def cell(body: str, pk: int, column: str) -> str:
    """The text of one column of one row of the list."""
    row = re.search(rf'<tr[^>]*>(?:(?!</tr>).)*?value="{pk}"(?:(?!</tr>).)*</tr>', body, re.S)
    assert row, f"no row for {pk}"
    found = re.search(rf'<td class="field-{column}[^"]*">(.*?)</td>', row.group(0), re.S)
    assert found, f"no {column} in the row of {pk}"
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def status(pk: int) -> str:
    return NotificationDelivery.objects.get(pk=pk).status


@pytest.mark.parametrize(
    ("prefix", "said"),
    [
        ("", "scheduled for Jan. 2, 2030, 3:04 p.m. UTC"),
        ("/ru", "запланировано на 2 января 2030 г. 15:04 UTC"),
        ("/de", "geplant für 2. Januar 2030 15:04 UTC"),
    ],
)
def test_a_scheduled_row_says_when_it_is_due_in_the_staff_members_language(
    admin_client, scheduled, prefix, said
):
    body = admin_client.get(prefix + DELIVERIES).content.decode()
    assert cell(body, scheduled[0], "next_attempt") == said
    page = admin_client.get(f"{prefix}{DELIVERIES}{scheduled[0]}/change/").content.decode()
    assert said in page
    # And among the deliveries on its notification's page.
    notification = NotificationDelivery.objects.get(pk=scheduled[0]).notification_id
    page = admin_client.get(f"{prefix}{NOTIFICATIONS}{notification}/change/").content.decode()
    assert said in page


def test_the_time_is_in_the_active_time_zone_and_names_it(admin_client, scheduled, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    body = admin_client.get(DELIVERIES).content.decode()
    assert cell(body, scheduled[0], "next_attempt") == "scheduled for Jan. 2, 2030, 4:04 p.m. CET"


def test_only_a_row_waiting_for_its_sender_is_scheduled(admin_client, user):
    retrying, due, throttled = make_deliveries(user, 3)
    # A failed send waits out its backoff, and a throttled one waits for its provider: both
    # are due later, neither by anyone's choice.
    (claim,) = outbox.claim(batch_size=1)
    assert claim.id == retrying
    mark_failed(claim, code="UPSTREAM_503", message="x", retryable=True)
    update_delivery(throttled, f"throttles = 1, next_attempt_at = {LATER}")
    body = admin_client.get(DELIVERIES).content.decode()
    for pk in (retrying, due, throttled):
        assert "scheduled" not in cell(body, pk, "next_attempt"), pk
    assert NotificationDelivery.objects.get(pk=retrying).shown_status == "retrying"


def test_send_now_from_the_list_makes_it_due_and_a_drain_sends_it(admin_client, scheduled):
    assert worker.drain_once().sent == 0  # not due until 2030
    response = admin_client.post(
        DELIVERIES, {"action": "send_now_selected", "_selected_action": [scheduled[0]]}, follow=True
    )
    assert "1 delivery is due now; a drain loop sends it next." in response.content.decode()
    assert worker.drain_once().sent == 1
    assert status(scheduled[0]) == Status.SENT
    assert status(scheduled[1]) == Status.PENDING  # not selected: still 2030
    (entry,) = LogEntry.objects.filter(object_id=str(scheduled[0]))
    assert entry.change_message == "Sent now (made due at once)."
    assert entry.get_admin_url() == f"{DELIVERIES}{scheduled[0]}/change/"


def test_send_now_from_a_deliverys_page_stays_on_the_page(admin_client, scheduled):
    page = f"{DELIVERIES}{scheduled[0]}/change/"
    body = admin_client.get(page).content.decode()
    assert '<option value="send_now_selected">Send this delivery now</option>' in body
    response = admin_client.post(
        page, {"CHANGE_FORM-action": "send_now_selected", "_selected_action": [scheduled[0]]}
    )
    assert response.status_code == 302 and response["Location"] == page
    assert worker.drain_once().sent == 1
    assert status(scheduled[0]) == Status.SENT


def test_cancel_asks_first_then_the_row_is_never_sent(admin_client, scheduled):
    asked = admin_client.post(
        DELIVERIES, {"action": "cancel_selected", "_selected_action": scheduled}
    ).content.decode()
    assert "Cancel 2 deliveries?" in asked
    assert "it cannot be put back in the queue" in asked
    assert {status(pk) for pk in scheduled} == {Status.PENDING}
    response = admin_client.post(
        DELIVERIES,
        {"action": "cancel_selected", "_selected_action": scheduled, "confirmed": "yes"},
        follow=True,
    )
    assert "2 deliveries cancelled; they will not be sent." in response.content.decode()
    assert {status(pk) for pk in scheduled} == {Status.CANCELLED}
    update_delivery(scheduled[0], "next_attempt_at = now()")
    assert worker.drain_once().sent == 0
    assert LogEntry.objects.filter(change_message="Cancelled (it will not be sent).").count() == 2


def test_cancel_from_a_deliverys_page_confirms_there(admin_client, scheduled):
    page = f"{DELIVERIES}{scheduled[0]}/change/"
    data = {"CHANGE_FORM-action": "cancel_selected", "_selected_action": [scheduled[0]]}
    asked = admin_client.post(page, data).content.decode()
    assert "Cancel 1 delivery?" in asked
    assert f'action="{page}"' in asked and 'name="CHANGE_FORM-action"' in asked
    assert admin_client.post(page, {**data, "confirmed": "yes"})["Location"] == page
    assert status(scheduled[0]) == Status.CANCELLED


def test_a_row_a_drain_claimed_meanwhile_is_neither_cancelled_nor_moved(admin_client, user):
    [claimed] = make_deliveries(user, 1)
    outbox.claim(batch_size=1)
    said = {
        "send_now_selected": "1 delivery was not waiting for a later time (it was due already, "
        "being sent or finished); nothing changed for it.",
        "cancel_selected": "1 delivery was no longer waiting to be sent; nothing changed for it.",
    }
    for action, warning in said.items():
        response = admin_client.post(
            DELIVERIES,
            {"action": action, "_selected_action": [claimed], "confirmed": "yes"},
            follow=True,
        )
        assert warning in response.content.decode()
        assert status(claimed) == Status.PROCESSING
    assert not LogEntry.objects.exists()


def test_one_run_takes_at_most_max_rows_the_newest_and_says_so(
    admin_client, scheduled, monkeypatch
):
    monkeypatch.setattr(schedule, "MAX_ROWS", 1)
    response = admin_client.post(
        "/ru" + DELIVERIES,
        {"action": "send_now_selected", "_selected_action": scheduled},
        follow=True,
    )
    body = response.content.decode()
    assert "Взяты только 1 самых новых из выбранных доставок" in body
    assert "1 доставка теперь к отправке" in body
    # The newest (the second queued) went; the other still waits for 2030.
    assert [status(pk) for pk in scheduled] == [Status.PENDING, Status.PENDING]
    assert worker.drain_once().sent == 1
    assert [status(pk) for pk in scheduled] == [Status.PENDING, Status.SENT]


def test_cancelled_rows_have_a_status_filter_and_count_of_their_own(admin_client, scheduled):
    admin_client.post(
        DELIVERIES,
        {"action": "cancel_selected", "_selected_action": [scheduled[0]], "confirmed": "yes"},
    )
    body = admin_client.get(DELIVERIES + "?status=cancelled").content.decode()
    assert 'class="status-badge status-cancelled">cancelled</span>' in body
    assert f'value="{scheduled[0]}"' in body and f'value="{scheduled[1]}"' not in body
    assert "1 delivery" in body
    ru = admin_client.get("/ru" + DELIVERIES + "?status=cancelled").content.decode()
    assert ">отменено</span>" in ru
    de = admin_client.get("/de" + DELIVERIES + "?status=cancelled").content.decode()
    assert ">storniert</span>" in de


@pytest.mark.parametrize(
    ("read_in", "sent_now", "cancelled"),
    [
        ("", "Sent now (made due at once).", "Cancelled (it will not be sent)."),
        ("/ru", "Отправлено сейчас (сделано срочным).", "Отменено (не будет отправлено)."),
        ("/de", "Jetzt gesendet (sofort fällig gemacht).", "Storniert (wird nicht gesendet)."),
    ],
)
def test_the_history_tells_of_send_now_and_cancel_in_the_readers_language(
    admin_client, scheduled, read_in, sent_now, cancelled
):
    admin_client.post(
        DELIVERIES, {"action": "send_now_selected", "_selected_action": [scheduled[0]]}
    )
    admin_client.post(
        DELIVERIES,
        {"action": "cancel_selected", "_selected_action": [scheduled[0]], "confirmed": "yes"},
    )
    body = admin_client.get(f"{read_in}{DELIVERIES}{scheduled[0]}/history/").content.decode()
    assert f"<td data-change-message>{sent_now}</td>" in body
    assert f"<td data-change-message>{cancelled}</td>" in body


def test_only_staff_who_may_change_deliveries_are_offered_send_now_and_cancel(
    client, django_user_model, scheduled
):
    looker = staff(django_user_model, "looker", *VIEW)
    client.force_login(looker)
    listing = client.get(DELIVERIES).content.decode()
    page = client.get(f"{DELIVERIES}{scheduled[0]}/change/").content.decode()
    for body in (listing, page):
        assert "send_now_selected" not in body and "cancel_selected" not in body
    client.post(DELIVERIES, {"action": "send_now_selected", "_selected_action": scheduled})
    client.post(
        f"{DELIVERIES}{scheduled[0]}/change/",
        {"CHANGE_FORM-action": "cancel_selected", "_selected_action": [scheduled[0]]},
    )
    assert worker.drain_once().sent == 0
    assert {status(pk) for pk in scheduled} == {Status.PENDING}
    client.force_login(staff(django_user_model, "changer", *VIEW, "change_notificationdelivery"))
    assert "cancel_selected" in client.get(DELIVERIES).content.decode()
    client.post(DELIVERIES, {"action": "send_now_selected", "_selected_action": [scheduled[0]]})
    assert worker.drain_once().sent == 1


def test_the_lane_is_a_column_and_a_filter(admin_client, user):
    high, normal = make_deliveries(user, 2)
    update_delivery(high, "lane = 'high'")
    body = admin_client.get(DELIVERIES).content.decode()
    assert cell(body, high, "lane") == "high" and cell(body, normal, "lane") == "normal"
    only_high = admin_client.get(DELIVERIES + "?lane=high").content.decode()
    assert f'value="{high}"' in only_high and f'value="{normal}"' not in only_high
    assert admin_client.get(DELIVERIES + "?lane=nosuchlane").status_code == 200


def test_the_dashboard_counts_the_cancelled_rows(admin_client, scheduled):
    assert '<dd data-count="cancelled">0</dd>' in admin_client.get("/admin/").content.decode()
    outbox.cancel(scheduled)
    body = admin_client.get("/admin/").content.decode()
    assert '<dd data-count="cancelled">2</dd>' in body
    assert "<dt>Отменено</dt>" in admin_client.get("/ru/admin/").content.decode()
