"""One-click unsubscribe (RFC 8058): the signed token, the email's headers and footer through a
real SMTP server on loopback, and the link's page under hostile input."""

from __future__ import annotations

import email
import email.policy
import re
from urllib.parse import quote, urlsplit

import pytest
from django.core import signing
from django.test import Client

from accounts import unsubscribe as page
from notifications import worker
from notifications.enqueue import send_notification
from notifications.models import NotificationDelivery, SkipReason, Status
from recipients import catalogue, preferences
from recipients import tokens as tokens
from recipients.models import ChannelPreference
from tests.helpers import make_outgoing
from transports.email import EmailChannel

ONE_CLICK = "List-Unsubscribe=One-Click"
FORM = "application/x-www-form-urlencoded"
ACTION_URL = "https://v10r.example/n/7"  # make_outgoing's


@pytest.fixture
def ada(django_user_model):
    return django_user_model.objects.create_user("ada", email="ada@example.com")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", email="bob@example.com")


@pytest.fixture
def email_channel():
    channel = EmailChannel()
    yield channel
    channel.close()


def link(user, *, category: str = "account", channel: str = "email", language: str = "") -> str:
    token = tokens.make(user_id=user.pk, category=category, channel=channel)
    return f"/{language}/unsubscribe/{token}/" if language else f"/unsubscribe/{token}/"


def one_click(client, path: str, **extra):
    """The POST a mail provider sends: RFC 8058's body, form-encoded, no cookies."""
    return client.post(path, data=ONE_CLICK, content_type=FORM, **extra)


def choices(user) -> list[tuple[str, str, bool]]:
    return list(
        ChannelPreference.objects.filter(user=user).values_list("category", "channel", "enabled")
    )


# --- The token ------------------------------------------------------------------------------


def test_a_token_verifies_to_the_user_category_and_channel_it_was_made_for(db):
    token = tokens.make(user_id=42, category="account", channel="email")
    assert tokens.verify(token) == (42, "account", "email")
    assert len(token) < 80 and re.fullmatch(r"[A-Za-z0-9._-]+", token)  # a URL as it stands


def test_the_same_choice_always_makes_the_same_token_and_another_choice_another(db):
    token = tokens.make(user_id=42, category="account", channel="email")
    assert tokens.make(user_id=42, category="account", channel="email") == token
    assert tokens.make(user_id=43, category="account", channel="email") != token


def test_a_changed_character_anywhere_in_a_token_is_refused(db):
    token = tokens.make(user_id=42, category="account", channel="email")
    for at in range(len(token)):
        changed = token[:at] + ("A" if token[at] != "A" else "B") + token[at + 1 :]
        with pytest.raises(tokens.TokenRefused):
            tokens.verify(changed)


def test_a_token_for_another_user_with_this_tokens_signature_is_refused(db):
    signature = tokens.make(user_id=42, category="account", channel="email").rpartition(".")[2]
    with pytest.raises(tokens.TokenRefused):
        tokens.verify(f"43.account.email.{signature}")


@pytest.mark.parametrize("cut", [1, 10, 43, 50])
def test_a_truncated_token_is_refused(db, cut):
    token = tokens.make(user_id=42, category="account", channel="email")
    with pytest.raises(tokens.TokenRefused):
        tokens.verify(token[:-cut])


def test_a_value_signed_with_another_salt_or_key_is_refused(db, settings):
    value = "42.account.email"
    with pytest.raises(tokens.TokenRefused):
        tokens.verify(signing.Signer(salt="accounts.other", sep=".").sign(value))
    with pytest.raises(tokens.TokenRefused):
        tokens.verify(signing.Signer(sep=".").sign(value))  # Django's default salt
    made = tokens.make(user_id=42, category="account", channel="email")
    settings.SECRET_KEY = "another-key-" + "x" * 50
    with pytest.raises(tokens.TokenRefused):
        tokens.verify(made)


def test_a_token_made_before_the_key_was_rotated_works_while_the_old_key_is_a_fallback(
    db, settings
):
    old = settings.SECRET_KEY
    made = tokens.make(user_id=42, category="account", channel="email")
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "the-next-key-" + "y" * 50, [old]
    assert tokens.verify(made) == (42, "account", "email")


