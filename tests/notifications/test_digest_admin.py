"""Digests in the staff console: a carrier's items on its pages, its title in the deliveries
list, and Retry and Send now working on a carrier as on any row, the same items sent again.
Real PostgreSQL, a real SMTP server on loopback, the admin through the test client."""

from __future__ import annotations

import email
import email.policy
import re

import pytest
from django.contrib.auth.models import Permission

from notifications import worker
from notifications.admin import digest_items
from notifications.models import NotificationDelivery, Status
from recipients.models import Cadence, DigestChoice
from tests.helpers import execute, welcome_by_email

pytestmark = pytest.mark.django_db

DELIVERIES = "/admin/notifications/notificationdelivery/"
NOTIFICATIONS = "/admin/notifications/notification/"
NEEDS = "/admin/notifications/needsattention/"
FAILED = "/admin/notifications/faileddelivery/"


@pytest.fixture
def reader(user):
    DigestChoice.objects.create(user=user, category="account", cadence=Cadence.HOURLY)
    return user


def carrier_with(user, *names: str) -> NotificationDelivery:
    results = [welcome_by_email(user, name) for name in names]
    [carrier_id] = {r.digested["email"] for r in results}
    return NotificationDelivery.objects.get(pk=carrier_id)


def make_due(carrier: NotificationDelivery) -> None:
    execute(
        "UPDATE notifications.notification_deliveries SET next_attempt_at = now() WHERE id = %s",
        [carrier.pk],
    )


def page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


ITEMS = re.compile(r'<fieldset class="module aligned digest-items">.*?</fieldset>', re.S)


def items_section(body: str) -> str:
    [section] = ITEMS.findall(body)
    return section


def last_mail_body(mail_to) -> str:
    message = email.message_from_bytes(mail_to.mailbox.raw[-1], policy=email.policy.default)
    return message.get_content()


def test_a_carriers_page_lists_its_items_newest_first_each_linked(admin_client, reader):
    carrier = carrier_with(reader, "Ada", "Ben", "Cleo")
    body = page(admin_client, f"{DELIVERIES}{carrier.pk}/change/")
    section = items_section(body)
    assert "In this digest: 3 notifications, newest first" in section
    subjects = re.findall(r"Welcome to v10r, (\w+)", section)
    assert subjects == ["Cleo", "Ben", "Ada"]
    for item in carrier.digest_items.all():
        assert f'href="{NOTIFICATIONS}{item.notification_id}/change/"' in section
    assert "<code>welcome</code>" in section


def test_a_long_digest_lists_the_newest_and_counts_the_rest(admin_client, reader):
    names = [f"n{n}" for n in range(digest_items.SHOWN + 4)]
    carrier = carrier_with(reader, *names)
    section = items_section(page(admin_client, f"{DELIVERIES}{carrier.pk}/change/"))
    assert section.count("<li>") == digest_items.SHOWN
    assert f"Welcome to v10r, n{len(names) - 1}<" in section  # the newest is listed
    assert "Welcome to v10r, n0<" not in section  # the oldest is counted
    assert "…and 4 more." in section


def test_the_items_are_in_the_staff_members_language(admin_client, reader):
    carrier = carrier_with(reader, "Ada")
    section = items_section(page(admin_client, f"/ru{DELIVERIES}{carrier.pk}/change/"))
    assert "Добро пожаловать в v10r, Ada" in section


def test_the_carriers_notification_lists_its_items_per_channel(admin_client, reader):
    carrier = carrier_with(reader, "Ada", "Ben")
    body = page(admin_client, f"{NOTIFICATIONS}{carrier.notification_id}/change/")
    section = items_section(body)
    assert "In the email digest: 2 notifications, newest first" in section
    assert re.findall(r"Welcome to v10r, (\w+)", section) == ["Ben", "Ada"]


def test_a_gathered_notification_links_to_the_digest_it_went_into(admin_client, reader):
    result = welcome_by_email(reader, "Ada")
    carrier_id = result.digested["email"]
    body = page(admin_client, f"{NOTIFICATIONS}{result.notification.pk}/change/")
    assert "Gathered into digests" in body
    assert f'href="{DELIVERIES}{carrier_id}/change/"' in body
    assert f"Digest #{carrier_id} · email · pending" in body
    # An ordinary delivery's page has no digest sections.
    assert "digest-items" not in body


def test_the_deliveries_list_names_a_carrier_by_what_it_gathers(admin_client, reader, settings):
    carrier_with(reader, "Ada", "Ben", "Cleo")
    body = page(admin_client, DELIVERIES)
    assert "Digest · 3 notifications · Your account" in body
    # A throttle's carrier says it gathers what went over the limit.
    settings.NOTIFICATION_THROTTLES = {"account": (1, 3600)}
    other = type(reader).objects.create_user("many", email="many@example.com")
    for name in ("x", "y", "z"):
        welcome_by_email(other, name)
    assert "Over the limit · 2 notifications · Your account" in page(admin_client, DELIVERIES)


