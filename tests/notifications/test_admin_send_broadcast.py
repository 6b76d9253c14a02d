"""Send and Retry on broadcasts in the staff console: Send is the add page, a form checked field
by field and confirmed with the audience's size before anything is written (permission
notifications.add_broadcast); Retry sends a broadcast's failed chunks back to the drains
(notifications.change_broadcast). Everyone else is refused (403)."""

from __future__ import annotations

import datetime
import html
import re

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from notifications import broadcasts
from notifications.drain import LANE_NAMES
from notifications.models import Broadcast, BroadcastChunk, ChunkStatus
from recipients import audiences
from recipients.models import Audience, AudienceKind, Recipient

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("collected_static")]

LIST = "/admin/notifications/broadcast/"
ADD = "/admin/notifications/broadcast/add/"


def text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def page_of(broadcast) -> str:
    return reverse("admin:notifications_broadcast_change", args=[broadcast.pk])


def retry_url(broadcast) -> str:
    return reverse("admin:notifications_broadcast_retry_chunks", args=[broadcast.pk])


def staff_client(django_user_model, name: str, *codenames: str) -> Client:
    person = django_user_model.objects.create_user(name, is_staff=True)
    person.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(person)
    return client


@pytest.fixture
def customers(django_user_model) -> Audience:
    """A static audience of three active members and one deactivated one."""
    audience = Audience.objects.create(name="Customers", key="customers")
    members = [
        django_user_model.objects.create_user(f"c{n}", email=f"c{n}@x.example") for n in range(4)
    ]
    members[3].is_active = False
    members[3].save()
    audiences.add(audience, members)
    return audience


def filled(audience: Audience, /, **changes) -> dict:
    """A valid post of the form, with changes."""
    return {
        "audience": str(audience.pk),
        "type": "welcome",
        "params": '{"name": "Ada"}',
        "channels": ["email", "inapp"],
        "priority": "low",
        "send_at": "",
        "cancel_key": "welcome-2026",
        "action_url": "/account/inbox/",
    } | changes


def test_the_form_offers_audiences_by_kind_and_only_messages_fit_for_a_crowd(
    admin_client, customers
):
    Audience.objects.create(name="Everyone", key="everyone", kind=AudienceKind.ACTIVE)
    body = admin_client.get(ADD).content.decode()
    assert "Customers (chosen members)" in body
    assert "Everyone (every active user)" in body
    assert 'value="welcome"' in body
    # Security messages and the showcase's own are never broadcast.
    for key in ("account.password_reset", "account.confirm_sign_up", "queue.demo"):
        assert f'value="{key}"' not in body, key
    assert 'value="email"' in body and 'value="inapp"' in body
    assert 'name="channels" value="demo"' not in body  # not a recipient's choice
    assert re.search(r'<option value="normal" selected>', body)
    assert "UTC (the site's time zone)" in text(body)


def test_a_superuser_sees_the_audiences_size_first_and_sends_only_when_confirmed(
    admin_client, customers
):
    assert "Send a broadcast" in admin_client.get(LIST).content.decode()
    first = admin_client.post(ADD, filled(customers))
    assert first.status_code == 200
    shown = text(first.content.decode())
    assert "This goes to 3 members of Customers." in shown
    assert "Email, Inbox on this site" in shown and "welcome-2026" in shown
    assert 'name="confirmed" value="yes"' in first.content.decode()
    assert not Broadcast.objects.exists()  # asked, not sent

    response = admin_client.post(ADD, filled(customers, confirmed="yes"), follow=True)
    (broadcast,) = Broadcast.objects.all()
    assert response.redirect_chain[-1][0] == page_of(broadcast)
    assert "Broadcast queued for 3 recipients; the drain loops expand it next." in text(
        response.content.decode()
    )
    assert (broadcast.audience, broadcast.type, broadcast.message_params) == (
        customers,
        "welcome",
        {"name": "Ada"},
    )
    assert (broadcast.channels, broadcast.lane, broadcast.recipients) == (
        ["email", "inapp"],
        "low",
        3,
    )
    assert (broadcast.cancel_key, broadcast.action_url, broadcast.send_at) == (
        "welcome-2026",
        "/account/inbox/",
        None,
    )
    (entry,) = LogEntry.objects.filter(object_id=str(broadcast.pk))
    assert entry.action_flag == ADDITION
    assert entry.change_message == "Sent the broadcast from the console."


