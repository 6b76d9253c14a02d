"""Sign-up: an inactive account and one security email in the visitor's language, the same
answer and the same work for an address that has an account (whose owner is told instead),
the reset form's limits, the emailed link that works once and for a day, with the password,
and the whole path through a real drain and SMTP server to an account that signs in."""

from __future__ import annotations

import email
import email.policy
import re
import threading
from datetime import timedelta

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.core.management import call_command
from django.db import connection, connections
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts import signup
from accounts.forms import REQUESTS_PER_ADDRESS, REQUESTS_PER_CLIENT
from accounts.models import PendingSignUp
from core.models import RateLimitWindow
from jobs import tasks
from notifications.models import Notification, NotificationDelivery, Status
from recipients import catalogue
from recipients.models import Recipient
from tests.accounts.conftest import PASSWORD

pytestmark = pytest.mark.django_db

SIGN_UP = "/account/sign-up/"
SENT = "/account/sign-up/sent/"
LINK = re.compile(r"https?://\S+/account/sign-up/[\w-]+/[\w-]+/")
CHOSEN = "a-fine-new-password-8"


def sign_up(client, address="vera@example.com", *, prefix="", client_address="192.0.2.10", **data):
    fields = {"email": address, "password1": CHOSEN, "password2": CHOSEN, **data}
    return client.post(prefix + SIGN_UP, fields, REMOTE_ADDR=client_address)


def emailed_path(notification) -> str:
    return notification.message_params["url"].removeprefix("http://testserver")


def confirm(client, path, *, password=CHOSEN, client_address="192.0.2.10"):
    return client.post(path, {"password": password}, REMOTE_ADDR=client_address)


def test_a_sign_up_makes_an_inactive_account_and_queues_one_security_email_in_its_language(
    client, django_user_model
):
    response = sign_up(client, "Vera@Example.COM", prefix="/de")
    assert response.status_code == 302
    assert response["Location"] == "/de" + SENT
    user = django_user_model.objects.get()
    # The address is the username, in lower case; the address keeps its local part's case.
    assert (user.username, user.email) == ("vera@example.com", "Vera@example.com")
    assert not user.is_active
    assert user.check_password(CHOSEN)
    assert PendingSignUp.objects.filter(user=user).exists()
    assert Recipient.objects.get(user=user).language == "de"
    [notification] = Notification.objects.all()
    assert (notification.user, notification.type) == (user, "account.confirm_sign_up")
    assert catalogue.MESSAGES[notification.type].category == "security"
    assert catalogue.CATEGORIES["security"].required
    assert notification.message_params["site_name"] == "testserver"
    assert LINK.fullmatch(notification.message_params["url"])
    assert emailed_path(notification).startswith("/de/account/sign-up/")
    [delivery] = NotificationDelivery.objects.all()
    assert (delivery.channel, delivery.status, delivery.lane) == ("email", Status.PENDING, "high")


def test_the_sign_up_page_links_sign_in_and_the_sent_page_says_the_same_for_everyone(client):
    page = client.get(SIGN_UP).content.decode()
    assert 'href="/account/sign-in/"' in page
    assert "Your email address will be your username" in page
    sent = client.get(SENT).content.decode()
    assert "An email is on its way to that address" in sent
    assert "If the address has an account already, the email says so instead" in sent


def page(client, path: str) -> str:
    """The page at path, less its CSP nonce (a new one each response)."""
    return re.sub(r'nonce="[^"]+"', "", client.get(path).content.decode())


def answer(response) -> tuple:
    return (response.status_code, response["Location"], response.content, set(response.cookies))


def test_an_address_with_an_account_gets_the_same_answer_and_its_owner_an_email(client, ada):
    Recipient.objects.create(user=ada, language="ru")
    new = sign_up(client, "nobody@example.com")
    taken = sign_up(client, "ADA@example.com", client_address="192.0.2.11")
    assert answer(taken) == answer(new)
    assert page(client, taken["Location"]) == page(client, new["Location"])
    # No second account, and ada's own is as it was.
    assert not PendingSignUp.objects.filter(user__username="ada@example.com").exists()
    ada.refresh_from_db()
    assert ada.check_password(PASSWORD) and ada.is_active
    told = Notification.objects.get(user=ada)
    assert told.type == "account.sign_up_taken"
    assert catalogue.MESSAGES[told.type].category == "security"
    assert told.message_params == {
        "username": "ada",
        "site_name": "testserver",
        # In ada's language, not the visitor's.
        "sign_in_url": "http://testserver/ru/account/sign-in/",
        "reset_url": "http://testserver/ru/account/password-reset/",
    }
    assert NotificationDelivery.objects.get(notification=told).lane == "high"


