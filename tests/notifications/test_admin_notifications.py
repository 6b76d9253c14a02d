"""The notifications in the staff console as staff read them: each type in the catalogue's
words, each message as it reads in the staff member's language, each notification titled by
what it says and to whom, and no "None" where nothing is due."""

from __future__ import annotations

import html
import re

import pytest

from notifications import outbox
from notifications.models import Notification, NotificationDelivery
from tests.helpers import mark_sent, notify, welcome_by_email

pytestmark = pytest.mark.django_db

NOTIFICATIONS = "/admin/notifications/notification/"
DELIVERIES = "/admin/notifications/notificationdelivery/"


def cells(body: str, field: str) -> list[str]:
    """The text of each list cell of field, tags and spacing taken out."""
    found = re.findall(rf'<td class="field-{field}">(.*?)</td>', body, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split()) for cell in found]


@pytest.mark.parametrize(
    ("prefix", "kind", "message"),
    [
        ("", "Your account welcome", "Welcome to v10r, Ada"),
        ("/ru", "Ваша учётная запись welcome", "Добро пожаловать в v10r, Ada"),
        ("/de", "Ihr Konto welcome", "Willkommen bei v10r, Ada"),
    ],
)
def test_the_list_names_each_type_and_shows_each_message_in_the_readers_language(
    admin_client, user, prefix, kind, message
):
    welcome_by_email(user, "Ada")
    body = admin_client.get(prefix + NOTIFICATIONS).content.decode()
    assert cells(body, "kind") == [kind]
    assert cells(body, "message") == [message]


@pytest.mark.parametrize(
    ("prefix", "title"),
    [
        ("", "Welcome to v10r, Ada — to reader"),
        ("/ru", "Добро пожаловать в v10r, Ada — для reader"),
        ("/de", "Willkommen bei v10r, Ada — an reader"),
    ],
)
def test_a_notification_is_titled_by_what_it_says_and_to_whom(admin_client, user, prefix, title):
    notification = welcome_by_email(user, "Ada").notification
    body = html.unescape(
        admin_client.get(f"{prefix}{NOTIFICATIONS}{notification.pk}/change/").content.decode()
    )
    assert f"<h2>{title}</h2>" in body
    assert f'<li aria-current="page">{title}</li>' in body  # the breadcrumb
    assert f"<title>{title} |" in body
    assert "→ #" not in body
    # Its delivery's page names it the same way, linked to it.
    delivery = NotificationDelivery.objects.get(notification=notification)
    page = html.unescape(
        admin_client.get(f"{prefix}{DELIVERIES}{delivery.pk}/change/").content.decode()
    )
    assert f'{NOTIFICATIONS}{notification.pk}/change/">{title}</a>' in page
    assert "→ #" not in page


def test_a_finished_deliverys_next_attempt_is_a_dash_not_none(admin_client, user):
    notification = notify(user, channels=["recording"])
    [claimed] = outbox.claim(batch_size=1)
    mark_sent(claimed, provider_message_id="m")
    body = admin_client.get(f"{NOTIFICATIONS}{notification.pk}/change/").content.decode()
    [cell] = re.findall(r'<td class="field-next_attempt">(.*?)</td>', body, re.S)
    assert "None" not in cell
    assert re.sub(r"<[^>]+>", "", cell).strip() == "-"
    assert ">None<" not in body


def test_the_page_shows_the_type_and_message_in_words_not_as_keys(admin_client, user):
    notification = welcome_by_email(user, "Ada").notification
    body = admin_client.get(f"/de{NOTIFICATIONS}{notification.pk}/change/").content.decode()
    [kind] = re.findall(r'<div class="readonly">(Ihr Konto.*?)</div>', body, re.S)
    assert "welcome" in kind
    assert '<div class="readonly">Willkommen bei v10r, Ada</div>' in body
    assert Notification.objects.count() == 1