def test_no_token_is_made_for_a_required_or_unknown_category_or_channel(db):
    for category, channel in [("security", "email"), ("nope", "email"), ("demo", "demo")]:
        with pytest.raises(ValueError, match="no unsubscribe link|required"):
            tokens.make(user_id=42, category=category, channel=channel)
    with pytest.raises(ValueError, match="channel"):
        tokens.make(user_id=42, category="account", channel="pigeon")


@pytest.mark.parametrize(
    "value",
    [
        "42.security.email",  # required: nobody unsubscribes from it
        "42.demo.demo",  # not a recipient's choice
        "42.nope.email",
        "42.account.pigeon",
        "42.account",
        "0.account.email",
        f"{2**63}.account.email",
        "x.account.email",
        "٤٢.account.email",  # decimal, but not ASCII digits
    ],
)
def test_a_correctly_signed_token_naming_what_no_link_may_name_is_refused(db, value):
    # Signed as this module signs, as a token made by an older version, or by a bug, would be.
    forged = signing.Signer(salt=tokens.SALT, sep=tokens.SEPARATOR).sign(value)
    with pytest.raises(tokens.TokenRefused):
        tokens.verify(forged)


@pytest.mark.parametrize("token", ["", "x" * 10_000, "42.account.email.\x00", "42.account.émail.x"])
def test_hostile_strings_are_refused_as_tokens(db, token):
    with pytest.raises(tokens.TokenRefused):
        tokens.verify(token)


# --- The email --------------------------------------------------------------------------------


def send(channel, user, *, message_key: str = "welcome", language: str = "en"):
    """Send message_key to user as the drain does: with the category's label and the signed
    link on Outgoing when the recipient may stop it (tokens.offer), nothing when not."""
    offered = tokens.offer(
        user_id=user.pk,
        category=catalogue.MESSAGES[message_key].category,
        channel="email",
        language=language,
    )
    label, url = offered or ("", "")
    channel.send(
        make_outgoing(
            channel="email",
            address=user.email,
            message_key=message_key,
            type=message_key,
            user_id=user.pk,
            language=language,
            category_label=label,
            unsubscribe_url=url,
        )
    )


def received(server):
    [raw] = server.mailbox.raw
    assert raw.isascii() and all(len(line) <= 998 for line in raw.split(b"\r\n"))
    return email.message_from_bytes(raw, policy=email.policy.default)


def body_of(message) -> str:
    return message.get_content().replace("\r\n", "\n")


def test_an_email_of_a_category_one_may_leave_carries_the_one_click_headers(
    db, ada, mail_to, email_channel
):
    send(email_channel, ada)
    message = received(mail_to)
    header = message["List-Unsubscribe"]
    assert header.startswith("<") and header.endswith(">")
    url = urlsplit(header[1:-1])
    assert (url.scheme, url.netloc) == ("https", "v10r.example")
    token = re.fullmatch(r"/unsubscribe/([^/]+)/", url.path).group(1)
    assert tokens.verify(token) == (ada.pk, "account", "email")
    assert message["List-Unsubscribe-Post"] == ONE_CLICK
    body = body_of(message)
    assert "\n-- \n" in body  # the footer, apart as a signature
    assert f"Stop “Your account” emails: {header[1:-1]}" in body
    assert "Choose which emails you get: https://v10r.example/account/notifications/" in body


def test_a_russian_recipients_links_are_under_the_russian_prefix(db, ada, mail_to, email_channel):
    send(email_channel, ada, language="ru")
    message = received(mail_to)
    assert message["List-Unsubscribe"].startswith("<https://v10r.example/ru/unsubscribe/")
    assert "https://v10r.example/ru/account/notifications/" in body_of(message)


def test_a_security_email_has_no_unsubscribe_header_and_no_footer(db, ada, mail_to, email_channel):
    send(email_channel, ada, message_key="account.password_reset")
    message = received(mail_to)
    assert message["List-Unsubscribe"] is None
    assert message["List-Unsubscribe-Post"] is None
    body = body_of(message)
    assert "-- " not in body and "unsubscribe" not in body.lower()
    assert "/account/notifications/" not in body