def test_no_channel_ticked_means_each_recipients_own_and_no_parameters_are_needed_by_none(
    admin_client, customers
):
    data = filled(customers, channels=[], priority="normal", cancel_key="", action_url="")
    shown = text(admin_client.post(ADD, data).content.decode())
    assert "each recipient's own" in shown
    admin_client.post(ADD, data | {"confirmed": "yes"})
    broadcast = Broadcast.objects.get()
    assert (broadcast.channels, broadcast.lane) == (None, "normal")


def test_no_goes_back_to_the_form_filled_in(admin_client, customers):
    body = admin_client.post(ADD, filled(customers, edit="yes")).content.decode()
    assert 'name="confirmed"' not in body
    assert "welcome-2026" in body and "errornote" not in body
    assert not Broadcast.objects.exists()


def test_send_at_is_read_in_the_sites_time_zone_whatever_the_staff_members_own(
    admin_client, admin_user, customers
):
    Recipient.objects.create(user=admin_user, time_zone="Asia/Tokyo")
    data = filled(customers, send_at="2030-01-02T03:04")
    assert "This goes to 3 members" in text(admin_client.post(ADD, data).content.decode())
    admin_client.post(ADD, data | {"confirmed": "yes"})
    sent_at = Broadcast.objects.get().send_at
    assert sent_at == datetime.datetime(2030, 1, 2, 3, 4, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"params": '{"name": "' + "a" * 20_000 + '"}'}, "at most 10000 characters"),
        # Nested 4,000 deep, within the length: read, and refused for its shape.
        ({"params": "[" * 4000 + "]" * 4000}, "as a JSON object"),
        ({"params": '{"name": ' + "[" * 4000 + "]" * 4000 + "}"}, "The value of name must be text"),
        ({"params": "{name: Ada}"}, "This is not JSON"),
        ({"params": '["Ada"]'}, "as a JSON object"),
        ({"params": '"Ada"'}, "as a JSON object"),
        ({"params": '{"name": 5}'}, "The value of name must be text"),
        ({"params": '{"name": {"first": "Ada"}}'}, "The value of name must be text"),
        ({"params": '{"name": "A\\u0000"}'}, "holds a character that cannot be sent"),
        ({"params": '{"name": "\\ud800"}'}, "holds a character that cannot be sent"),
        ({"params": "{}"}, "The message welcome needs the parameter name."),
        ({"params": ""}, "The message welcome needs the parameter name."),
        (
            {"params": '{"name": "Ada", "colour": "red"}'},
            "The message welcome takes no parameter colour.",
        ),
        ({"type": "account.password_reset"}, "Select a valid choice"),
        ({"type": "no.such.message"}, "Select a valid choice"),
        ({"channels": ["email", "carrier-pigeon"]}, "Select a valid choice"),
        ({"channels": ["demo"]}, "Select a valid choice"),
        ({"priority": "urgent"}, "Select a valid choice"),
        ({"audience": "0"}, "Select a valid choice"),
        ({"audience": "abc"}, "Select a valid choice"),
        ({"audience": "99999999999999999999999"}, "Select a valid choice"),
        ({"audience": ""}, "This field is required"),
        ({"send_at": "tomorrow"}, "Enter a valid date/time"),
        ({"send_at": "2030-13-45T99:99"}, "Enter a valid date/time"),
        ({"action_url": "javascript:alert(1)"}, "The link must be an address on this site"),
        ({"action_url": "//evil.example/"}, "The link must be an address on this site"),
        ({"action_url": "/" + "a" * 600}, "at most 500 characters"),
        ({"cancel_key": "k" * 201}, "at most 200 characters"),
        ({"cancel_key": "a\x00b"}, "Null characters are not allowed"),
    ],
)
@pytest.mark.parametrize("step", ["check", "confirmed"])
def test_every_bad_field_is_a_form_error_that_says_what_is_wrong_and_nothing_is_written(
    admin_client, customers, changes, error, step
):
    data = filled(customers, **changes)
    if step == "confirmed":
        data["confirmed"] = "yes"
    response = admin_client.post(ADD, data)
    assert response.status_code == 200
    body = response.content.decode()
    assert error in text(body), text(body)[-1500:]
    assert "errornote" in body and 'name="confirmed"' not in body
    assert not Broadcast.objects.exists() and not BroadcastChunk.objects.exists()
    assert not LogEntry.objects.exists()


