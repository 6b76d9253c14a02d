"""The account pages in Chromium, in each language: sign in from the header, sign out with
its button, ask for a password reset; under the site's CSP, with no violation."""

from __future__ import annotations

import pytest

from notifications.models import Notification
from tests.browser.conftest import READER_PASSWORD, csp_violations, in_each_language
from tests.helpers import poll

pytestmark = pytest.mark.browser

PASSWORD = READER_PASSWORD

WORDS = {
    "": {
        "sign_in": "Sign in",
        "signed_in": "Signed in as Ada",
        "sign_out": "Sign out",
        "signed_out": "You are signed out",
        "wrong": "Please enter a correct username and password",
        "forgot": "Forgot your password?",
        "send": "Send the link",
        "sent": "If an account has that address",
    },
    "/ru": {
        "sign_in": "Войти",
        "signed_in": "Вы вошли как Ada",
        "sign_out": "Выйти",
        "signed_out": "Вы вышли",
        "wrong": "Пожалуйста, введите правильные имя пользователя и пароль",
        "forgot": "Забыли пароль?",
        "send": "Прислать ссылку",
        "sent": "Если у какой-либо учётной записи есть этот адрес",
    },
    "/de": {
        "sign_in": "Anmelden",
        "signed_in": "Angemeldet als Ada",
        "sign_out": "Abmelden",
        "signed_out": "Sie sind abgemeldet",
        "wrong": "Bitte Benutzername und Passwort eingeben",
        "forgot": "Passwort vergessen?",
        "send": "Link senden",
        "sent": "Wenn ein Konto diese Adresse hat",
    },
}

prefix, words = in_each_language(WORDS)


def test_sign_in_from_the_header_and_sign_out_again(site, page, ada, prefix, words):
    page.goto(f"{site.url}{prefix}/")
    page.click(f".site-header a.account-control:text-is('{words['sign_in']}')")
    page.wait_for_url(f"{site.url}{prefix}/account/sign-in/")

    page.fill("#id_username", "ada")
    page.fill("#id_password", "wrong")
    page.click(f"form[data-sign-in] button:text-is('{words['sign_in']}')")
    page.wait_for_selector(".errorlist")
    assert words["wrong"] in page.text_content(".errorlist")

    page.fill("#id_password", PASSWORD)
    page.click(f"form[data-sign-in] button:text-is('{words['sign_in']}')")
    page.wait_for_url(f"{site.url}{prefix}/")
    assert page.text_content("[data-signed-in-as]").strip() == words["signed_in"]
    assert csp_violations(page) == []

    page.click(f".site-header button:text-is('{words['sign_out']}')")
    page.wait_for_url(f"{site.url}{prefix}/account/sign-out/")
    assert page.text_content("h1") == words["signed_out"]
    assert page.text_content(".site-header a.account-control") == words["sign_in"]
    # The service worker's caches are emptied (0 when none controls the page), as after the
    # admin's logout: its script ran under the CSP.
    page.wait_for_selector("html[data-caches-flushed]", state="attached")
    assert csp_violations(page) == []


def test_ask_for_a_password_reset_from_the_sign_in_page(site, page, ada, prefix, words):
    page.goto(f"{site.url}{prefix}/account/sign-in/")
    page.click(f"text={words['forgot']}")
    page.wait_for_url(f"{site.url}{prefix}/account/password-reset/")
    page.fill("#id_email", "ada@example.com")
    page.click(f"form[data-password-reset] button:text-is('{words['send']}')")
    page.wait_for_url(f"{site.url}{prefix}/account/password-reset/sent/")
    assert words["sent"] in page.text_content("[data-reset-sent]")
    assert csp_violations(page) == []
    # Queued once the server has sent its answer (accounts/views.py): perhaps a moment after
    # the browser has followed it.
    resets = Notification.objects.filter(user=ada, type="account.password_reset")
    assert poll(lambda: resets.count() == 1, seconds=5)
    assert resets.count() == 1