def test_without_site_origin_no_header_is_sent_and_the_footer_names_no_link(
    db, ada, mail_to, email_channel, settings
):
    settings.SITE_ORIGIN = ""
    send(email_channel, ada)
    message = received(mail_to)
    assert message["List-Unsubscribe"] is None and message["List-Unsubscribe-Post"] is None
    body = body_of(message)
    assert "sign in and open your notification settings" in body
    assert "http" not in body.replace(ACTION_URL, "")


@pytest.mark.parametrize(
    ("origin", "sent"),
    [
        # make run's loopback, if SITE_ORIGIN is set for it: a link, though not RFC 8058's.
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://пример.рф", "https://xn--e1afmkfd.xn--p1ai"),  # a header carries ASCII
        ("https://v10r.example:8443", "https://v10r.example:8443"),
    ],
)
def test_the_link_is_built_on_site_origin_as_it_is_set(
    db, ada, mail_to, email_channel, settings, origin, sent
):
    settings.SITE_ORIGIN = origin
    send(email_channel, ada)
    message = received(mail_to)
    assert message["List-Unsubscribe"].startswith(f"<{sent}/unsubscribe/")
    assert f"{sent}/account/notifications/" in body_of(message)


def test_a_mailer_that_is_not_smtp_gets_the_headers_too(db, ada, settings, email_channel):
    from django.core import mail

    settings.SITE_ORIGIN = "https://v10r.example"
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    send(email_channel, ada)
    [sent] = mail.outbox
    assert sent.extra_headers["List-Unsubscribe"].startswith("<https://v10r.example/unsubscribe/")
    assert sent.extra_headers["List-Unsubscribe-Post"] == ONE_CLICK


def test_an_rfc_8058_post_to_the_emails_link_turns_that_category_off(
    db, ada, mail_to, email_channel
):
    send(email_channel, ada)
    url = urlsplit(received(mail_to)["List-Unsubscribe"][1:-1])
    # A mail provider's server: no cookies, no CSRF token, and Django checking for one.
    provider = Client(enforce_csrf_checks=True)
    response = one_click(provider, url.path)
    assert response.status_code == 200
    assert choices(ada) == [("account", "email", False)]
    assert preferences.of(ada).enabled("account", "email") is False
    assert preferences.of(ada).enabled("account", "telegram") is True  # that channel only


def test_through_the_drain_the_emails_one_click_post_makes_the_next_one_skipped(db, ada, mail_to):
    # What issue 23 is done by: queued, drained to the SMTP server, unsubscribed by the
    # header's link, and the next one of that category written as skipped (opted out).
    send_notification(user=ada, type="welcome", params={"name": "Ada"}, channels=["email"])
    assert worker.drain_once().sent == 1
    url = urlsplit(received(mail_to)["List-Unsubscribe"][1:-1])
    assert url.scheme == "https"
    assert one_click(Client(enforce_csrf_checks=True), url.path).status_code == 200
    later = send_notification(user=ada, type="welcome", params={"name": "Ada"}, channels=["email"])
    assert (later.queued, later.skipped) == ((), {"email": SkipReason.OPTED_OUT})
    delivery = NotificationDelivery.objects.get(notification=later.notification)
    assert (delivery.status, delivery.skip_reason) == (Status.SKIPPED, SkipReason.OPTED_OUT)


# --- The page ---------------------------------------------------------------------------------


def test_a_get_shows_the_question_and_a_button_and_changes_nothing(db, client, ada):
    response = client.get(link(ada))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Unsubscribe from “Your account” messages by email?" in html
    assert re.search(r'<form method="post"[^>]*data-unsubscribe="confirm"', html)
    assert 'name="List-Unsubscribe" value="One-Click"' in html
    assert client.head(link(ada)).status_code == 200
    assert choices(ada) == []


def test_the_page_is_in_the_language_of_its_prefix(db, client, ada):
    response = client.get(link(ada, language="de"))
    assert response.status_code == 200
    assert '<html lang="de"' in response.content.decode()
    assert 'href="/de/account/notifications/"' in response.content.decode()


def test_the_pages_button_unsubscribes(db, client, ada):
    response = client.post(link(ada), {"List-Unsubscribe": "One-Click"})
    assert response.status_code == 200
    assert 'data-unsubscribe="done"' in response.content.decode()
    assert choices(ada) == [("account", "email", False)]