def test_an_audience_deleted_between_the_count_and_the_confirmation_is_refused(
    admin_client, customers
):
    assert "This goes to 3" in text(admin_client.post(ADD, filled(customers)).content.decode())
    data = filled(customers, confirmed="yes")
    customers.delete()
    assert "Select a valid choice" in admin_client.post(ADD, data).content.decode()
    assert not Broadcast.objects.exists()


def test_an_audience_with_no_members_or_no_registered_queryset_is_refused(admin_client):
    empty = Audience.objects.create(name="Nobody", key="nobody")
    body = text(admin_client.post(ADD, filled(empty, confirmed="yes")).content.decode())
    assert "Nobody has no members now: nobody would receive it." in body
    gone = Audience.objects.create(
        name="Paying", key="paying", kind=AudienceKind.REGISTERED, registered_name="gone"
    )
    body = text(admin_client.post(ADD, filled(gone)).content.decode())
    assert "Paying reads the users registered in code as gone" in body
    assert not Broadcast.objects.exists()


def test_the_confirmation_speaks_the_staff_members_language(admin_client, customers):
    body = text(admin_client.post("/ru" + ADD, filled(customers)).content.decode())
    assert "Её получат 3 участника аудитории «Customers»." in body
    body = text(admin_client.post("/de" + ADD, filled(customers)).content.decode())
    assert "Sie geht an 3 Mitglieder von „Customers“." in body


def test_a_view_only_staff_member_has_no_send_button_and_is_refused_the_form(
    django_user_model, customers
):
    client = staff_client(django_user_model, "looker", "view_broadcast")
    assert "Send a broadcast" not in client.get(LIST).content.decode()
    assert "broadcast/add/" not in client.get(LIST).content.decode()
    assert client.get(ADD).status_code == 403
    for data in (filled(customers), filled(customers, confirmed="yes")):
        assert client.post(ADD, data).status_code == 403
    assert not Broadcast.objects.exists()


def test_a_staff_member_who_may_only_add_sends_and_lands_on_the_index(django_user_model, customers):
    client = staff_client(django_user_model, "sender", "add_broadcast")
    assert client.get(ADD).status_code == 200
    response = client.post(ADD, filled(customers, confirmed="yes"))
    assert response.status_code == 302 and response["Location"] == reverse("admin:index")
    broadcast = Broadcast.objects.get()
    # Sending is no licence to change, retry or cancel.
    assert client.post(page_of(broadcast), {}).status_code == 403
    assert client.post(retry_url(broadcast)).status_code == 403
    cancel = reverse("admin:notifications_broadcast_cancel", args=[broadcast.pk])
    assert client.post(cancel, {"confirmed": "yes"}).status_code == 403


def test_with_view_and_add_the_send_lands_on_the_broadcasts_page(django_user_model, customers):
    client = staff_client(django_user_model, "sender", "add_broadcast", "view_broadcast")
    assert "Send a broadcast" in client.get(LIST).content.decode()
    response = client.post(ADD, filled(customers, confirmed="yes"))
    assert response["Location"] == page_of(Broadcast.objects.get())


def test_sending_needs_the_forms_csrf_token(django_user_model, customers):
    staff_client(django_user_model, "sender", "add_broadcast", "view_broadcast")
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(django_user_model.objects.get(username="sender"))
    assert forged.post(ADD, filled(customers, confirmed="yes")).status_code == 403
    assert not Broadcast.objects.exists()


