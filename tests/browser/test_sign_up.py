"""Sign-up in Chromium, in each language: from a page that needs an account, through the
sign-up form, the emailed link (sent by a real drain to a real SMTP server) and its password,
to an account that signs out and signs in again; under the site's CSP, with no violation."""

from __future__ import annotations

import email
import email.policy
import re

import pytest
from django.core.management import call_command

from tests.browser.conftest import csp_violations, in_each_language
from tests.helpers import poll

pytestmark = pytest.mark.browser

CHOSEN = "a-fine-new-password-8"

WORDS = {
    "": {
        "needs": "That page needs an account.",
        "sign_up": "Sign up",
        "sent": "An email is on its way to that address.",
        "confirm": "Confirm and sign in",
        "confirmed": "Your email address is confirmed, and you are signed in.",
        "signed_in": "Signed in as vera@example.com",
        "sign_out": "Sign out",
        "sign_in": "Sign in",
    },
    "/ru": {
        "needs": "Для этой страницы нужна учётная запись.",
        "sign_up": "Зарегистрироваться",
        "sent": "Письмо на этот адрес уже в пути.",
        "confirm": "Подтвердить и войти",
        "confirmed": "Ваш адрес электронной почты подтверждён, и вы вошли.",
        "signed_in": "Вы вошли как vera@example.com",
        "sign_out": "Выйти",
        "sign_in": "Войти",
    },
    "/de": {
        "needs": "Für diese Seite brauchen Sie ein Konto.",
        "sign_up": "Registrieren",
        "sent": "Eine E-Mail an diese Adresse ist unterwegs.",
        "confirm": "Bestätigen und anmelden",
        "confirmed": "Ihre E-Mail-Adresse ist bestätigt, und Sie sind angemeldet.",
        "signed_in": "Angemeldet als vera@example.com",
        "sign_out": "Abmelden",
        "sign_in": "Anmelden",
    },
}

prefix, words = in_each_language(WORDS)


def test_sign_up_confirm_by_email_and_sign_in(site, page, settings, smtp_server, prefix, words):
    settings.MAILERS = {"default": smtp_server.mailer(timeout=5)}
    page.goto(f"{site.url}{prefix}/account/inbox/")
    page.wait_for_url(re.compile(re.escape(f"{site.url}{prefix}/account/sign-in/?next=")))
    assert words["needs"] in page.text_content("[data-account-needed]")
    page.click(f"[data-sign-up-link] a:text-is('{words['sign_up']}')")
    page.wait_for_url(f"{site.url}{prefix}/account/sign-up/")

    page.fill("#id_email", "Vera@example.com")
    page.fill("#id_password1", CHOSEN)
    page.fill("#id_password2", CHOSEN)
    page.click(f"form[data-sign-up] button:text-is('{words['sign_up']}')")
    page.wait_for_url(f"{site.url}{prefix}/account/sign-up/sent/")
    assert words["sent"] in page.text_content("[data-sign-up-sent]")
    assert csp_violations(page) == []

    call_command("drain_outbox", "--once")
    assert poll(lambda: len(smtp_server.mailbox.raw) == 1)
    message = email.message_from_bytes(smtp_server.mailbox.raw[0], policy=email.policy.default)
    assert message["Content-Language"] == (prefix.strip("/") or "en")
    [link] = re.findall(r"http://\S+/account/sign-up/[\w-]+/[\w-]+/", message.get_content())
    assert link.startswith(f"{site.url}{prefix}/account/sign-up/")

    page.goto(link)
    page.fill("#id_password", CHOSEN)
    page.click(f"form[data-confirm-sign-up] button:text-is('{words['confirm']}')")
    page.wait_for_url(f"{site.url}{prefix}/account/notifications/")
    assert words["confirmed"] in page.text_content(".messages")
    assert page.text_content("[data-signed-in-as]").strip() == words["signed_in"]
    assert csp_violations(page) == []

    page.click(f".site-header button:text-is('{words['sign_out']}')")
    page.wait_for_url(f"{site.url}{prefix}/account/sign-out/")
    page.click(f".site-header a.account-control:text-is('{words['sign_in']}')")
    page.fill("#id_username", "Vera@example.com")
    page.fill("#id_password", CHOSEN)
    page.click(f"form[data-sign-in] button:text-is('{words['sign_in']}')")
    page.wait_for_url(f"{site.url}{prefix}/")
    assert page.text_content("[data-signed-in-as]").strip() == words["signed_in"]
    assert csp_violations(page) == []