def test_a_view_only_staff_member_sees_the_items_and_no_action(client, reader, django_user_model):
    person = django_user_model.objects.create_user("viewer", password="pw-123456789", is_staff=True)
    person.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client.force_login(person)
    carrier = carrier_with(reader, "Ada")
    body = page(client, f"{DELIVERIES}{carrier.pk}/change/")
    assert "Welcome to v10r, Ada" in items_section(body)
    assert "send_now_selected" not in body and "cancel_selected" not in body
    # Without the permission to view notifications, the items are listed without links.
    person.user_permissions.remove(Permission.objects.get(codename="view_notification"))
    section = items_section(page(client, f"{DELIVERIES}{carrier.pk}/change/"))
    assert "Welcome to v10r, Ada" in section and "href=" not in section


def test_a_dead_carrier_retried_sends_the_same_items_again(admin_client, reader, mail_to, settings):
    settings.DELIVERY_MAX_ATTEMPTS = 1
    type(reader).objects.filter(pk=reader.pk).update(email="busy@example.com")
    carrier = carrier_with(reader, "Ada", "Ben")
    make_due(carrier)
    assert worker.drain_once().dead == 1  # the mailbox answered 451, and the budget is one
    # An event after the claim joins the next window, never the claimed carrier.
    late = welcome_by_email(reader, "Late")
    assert late.digested["email"] != carrier.pk

    assert "Digest · 2 notifications" in page(admin_client, NEEDS)
    needing = items_section(page(admin_client, f"{NEEDS}{carrier.pk}/change/"))
    assert re.findall(r"Welcome to v10r, (\w+)", needing) == ["Ben", "Ada"]
    response = admin_client.post(f"{NEEDS}{carrier.pk}/retry/")
    assert response.status_code == 302
    type(reader).objects.filter(pk=reader.pk).update(email="leser@example.com")
    assert worker.drain_once().sent == 1

    body = last_mail_body(mail_to)
    assert "Ada" in body and "Ben" in body and "Late" not in body
    stored = NotificationDelivery.objects.get(pk=carrier.pk)
    assert (stored.status, stored.attempts) == (Status.SENT, 2)


def test_a_carrier_that_failed_retryably_is_sent_again_with_the_same_items(reader, mail_to):
    type(reader).objects.filter(pk=reader.pk).update(email="busy@example.com")
    carrier = carrier_with(reader, "Ada", "Ben")
    make_due(carrier)
    assert worker.drain_once().retrying == 1
    welcome_by_email(reader, "Late")
    type(reader).objects.filter(pk=reader.pk).update(email="leser@example.com")
    make_due(carrier)  # its backoff over
    assert worker.drain_once().sent == 1
    body = last_mail_body(mail_to)
    assert "Ada" in body and "Ben" in body and "Late" not in body
    assert mail_to.mailbox.raw and len(mail_to.mailbox.raw) == 1


def test_a_failed_carrier_is_retried_from_the_failed_list(admin_client, reader, mail_to):
    type(reader).objects.filter(pk=reader.pk).update(email="nope@example.com")
    carrier = carrier_with(reader, "Ada")
    make_due(carrier)
    assert worker.drain_once().failed == 1  # 550: not retryable
    response = admin_client.post(
        FAILED,
        {"action": "retry_failed", "_selected_action": [carrier.pk], "confirmed": "yes"},
    )
    assert response.status_code == 302
    type(reader).objects.filter(pk=reader.pk).update(email="leser@example.com")
    assert worker.drain_once().sent == 1
    assert "Ada" in last_mail_body(mail_to)


def test_send_now_sends_a_pending_carrier_with_its_items(admin_client, reader, mail_to):
    carrier = carrier_with(reader, "Ada", "Ben")
    assert worker.drain_once().claimed == 0  # due at the end of the hour
    response = admin_client.post(
        DELIVERIES, {"action": "send_now_selected", "_selected_action": [carrier.pk]}
    )
    assert response.status_code == 302
    assert worker.drain_once().sent == 1
    body = last_mail_body(mail_to)
    assert body.index("Ben") < body.index("Ada")


def test_searching_a_gathered_notifications_id_finds_its_digest(admin_client, reader):
    gathered = welcome_by_email(reader, "Ada")
    carrier_id = gathered.digested["email"]
    response = admin_client.get(DELIVERIES, {"q": str(gathered.notification.pk)})
    assert [row.pk for row in response.context["cl"].result_list] == [carrier_id]
    # The carrier notification's own id finds the carrier as before.
    carrier = NotificationDelivery.objects.get(pk=carrier_id)
    response = admin_client.get(DELIVERIES, {"q": str(carrier.notification_id)})
    assert [row.pk for row in response.context["cl"].result_list] == [carrier_id]


def test_the_notifications_list_and_page_name_a_digest_by_what_it_gathers(admin_client, reader):
    carrier = carrier_with(reader, "Ada", "Ben")
    listed = page(admin_client, NOTIFICATIONS)
    assert "Digest · 2 notifications · Your account" in listed
    body = page(admin_client, f"{NOTIFICATIONS}{carrier.notification_id}/change/")
    assert "<h2>Digest · 2 notifications · Your account — to reader</h2>" in body