def test_a_replayed_post_changes_nothing_more_and_says_already(db, client, ada):
    assert one_click(client, link(ada)).status_code == 200
    again = one_click(client, link(ada))
    assert again.status_code == 200
    assert 'data-unsubscribe="already"' in again.content.decode()
    assert choices(ada) == [("account", "email", False)]
    assert 'data-unsubscribe="already"' in client.get(link(ada)).content.decode()


def test_a_token_still_works_after_the_password_changes(db, client, ada):
    path = link(ada)
    ada.set_password("a new password, long enough")
    ada.save()
    assert one_click(client, path).status_code == 200
    assert choices(ada) == [("account", "email", False)]


def test_a_tampered_token_is_a_400_and_changes_nobodys_choices(db, client, ada, bob):
    signature = tokens.make(user_id=ada.pk, category="account", channel="email").rpartition(".")[2]
    for path in (f"/unsubscribe/{bob.pk}.account.email.{signature}/", link(ada)[:-5] + "/"):
        response = one_click(client, path)
        assert response.status_code == 400
        assert 'data-unsubscribe="refused"' in response.content.decode()
    assert ChannelPreference.objects.count() == 0


def test_a_deleted_users_token_is_a_400(db, client, ada):
    path = link(ada)
    ada.delete()
    assert one_click(client, path).status_code == 400
    assert client.get(path).status_code == 400


@pytest.mark.parametrize(
    "token",
    [
        "x" * 10_000,
        quote("42.account.email.\x00"),
        quote("42.аккаунт.email.подпись"),
        quote("<img src=x onerror=alert(1)>", safe=""),
        "..",
    ],
)
def test_hostile_tokens_get_a_400_page(db, client, token):
    for method in (client.get, client.post):
        response = method(f"/unsubscribe/{token}/")
        assert response.status_code == 400, method
    assert "<img src=x" not in response.content.decode()


@pytest.mark.parametrize("method", ["put", "delete", "patch", "options"])
def test_other_methods_are_refused_with_405(db, client, ada, method):
    response = getattr(client, method)(link(ada))
    assert response.status_code == 405
    assert choices(ada) == []


def test_a_client_sending_refused_tokens_is_refused_for_a_while(db, client, ada, settings):
    bad = "/unsubscribe/42.account.email.nope/"
    for _ in range(page.REFUSED_PER_CLIENT):
        assert client.post(bad).status_code == 400
    refused = client.post(bad)
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    # Another client is not.
    assert client.post(bad, REMOTE_ADDR="192.0.2.7").status_code == 400


def test_one_providers_posts_for_many_readers_are_never_refused(db, client, django_user_model):
    # A mail provider's one-click POSTs for its many readers come from a few addresses.
    readers = [
        django_user_model.objects.create_user(f"reader{n}", email=f"r{n}@example.com")
        for n in range(page.REFUSED_PER_CLIENT + page.POSTS_PER_TOKEN + 5)
    ]
    for reader in readers:
        assert one_click(client, link(reader), REMOTE_ADDR="192.0.2.25").status_code == 200
    assert ChannelPreference.objects.filter(enabled=False).count() == len(readers)


def test_a_replayed_token_is_never_refused_and_writes_only_once(db, client, ada):
    for _ in range(page.POSTS_PER_TOKEN + 5):
        assert one_click(client, link(ada)).status_code == 200
    assert choices(ada) == [("account", "email", False)]
    # The recipient turns it back on; their provider's one-click POST still works.
    preferences.choose(ada, choices={("account", "email"): True})
    assert one_click(client, link(ada), REMOTE_ADDR="192.0.2.8").status_code == 200
    assert choices(ada) == [("account", "email", False)]


def test_one_token_that_keeps_changing_things_is_refused_for_a_while(db, client, ada):
    # Each change needs the recipient to turn the category back on first; more than the
    # limit in an hour is refused, so a token bounds the writes it can cause.
    for _ in range(page.POSTS_PER_TOKEN):
        assert one_click(client, link(ada)).status_code == 200
        preferences.choose(ada, choices={("account", "email"): True})
    refused = one_click(client, link(ada), REMOTE_ADDR="192.0.2.8")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert choices(ada) == []