class CountingHasher(MD5PasswordHasher):
    """MD5, counting the passwords it hashes."""

    hashed = 0

    def encode(self, password, salt):
        CountingHasher.hashed += 1
        return super().encode(password, salt)


@pytest.mark.parametrize("address", ["nobody@example.com", "ada@example.com"])
def test_a_new_address_and_one_with_an_account_cost_one_hash_and_one_email_each(
    client, ada, settings, address
):
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    CountingHasher.hashed = 0
    before = Notification.objects.count()
    assert sign_up(client, address).status_code == 302
    assert CountingHasher.hashed == 1
    assert Notification.objects.count() == before + 1
    assert NotificationDelivery.objects.count() == before + 1


def test_an_account_staff_switched_off_is_left_alone_and_nobody_is_written_to(client, ada):
    ada.is_active = False
    ada.save()
    assert sign_up(client, "ada@example.com")["Location"] == SENT
    ada.refresh_from_db()
    assert not ada.is_active and ada.check_password(PASSWORD)
    assert not PendingSignUp.objects.exists()
    assert not Notification.objects.exists()


def test_a_username_that_is_the_address_counts_as_taken(client, django_user_model):
    django_user_model.objects.create_user("Vera@example.com", email="other@example.com")
    assert sign_up(client, "vera@example.com")["Location"] == SENT
    assert django_user_model.objects.count() == 1
    # Its owner reads mail at another address: nobody here is told anything.
    assert not Notification.objects.exists()


def test_signing_up_again_before_confirming_sends_a_new_link_and_the_old_one_stops_working(
    client, django_user_model
):
    sign_up(client, prefix="/ru")
    first = emailed_path(Notification.objects.get())
    sign_up(
        client, prefix="/de", password1="another-new-password-9", password2="another-new-password-9"
    )
    user = django_user_model.objects.get()
    assert user.check_password("another-new-password-9")
    # The newest sign-up's language, for the link and for the account.
    assert Recipient.objects.get(user=user).language == "de"
    paths = {emailed_path(n) for n in Notification.objects.all()}
    [second] = paths - {first}
    assert first.startswith("/ru/account/sign-up/")
    assert second.startswith("/de/account/sign-up/")
    assert client.get(first).context["validlink"] is False
    assert client.get(second).context["validlink"] is True


ERRORS = [
    ({"email": "not-an-address"}, "Enter a valid email address."),
    ({"email": "x" * 139 + "@example.com"}, "Ensure this value has at most 150 characters"),
    ({"password2": "something-else-7"}, "The two password fields didn’t match."),
    ({"password1": "password", "password2": "password"}, "This password is too common."),
    ({"password1": "short", "password2": "short"}, "This password is too short."),
    (
        {
            "email": "fine.words@example.com",
            "password1": "fine.words@example",
            "password2": "fine.words@example",
        },
        "The password is too similar to the",
    ),
    ({"password1": "", "password2": ""}, "This field is required."),
]


@pytest.mark.parametrize(("data", "says"), ERRORS, ids=[says for _, says in ERRORS])
def test_bad_input_is_refused_with_its_reason_and_counts_for_nothing(client, data, says):
    response = sign_up(client, **data)
    assert response.status_code == 200
    assert says in response.content.decode()
    assert 'value="' + data.get("email", "vera@example.com") + '"' in response.content.decode()
    assert not Notification.objects.exists()
    assert not PendingSignUp.objects.exists()
    assert not RateLimitWindow.objects.filter(key__startswith="signup").exists()


