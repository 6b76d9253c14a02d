"""Password reset: Django's views and token, the email queued in the outbox (one security
notification, one pending email in the high lane) in the reader's language, the same answer
for an unknown address, requests limited per client and per address; and the whole path
through a real drain and SMTP server, to a new password that signs in."""

from __future__ import annotations

import email
import email.policy
import re
from datetime import timedelta

import pytest
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core.management import call_command
from django.core.signals import request_finished
from django.db import close_old_connections, connection, transaction
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts import views
from accounts.forms import REQUESTS_PER_ADDRESS, REQUESTS_PER_CLIENT, PasswordResetRequestForm
from notifications.models import Notification, NotificationDelivery, Status
from recipients import catalogue
from recipients.models import Recipient
from tests.accounts.conftest import PASSWORD

pytestmark = pytest.mark.django_db

RESET = "/account/password-reset/"
SENT = "/account/password-reset/sent/"
LINK = re.compile(r"https?://\S+/account/password-reset/[\w-]+/[\w-]+/")
NEW_PASSWORD = "a-brand-new-password-7"


def ask(client, address="ada@example.com", *, prefix="", client_address="192.0.2.10"):
    return client.post(prefix + RESET, {"email": address}, REMOTE_ADDR=client_address)


def test_a_request_queues_one_security_notification_with_one_pending_email(client, ada):
    response = ask(client)
    assert response.status_code == 302
    assert response["Location"] == SENT
    [notification] = Notification.objects.all()
    assert (notification.user, notification.type) == (ada, "account.password_reset")
    assert notification.message_key == "account.password_reset"
    assert catalogue.MESSAGES[notification.type].category == "security"
    assert notification.message_params["username"] == "ada"
    assert notification.message_params["site_name"] == "testserver"
    assert LINK.fullmatch(notification.message_params["url"])
    [delivery] = NotificationDelivery.objects.all()
    assert (delivery.channel, delivery.status, delivery.lane) == ("email", Status.PENDING, "high")


def test_an_unknown_address_queues_nothing_and_gets_the_same_answer(client, ada):
    known, unknown = ask(client), ask(client, "nobody@example.com")
    assert unknown.status_code == known.status_code == 302
    assert unknown["Location"] == known["Location"] == SENT
    assert Notification.objects.count() == 1
    page = client.get(SENT)
    assert "If an account has that address" in page.content.decode()


def test_the_notification_is_queued_in_the_callers_transaction(ada):
    request = RequestFactory().post(RESET, REMOTE_ADDR="192.0.2.10")
    form = PasswordResetRequestForm(data={"email": "ada@example.com"}, request=request)
    assert form.is_valid()

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        form.save(request=request)
        assert NotificationDelivery.objects.filter(status=Status.PENDING).count() == 1
        raise Undo
    assert not Notification.objects.exists()
    assert not NotificationDelivery.objects.exists()
    assert not Recipient.objects.filter(user=ada).exists()


def test_a_reader_without_a_language_gets_the_one_they_asked_in_and_keeps_it(client, ada):
    ask(client, prefix="/de")
    assert Recipient.objects.get(user=ada).language == "de"
    assert "/de/account/password-reset/" in Notification.objects.get().message_params["url"]


def test_a_reader_with_a_language_gets_the_link_and_the_email_in_it(client, ada):
    Recipient.objects.create(user=ada, language="ru")
    ask(client, prefix="/de")
    assert Recipient.objects.get(user=ada).language == "ru"
    assert "/ru/account/password-reset/" in Notification.objects.get().message_params["url"]


@pytest.mark.parametrize(
    ("prefix", "says"),
    [
        ("", "Too many password reset requests. Try again in 60 min."),
        ("/ru", "Слишком много запросов на сброс пароля. Попробуйте снова через 60 мин."),
        ("/de", "Zu viele Anfragen zum Zurücksetzen des Passworts. Versuchen Sie es in 60 Min."),
    ],
)
def test_a_client_may_ask_five_times_an_hour(client, ada, prefix, says):
    for n in range(REQUESTS_PER_CLIENT):
        assert ask(client, f"someone-{n}@example.com", prefix=prefix).status_code == 302
    refused = ask(client, prefix=prefix)
    assert refused.status_code == 429
    assert 3500 < int(refused["Retry-After"]) <= 3600
    assert says in refused.content.decode()
    assert not Notification.objects.exists()
    # Another client asks as usual.
    assert ask(client, prefix=prefix, client_address="198.51.100.20").status_code == 302
    assert Notification.objects.count() == 1


@pytest.mark.parametrize("address", ["ada@example.com", "nobody@example.com"])
def test_an_address_gets_three_emails_an_hour_whoever_asks_and_whether_or_not_it_has_an_account(
    client, ada, address
):
    for n in range(REQUESTS_PER_ADDRESS):
        assert ask(client, address, client_address=f"10.0.0.{n}").status_code == 302
    refused = ask(client, address.upper(), client_address="10.0.0.99")
    assert refused.status_code == 429
    assert "Too many password reset requests" in refused.content.decode()
    expected = REQUESTS_PER_ADDRESS if address.startswith("ada") else 0
    assert Notification.objects.count() == expected
    # The refusal did not count against the client that asked: it is one request of five.
    for n in range(REQUESTS_PER_CLIENT - 1):
        assert ask(client, f"x{n}@example.com", client_address="10.0.0.99").status_code == 302


