"""Which language a page is in (v10r/language.py): the URL's prefix when it has one; on
arrival at a page without one, the visitor's choice (the language cookie), else their
browser's Accept-Language; a page opened from the site's own pages in another language than
that is the visitor's choice, and is remembered."""

from __future__ import annotations

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db

COOKIE = settings.LANGUAGE_COOKIE_NAME
RUSSIAN_BROWSER = {"HTTP_ACCEPT_LANGUAGE": "ru-RU,ru;q=0.9,en;q=0.5"}
# A link followed on the site itself, as a browser says it.
FROM_THE_SITE = {"HTTP_SEC_FETCH_SITE": "same-origin", "HTTP_SEC_FETCH_MODE": "navigate"}
FROM_ELSEWHERE = {"HTTP_SEC_FETCH_SITE": "cross-site", "HTTP_SEC_FETCH_MODE": "navigate"}


def vary(response) -> set[str]:
    return {name.strip().lower() for name in response.get("Vary", "").split(",")}


@pytest.mark.parametrize(
    ("path", "accept", "to"),
    [
        ("/", "ru-RU,ru;q=0.9,en;q=0.5", "/ru/"),
        ("/showcases/jobs/?x=1", "de-DE,de;q=0.9", "/de/showcases/jobs/?x=1"),
        # The admin is inside the prefixes: staff arrive in their browser's language too.
        ("/admin/", "de", "/de/admin/"),
        ("/admin/login/?next=/admin/", "ru", "/ru/admin/login/?next=/admin/"),
    ],
)
def test_a_first_visit_follows_the_browsers_language(client, path, accept, to):
    for arrival in ({}, FROM_ELSEWHERE):
        response = client.get(path, HTTP_ACCEPT_LANGUAGE=accept, **arrival)
        assert response.status_code == 302
        assert response["Location"] == to
        assert {"accept-language", "cookie"} <= vary(response)


@pytest.mark.parametrize("accept", ["", "en-GB,en;q=0.9", "fr-FR,fr;q=0.9", "*"])
def test_a_browser_that_asks_for_english_or_for_no_language_of_the_site_gets_english(
    client, accept
):
    response = client.get("/", HTTP_ACCEPT_LANGUAGE=accept)
    assert response.status_code == 200
    assert response["Content-Language"] == "en"
    assert {"accept-language", "cookie"} <= vary(response)


def test_choosing_english_on_the_site_is_remembered_over_the_browsers_language(client):
    # The switcher's English link, followed from /ru/: the URL's language, no redirect back.
    chosen = client.get("/showcases/workers/", **RUSSIAN_BROWSER, **FROM_THE_SITE)
    assert chosen.status_code == 200
    assert chosen["Content-Language"] == "en"
    assert chosen.cookies[COOKIE].value == "en"
    assert "private" in chosen["Cache-Control"]
    # Tomorrow, from a bookmark: the choice wins over the browser.
    again = client.get("/", **RUSSIAN_BROWSER, **FROM_ELSEWHERE)
    assert again.status_code == 200
    assert again["Content-Language"] == "en"


def test_choosing_german_on_the_site_is_remembered_for_the_next_arrival(client):
    chosen = client.get("/de/", **RUSSIAN_BROWSER, **FROM_THE_SITE)
    assert chosen.cookies[COOKIE].value == "de"
    assert client.get("/showcases/jobs/", **RUSSIAN_BROWSER)["Location"] == "/de/showcases/jobs/"


def test_without_sec_fetch_headers_a_referer_from_this_host_marks_the_sites_own_link(client):
    response = client.get("/", HTTP_REFERER="http://testserver/ru/", **RUSSIAN_BROWSER)
    assert response.status_code == 200
    assert response.cookies[COOKIE].value == "en"
    # Another site's link is an arrival.
    client.cookies.clear()
    response = client.get("/", HTTP_REFERER="https://elsewhere.example/", HTTP_ACCEPT_LANGUAGE="ru")
    assert response.status_code == 302


def test_moving_about_the_site_in_the_language_one_arrived_in_stores_nothing(client):
    in_russian = client.get("/ru/showcases/jobs/", **RUSSIAN_BROWSER, **FROM_THE_SITE)
    assert COOKIE not in in_russian.cookies
    assert COOKIE not in client.get("/showcases/jobs/", **FROM_THE_SITE).cookies


def test_a_prefixed_url_wins_over_the_choice_and_the_browser(client):
    client.cookies[COOKIE] = "ru"
    response = client.get("/de/", **RUSSIAN_BROWSER, **FROM_ELSEWHERE)
    assert response.status_code == 200
    assert response["Content-Language"] == "de"
    assert COOKIE not in response.cookies


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        # A form is answered where it was posted.
        ("post", "/account/sign-in/", {}),
        # htmx, fetch() and the service worker ask for the URL they name.
        ("get", "/showcases/jobs/log/", {"HTTP_HX_REQUEST": "true"}),
        ("get", "/offline/", {"HTTP_SEC_FETCH_MODE": "same-origin"}),
        # Machine endpoints have no language.
        ("get", "/favicon.ico", {}),
        ("get", "/service-worker.js", {}),
    ],
)
def test_only_navigations_to_pages_are_steered(client, method, path, headers):
    response = getattr(client, method)(path, **RUSSIAN_BROWSER, **headers)
    assert not response.get("Location", "").startswith("/ru/")
    assert COOKIE not in response.cookies


def test_the_service_workers_english_offline_page_does_not_vary_on_cookies(client):
    # The worker keeps no response that varies on a cookie (docs/service-worker.md).
    response = client.get("/offline/", HTTP_SEC_FETCH_MODE="same-origin", **RUSSIAN_BROWSER)
    assert response.status_code == 200
    assert "cookie" not in vary(response)