@pytest.mark.parametrize(
    ("prefix", "says"),
    [
        ("", "Too many sign-up requests. Try again in 60 min."),
        ("/ru", "Слишком много запросов на регистрацию. Попробуйте снова через 60 мин."),
        ("/de", "Zu viele Registrierungsanfragen. Versuchen Sie es in 60 Min. erneut."),
    ],
)
def test_a_client_may_sign_up_five_times_an_hour(client, prefix, says):
    for n in range(REQUESTS_PER_CLIENT):
        assert sign_up(client, f"someone-{n}@example.com", prefix=prefix).status_code == 302
    refused = sign_up(client, prefix=prefix)
    assert refused.status_code == 429
    assert 3500 < int(refused["Retry-After"]) <= 3600
    assert says in refused.content.decode()
    assert not PendingSignUp.objects.filter(user__username="vera@example.com").exists()
    # Another client signs up as usual; the reset form's windows are its own.
    assert sign_up(client, prefix=prefix, client_address="198.51.100.20").status_code == 302
    assert (
        client.post(
            "/account/password-reset/", {"email": "x@example.com"}, REMOTE_ADDR="192.0.2.10"
        ).status_code
        == 302
    )


@pytest.mark.parametrize("address", ["ada@example.com", "vera@example.com"])
def test_an_address_gets_three_emails_an_hour_whoever_asks_and_whether_or_not_it_has_an_account(
    client, ada, address
):
    for n in range(REQUESTS_PER_ADDRESS):
        assert sign_up(client, address, client_address=f"10.0.0.{n}").status_code == 302
    refused = sign_up(client, address.upper(), client_address="10.0.0.99")
    assert refused.status_code == 429
    assert "Too many sign-up requests" in refused.content.decode()
    assert Notification.objects.count() == REQUESTS_PER_ADDRESS
    # The refusal did not count against the client that asked: it is one request of five.
    for n in range(REQUESTS_PER_CLIENT - 1):
        assert sign_up(client, f"x{n}@example.com", client_address="10.0.0.99").status_code == 302


def test_an_account_cannot_sign_in_before_its_address_is_confirmed(client):
    sign_up(client)
    refused = client.post("/account/sign-in/", {"username": "vera@example.com", "password": CHOSEN})
    assert refused.status_code == 200
    assert "Please enter a correct username and password" in refused.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_link_shows_a_form_and_only_the_password_confirms_and_signs_in(
    client, django_user_model
):
    sign_up(client)
    path = emailed_path(Notification.objects.get())
    # A GET, as a mail scanner makes, changes nothing.
    page = client.get(path)
    assert page.context["validlink"]
    assert "vera@example.com" in page.content.decode()
    assert not django_user_model.objects.get().is_active

    wrong = confirm(client, path, password="not-it")
    assert wrong.status_code == 200
    assert "That is not the password chosen when signing up" in wrong.content.decode()
    assert "Forgot that password? Sign up again with the same address" in wrong.content.decode()
    assert not django_user_model.objects.get().is_active

    done = confirm(client, path)
    assert done.status_code == 302
    assert done["Location"] == "/account/notifications/"
    user = django_user_model.objects.get()
    assert user.is_active
    assert not PendingSignUp.objects.exists()
    assert client.session["_auth_user_id"] == str(user.pk)
    assert "Your email address is confirmed" in client.get(done["Location"]).content.decode()

    # The link worked once.
    client.logout()
    again = client.get(path)
    assert again.context["validlink"] is False
    assert "This link does not work" in again.content.decode()
    assert confirm(client, path).context["validlink"] is False
    assert "_auth_user_id" not in client.session


def test_wrong_passwords_on_the_link_are_counted_as_failed_sign_ins(client, django_user_model):
    sign_up(client)
    path = emailed_path(Notification.objects.get())
    for _ in range(10):
        assert confirm(client, path, password="not-it").status_code == 200
    refused = confirm(client, path)
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.content.decode()
    assert not django_user_model.objects.get().is_active


class MadeADayAgo(signup.ConfirmationTokens):
    """The site's confirmation tokens, as made a day and a second ago."""

    def _now(self):
        return super()._now() - timedelta(hours=24, seconds=1)


class MadeAlmostADayAgo(signup.ConfirmationTokens):
    def _now(self):
        return super()._now() - timedelta(hours=23, minutes=59)


def link_for(user, token: str) -> str:
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return reverse("accounts:sign_up_confirm", kwargs={"uidb64": uid, "token": token})


def test_a_link_works_for_a_day(client, django_user_model):
    sign_up(client)
    user = django_user_model.objects.get()
    for generator, works in ((MadeAlmostADayAgo(), True), (MadeADayAgo(), False)):
        assert client.get(link_for(user, generator.make_token(user))).context["validlink"] is works
    expired = link_for(user, MadeADayAgo().make_token(user))
    assert confirm(client, expired).context["validlink"] is False
    assert not django_user_model.objects.get().is_active