def test_an_inactive_user_gets_no_email(client, ada):
    ada.is_active = False
    ada.save()
    assert ask(client)["Location"] == SENT
    assert not Notification.objects.exists()


# transaction=True: drain_outbox starts with close_old_connections(), which closes a
# connection left inside a test's transaction.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("language", "subject", "says"),
    [
        ("en", "Reset your password on testserver", "To choose a new password, open this link"),
        ("ru", "Сброс пароля на testserver", "Чтобы выбрать новый пароль, откройте эту ссылку"),
        ("de", "Passwort auf testserver zurücksetzen", "Um ein neues Passwort zu wählen"),
    ],
)
def test_the_emailed_link_sets_a_new_password_that_signs_in(
    client, ada, settings, smtp_server, language, subject, says
):
    settings.MAILERS = {"default": smtp_server.mailer(timeout=5)}
    Recipient.objects.create(user=ada, language=language)
    assert ask(client).status_code == 302
    call_command("drain_outbox", "--once")
    assert NotificationDelivery.objects.get().status == Status.SENT

    [raw] = smtp_server.mailbox.raw
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert message["To"] == "ada@example.com"
    assert message["Subject"] == subject
    assert message["Content-Language"] == language
    body = message.get_content()
    assert says in body and "ada" in body
    [link] = LINK.findall(body)
    path = link.removeprefix("http://testserver")
    prefix = "" if language == "en" else f"/{language}"
    assert path.startswith(f"{prefix}/account/password-reset/")

    # Django's view takes the token out of the URL into the session, then asks for a password.
    form_page = client.get(path, follow=True)
    assert form_page.context["validlink"]
    set_password = form_page.redirect_chain[-1][0]
    done = client.post(set_password, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done["Location"] == f"{prefix}/account/password-reset/done/"

    old = client.post("/account/sign-in/", {"username": "ada", "password": PASSWORD})
    assert old.status_code == 200
    new = client.post("/account/sign-in/", {"username": "ada", "password": NEW_PASSWORD})
    assert new.status_code == 302
    assert client.session["_auth_user_id"] == str(ada.pk)
    # The link worked once.
    client.logout()
    again = client.get(path, follow=True)
    assert not again.context["validlink"]


class MadeAnHourAgo(PasswordResetTokenGenerator):
    """Django's tokens, as the site made them an hour and a second ago."""

    def _now(self):
        return super()._now() - timedelta(seconds=3601)


def test_a_link_older_than_an_hour_no_longer_works(client, ada):
    uid = urlsafe_base64_encode(force_bytes(ada.pk))
    for generator, works in ((PasswordResetTokenGenerator(), True), (MadeAnHourAgo(), False)):
        token = generator.make_token(ada)
        path = reverse("accounts:password_reset_confirm", kwargs={"uidb64": uid, "token": token})
        assert client.get(path, follow=True).context["validlink"] is works


def test_with_site_origin_set_the_link_ignores_the_requests_host_and_port(client, ada, settings):
    settings.ALLOWED_HOSTS = ["testserver"]
    client.post(
        RESET, {"email": "ada@example.com"}, REMOTE_ADDR="192.0.2.10", HTTP_HOST="testserver:6666"
    )
    assert Notification.objects.get().message_params["url"].startswith("http://testserver:6666/")
    Notification.objects.all().delete()
    settings.SITE_ORIGIN = "https://v10r.example"
    client.post(
        RESET, {"email": "ada@example.com"}, REMOTE_ADDR="192.0.2.11", HTTP_HOST="testserver:6666"
    )
    url = Notification.objects.get().message_params["url"]
    assert url.startswith("https://v10r.example/account/password-reset/")
    assert LINK.fullmatch(url)


# --- The answer's time ----------------------------------------------------------------------


def answer(address: str, *, client_address: str = "192.0.2.10"):
    """The reset view's answer to a request for address, not yet closed: as a server holds it
    between writing its last byte and closing it."""
    request = RequestFactory().post(RESET, {"email": address}, REMOTE_ADDR=client_address)
    request._dont_enforce_csrf_checks = True
    return views.PasswordResetView.as_view()(request)


def close(response) -> None:
    """Close response as a server does once it is sent, keeping the test's connection (as
    Django's test client does: request_finished would close it)."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


def test_the_answer_is_ready_before_the_email_is_queued_and_closing_it_queues_it(ada):
    response = answer("ada@example.com")
    assert (response.status_code, response["Location"]) == (302, SENT)
    assert not Notification.objects.exists()
    close(response)
    [notification] = Notification.objects.all()
    assert (notification.user, notification.type) == (ada, "account.password_reset")


def test_up_to_the_answer_a_known_and_an_unknown_address_run_the_same_statements(ada):
    def statements(address: str, client_address: str) -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            response = answer(address, client_address=client_address)
        close(response)
        # The keys and values differ (the address's digest); the statements may not.
        return [re.sub(r"'[^']*'|\b\d+\b", "?", query["sql"]) for query in queries]

    known = statements("ada@example.com", "192.0.2.10")
    unknown = statements("nobody@example.com", "192.0.2.11")
    assert known == unknown
    assert Notification.objects.count() == 1  # the known one's, queued after its answer