# --- Retry -------------------------------------------------------------------------------------


@pytest.fixture
def failed_twice(django_user_model, settings, customers):
    """Three recipients in chunks of one: the first expanded, the other two failed."""
    settings.BROADCAST_CHUNK_SIZE = 1
    broadcast = broadcasts.send_broadcast(audience=customers, type="welcome", params={"name": "A"})
    broadcasts.expand_next(lanes=LANE_NAMES)
    BroadcastChunk.objects.filter(broadcast=broadcast, number__gt=0).update(
        status=ChunkStatus.FAILED, attempts=5, error="ValueError: gone"
    )
    return broadcast


RETRY_BUTTON = "Retry the failed chunks"


def chunk_statuses(broadcast) -> list[str]:
    return list(
        BroadcastChunk.objects.filter(broadcast=broadcast)
        .order_by("number")
        .values_list("status", flat=True)
    )


def test_a_superuser_retries_the_failed_chunks_and_is_told_how_many(admin_client, failed_twice):
    page = admin_client.get(page_of(failed_twice)).content.decode()
    assert RETRY_BUTTON in page and f'action="{retry_url(failed_twice)}"' in page
    response = admin_client.post(retry_url(failed_twice), follow=True)
    assert response.redirect_chain[-1][0] == page_of(failed_twice)
    body = response.content.decode()
    assert "2 failed chunks went back to the drain loops." in text(body)
    assert chunk_statuses(failed_twice) == ["done", "pending", "pending"]
    assert RETRY_BUTTON not in body  # nothing failed now
    (entry,) = LogEntry.objects.filter(object_id=str(failed_twice.pk))
    assert (entry.action_flag, entry.change_message) == (
        CHANGE,
        "Sent the failed chunks back to the drain loops.",
    )
    # The drains take them again.
    while broadcasts.expand_next(lanes=LANE_NAMES):
        pass
    assert chunk_statuses(failed_twice) == ["done", "done", "done"]

    again = admin_client.post(retry_url(failed_twice), follow=True)
    assert "This broadcast has no failed chunks now." in text(again.content.decode())
    assert LogEntry.objects.filter(object_id=str(failed_twice.pk)).count() == 1


def test_no_retry_is_offered_without_failed_chunks_or_once_cancelled(admin_client, failed_twice):
    broadcasts.cancel_broadcast(failed_twice)
    assert RETRY_BUTTON not in admin_client.get(page_of(failed_twice)).content.decode()
    response = admin_client.post(retry_url(failed_twice), follow=True)
    assert "This broadcast is cancelled: its failed chunks stay as they are." in text(
        response.content.decode()
    )
    assert chunk_statuses(failed_twice) == ["done", "failed", "failed"]


def test_a_view_only_staff_member_sees_no_retry_and_is_refused_it(django_user_model, failed_twice):
    client = staff_client(django_user_model, "looker", "view_broadcast", "cancel_broadcast")
    assert RETRY_BUTTON not in client.get(page_of(failed_twice)).content.decode()
    assert client.post(retry_url(failed_twice)).status_code == 403
    assert client.get(retry_url(failed_twice)).status_code == 405
    assert chunk_statuses(failed_twice) == ["done", "failed", "failed"]


def test_a_staff_member_who_may_change_retries_with_the_pages_csrf_token(
    django_user_model, failed_twice
):
    client = staff_client(django_user_model, "fixer", "view_broadcast", "change_broadcast")
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(django_user_model.objects.get(username="fixer"))
    assert forged.post(retry_url(failed_twice)).status_code == 403
    assert chunk_statuses(failed_twice) == ["done", "failed", "failed"]
    assert RETRY_BUTTON in client.get(page_of(failed_twice)).content.decode()
    response = client.post(retry_url(failed_twice), follow=True)
    assert "2 failed chunks went back to the drain loops." in text(response.content.decode())
    # Retry is no licence to edit, send or cancel.
    assert client.post(page_of(failed_twice), {}).status_code == 403
    assert client.get(ADD).status_code == 403
    assert "Send a broadcast" not in client.get(LIST).content.decode()