def test_a_password_reset_token_is_no_confirmation(client, django_user_model):
    from django.contrib.auth.tokens import default_token_generator

    sign_up(client)
    user = django_user_model.objects.get()
    assert (
        client.get(link_for(user, default_token_generator.make_token(user))).context["validlink"]
        is False
    )


@pytest.mark.parametrize(
    "path",
    [
        "/account/sign-up/{uid}/{token}x/",
        "/account/sign-up/{uid}/0-0/",
        "/account/sign-up/{uid}/zzzzzzzzzzzzzzzzzz-1/",
        "/account/sign-up/{uid}/nodash/",
        "/account/sign-up/MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODk/{token}/",
        "/account/sign-up/%E2%98%83/{token}/",
        "/account/sign-up/!!!/{token}/",
        "/account/sign-up/YWJj/{token}/",
    ],
)
def test_a_forged_link_gets_the_page_that_says_so_never_a_500(client, django_user_model, path):
    sign_up(client)
    user = django_user_model.objects.get()
    uid, token = urlsafe_base64_encode(force_bytes(user.pk)), signup.tokens.make_token(user)
    for method in (client.get, client.post):
        response = method(path.format(uid=uid, token=token))
        assert response.status_code == 200
        assert "This link does not work" in response.content.decode()
    assert not django_user_model.objects.get().is_active


def test_a_signed_in_visitor_is_sent_home_from_the_sign_up_page(client, ada):
    client.force_login(ada)
    assert client.get(SIGN_UP)["Location"] == "/"
    assert sign_up(client)["Location"] == "/"
    assert not PendingSignUp.objects.exists()


@pytest.mark.parametrize(
    "page", ["/account/inbox/", "/account/notifications/", "/account/password/"]
)
def test_a_page_that_needs_an_account_leads_a_visitor_to_sign_in_and_to_sign_up(client, page):
    response = client.get(page, follow=True)
    assert response.redirect_chain[-1][0] == f"/account/sign-in/?next={page}"
    body = response.content.decode()
    assert "That page needs an account." in body
    assert 'href="/account/sign-up/"' in body
    assert 'href="/account/sign-in/"' in body


def test_the_header_links_sign_up_for_visitors_and_the_password_change_for_users(client, ada):
    visitor = client.get("/ru/").content.decode()
    assert 'href="/ru/account/sign-up/"' in visitor
    assert "Зарегистрироваться" in visitor
    assert "data-password-change-link" not in visitor
    client.force_login(ada)
    user = client.get("/de/").content.decode()
    assert '<a href="/de/account/password/" data-password-change-link>Passwort ändern</a>' in user
    assert 'href="/de/account/sign-up/"' not in user


def test_accounts_nobody_confirmed_for_a_week_are_deleted_by_housekeeping(
    client, ada, django_user_model
):
    for address in ("old@example.com", "fresh@example.com", "kept@example.com"):
        sign_up(client, address)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE accounts_pending_sign_ups SET asked_at = now() - interval '7 days 1 minute' "
            "WHERE user_id IN (SELECT id FROM auth_user WHERE username <> 'fresh@example.com')"
        )
    # One of the old ones was confirmed meanwhile: it is an account like any other.
    kept = django_user_model.objects.get(username="kept@example.com")
    assert signup.confirm(kept)
    # One staff switched off is no sign-up's.
    ada.is_active = False
    ada.save()

    assert tasks.housekeeping.call()["unconfirmed_sign_ups"] == 1
    assert set(django_user_model.objects.values_list("username", flat=True)) == {
        "ada",
        "fresh@example.com",
        "kept@example.com",
    }
    assert not Notification.objects.filter(user__username="old@example.com").exists()
    assert tasks.housekeeping.call()["unconfirmed_sign_ups"] == 0


@pytest.mark.django_db(transaction=True)
def test_sign_ups_of_one_new_address_at_once_make_one_account_and_no_error(django_user_model):
    start = threading.Barrier(4)
    errors = []

    def one():
        try:
            start.wait()
            signup.sign_up(
                email="race@example.com",
                password=CHOSEN,
                language="en",
                site_name="testserver",
                origin="http://testserver",
            )
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert django_user_model.objects.filter(username="race@example.com").count() == 1
    assert PendingSignUp.objects.count() == 1
    # Each sign-up asked for a link; only the last one's works.
    assert Notification.objects.filter(type="account.confirm_sign_up").count() == 4


