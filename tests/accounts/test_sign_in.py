"""The site's sign-in and sign-out: Django's views under /account/, in the visitor's
language, throttled on the same counts as the admin's login."""

from __future__ import annotations

import pytest

from core.signin import LOGIN_FAILURES_PER_CLIENT
from tests.accounts.conftest import NEW_PASSWORD, PASSWORD, change_password

pytestmark = pytest.mark.django_db

SIGN_IN = "/account/sign-in/"
SIGN_OUT = "/account/sign-out/"
WRONG = {
    "": "Please enter a correct username and password",
    "/ru": "Пожалуйста, введите правильные имя пользователя и пароль",
    "/de": "Bitte Benutzername und Passwort eingeben",
}
REFUSED = {
    "": "Too many failed sign-ins. Try again in 15 min.",
    "/ru": "Слишком много неудачных попыток входа. Попробуйте снова через 15",
    "/de": "Zu viele fehlgeschlagene Anmeldungen. Versuchen Sie es in 15 Min.",
}


def sign_in(client, *, prefix="", password=PASSWORD, address="192.0.2.10", **extra):
    return client.post(
        prefix + SIGN_IN, {"username": "ada", "password": password, **extra}, REMOTE_ADDR=address
    )


@pytest.mark.parametrize("prefix", ["", "/ru", "/de"])
def test_the_right_password_signs_in_and_lands_on_the_home_page_in_its_language(
    client, ada, prefix
):
    response = sign_in(client, prefix=prefix)
    assert response.status_code == 302
    assert response["Location"] == prefix + "/"
    assert client.session["_auth_user_id"] == str(ada.pk)


def test_a_next_on_this_site_is_followed_and_one_elsewhere_is_not(client, ada):
    assert sign_in(client, next="/showcases/jobs/")["Location"] == "/showcases/jobs/"
    client.logout()
    assert sign_in(client, next="https://evil.example/")["Location"] == "/"


@pytest.mark.parametrize("prefix", ["", "/ru", "/de"])
def test_a_wrong_password_is_refused_in_the_visitors_language(client, ada, prefix):
    response = sign_in(client, prefix=prefix, password="wrong")
    assert response.status_code == 200
    assert WRONG[prefix] in response.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.parametrize("prefix", ["", "/ru", "/de"])
def test_after_ten_failures_even_the_right_password_is_refused_with_a_429(client, ada, prefix):
    for _ in range(LOGIN_FAILURES_PER_CLIENT):
        assert sign_in(client, prefix=prefix, password="wrong").status_code == 200
    refused = sign_in(client, prefix=prefix)
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 15 * 60
    assert REFUSED[prefix] in refused.content.decode()
    assert "_auth_user_id" not in client.session
    # Another client is not locked out by this one's guesses.
    assert sign_in(client, prefix=prefix, address="198.51.100.20").status_code == 302


def test_failures_at_the_admins_login_count_here_and_the_other_way_round(client, ada):
    for _ in range(LOGIN_FAILURES_PER_CLIENT // 2):
        client.post(
            "/admin/login/", {"username": "ada", "password": "wrong"}, REMOTE_ADDR="192.0.2.10"
        )
    for _ in range(LOGIN_FAILURES_PER_CLIENT - LOGIN_FAILURES_PER_CLIENT // 2):
        sign_in(client, password="wrong")
    assert sign_in(client).status_code == 429
    admin = client.post(
        "/admin/login/", {"username": "ada", "password": PASSWORD}, REMOTE_ADDR="192.0.2.10"
    )
    assert REFUSED[""] in admin.content.decode()


def test_the_header_offers_sign_in_and_then_names_the_user_with_sign_out(client, ada):
    anonymous = client.get("/de/").content.decode()
    assert 'href="/de/account/sign-in/">Anmelden</a>' in anonymous
    client.force_login(ada)
    signed_in = client.get("/de/").content.decode()
    assert "Angemeldet als Ada" in signed_in
    assert 'action="/de/account/sign-out/"' in signed_in
    assert "csrfmiddlewaretoken" in signed_in.split('action="/de/account/sign-out/"', 1)[1]


def test_sign_out_is_post_only(client, ada):
    client.force_login(ada)
    assert client.get(SIGN_OUT).status_code == 405
    assert client.session["_auth_user_id"] == str(ada.pk)
    response = client.post("/ru" + SIGN_OUT)
    assert response.status_code == 200
    body = response.content.decode()
    assert "Вы вышли" in body
    assert "pwa/flush" in body  # the service worker empties its caches, as after the admin
    assert "_auth_user_id" not in client.session


def test_sign_out_needs_the_csrf_token(ada, collected_static):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ada)
    assert strict.post(SIGN_OUT).status_code == 403
    assert strict.session["_auth_user_id"] == str(ada.pk)


def test_a_page_that_needs_a_user_sends_a_visitor_to_the_sites_sign_in(client):
    response = client.get("/ru/account/password/")
    assert response.status_code == 302
    assert response["Location"].startswith("/ru/account/sign-in/?next=")


def test_a_signed_in_user_changes_their_password(client, ada):
    client.force_login(ada)
    response = change_password(client)
    assert response["Location"] == "/account/password/changed/"
    ada.refresh_from_db()
    assert ada.check_password(NEW_PASSWORD)


def test_the_offline_page_names_nobody_and_reads_no_session_so_the_worker_may_keep_it(client, ada):
    client.force_login(ada)
    home = client.get("/")
    assert "Signed in as Ada" in home.content.decode()
    assert "Cookie" in home["Vary"]
    # As the service worker fetches it to keep: not a navigation (v10r/language.py).
    offline = client.get("/offline/", HTTP_SEC_FETCH_MODE="same-origin")
    assert "Signed in as" not in offline.content.decode()
    assert "Cookie" not in offline.get("Vary", "")


def test_a_stolen_session_cannot_guess_the_old_password_without_limit(client, ada):
    client.force_login(ada)
    for _ in range(LOGIN_FAILURES_PER_CLIENT):
        assert change_password(client, old="wrong", REMOTE_ADDR="192.0.2.10").status_code == 200
    refused = change_password(client, old=PASSWORD, REMOTE_ADDR="192.0.2.10")
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 15 * 60
    assert REFUSED[""] in refused.content.decode()
    ada.refresh_from_db()
    assert ada.check_password(PASSWORD)
    # The count is the sign-in's: the same client is refused at the sign-in form too.
    client.logout()
    assert sign_in(client).status_code == 429


@pytest.mark.parametrize("next_url", ["/ru/", "//evil.example/", "https://evil.example/"])
def test_sign_out_always_shows_its_own_page_whatever_next_says(client, ada, next_url):
    client.force_login(ada)
    response = client.post(SIGN_OUT + "?next=" + next_url)
    assert response.status_code == 200
    assert "pwa/flush" in response.content.decode()
    assert "_auth_user_id" not in client.session