# transaction=True: drain_outbox starts with close_old_connections(), which closes a
# connection left inside a test's transaction.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("prefix", "language", "subject", "says"),
    [
        ("", "en", "Confirm your email address on testserver", "To confirm it and sign in"),
        (
            "/ru",
            "ru",
            "Подтвердите адрес электронной почты на testserver",
            "Чтобы подтвердить его и войти",
        ),
        ("/de", "de", "Bestätigen Sie Ihre E-Mail-Adresse auf testserver", "Um sie zu bestätigen"),
    ],
)
def test_a_visitor_signs_up_confirms_by_email_in_their_language_and_signs_in(
    client, settings, smtp_server, django_user_model, prefix, language, subject, says
):
    settings.MAILERS = {"default": smtp_server.mailer(timeout=5)}
    assert sign_up(client, "Vera@example.com", prefix=prefix)["Location"] == prefix + SENT
    call_command("drain_outbox", "--once")
    assert NotificationDelivery.objects.get().status == Status.SENT

    [raw] = smtp_server.mailbox.raw
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert message["To"] == "Vera@example.com"
    assert message["Subject"] == subject
    assert message["Content-Language"] == language
    body = message.get_content()
    assert says in body and "24" in body
    [link] = LINK.findall(body)
    path = link.removeprefix("http://testserver")
    assert path.startswith(f"{prefix}/account/sign-up/")

    assert client.get(path).context["validlink"]
    assert confirm(client, path)["Location"] == f"{prefix}/account/notifications/"
    client.logout()
    # And from now on, with the address (as it was typed, which a browser saves) and the
    # password, as anyone signs in.
    signed_in = client.post(
        f"{prefix}/account/sign-in/", {"username": "Vera@example.com", "password": CHOSEN}
    )
    assert signed_in.status_code == 302
    user = django_user_model.objects.get()
    assert client.session["_auth_user_id"] == str(user.pk)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("language", "subject", "says"),
    [
        ("en", "Someone tried to sign up on testserver with your address", "No second account"),
        ("ru", "Кто-то пытался зарегистрироваться на testserver с вашим адресом", "Второй"),
        ("de", "Jemand wollte sich auf testserver mit Ihrer Adresse registrieren", "Es wurde"),
    ],
)
def test_the_owner_of_a_taken_address_is_told_in_their_language_through_the_drain(
    client, ada, settings, smtp_server, language, subject, says
):
    settings.MAILERS = {"default": smtp_server.mailer(timeout=5)}
    Recipient.objects.create(user=ada, language=language)
    assert sign_up(client, "ada@example.com", prefix="/de")["Location"] == "/de" + SENT
    call_command("drain_outbox", "--once")
    [raw] = smtp_server.mailbox.raw
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert (message["To"], message["Subject"]) == ("ada@example.com", subject)
    body = message.get_content()
    assert says in body and "ada" in body
    prefix = "" if language == "en" else f"/{language}"
    assert f"http://testserver{prefix}/account/sign-in/" in body
    assert f"http://testserver{prefix}/account/password-reset/" in body


def test_a_confirmation_checked_before_a_new_sign_up_confirms_nothing(client, django_user_model):
    # The link and the password were checked against the account as it was; a sign-up with
    # the same address came in between and set another password, which only its own link
    # may confirm.
    sign_up(client)
    checked = django_user_model.objects.get()
    sign_up(client, password1="another-new-password-9", password2="another-new-password-9")
    assert not signup.confirm(checked)
    assert not django_user_model.objects.get().is_active
    assert PendingSignUp.objects.exists()
    assert signup.confirm(django_user_model.objects.get())
    assert django_user_model.objects.get().is_active
    assert not PendingSignUp.objects.exists()


def test_a_username_with_capitals_made_by_staff_still_signs_in_as_it_is(client, django_user_model):
    django_user_model.objects.create_user("Staff@Example.com", password=CHOSEN)
    signed_in = client.post(
        "/account/sign-in/", {"username": "Staff@Example.com", "password": CHOSEN}
    )
    assert signed_in.status_code == 302
