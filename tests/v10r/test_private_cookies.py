"""Every response that sets a cookie says `Cache-Control: private, no-store`: the one thing
about it a service worker can read (it is never shown Set-Cookie)."""

from __future__ import annotations

import pytest
from django.utils.cache import get_max_age

from tests.urls import WITH_COOKIE, WITHOUT_COOKIE

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/showcases/workers/",
    "/ru/showcases/workers/",
    "/de/",
    "/offline/",
    "/admin/login/",
    "/manifest.webmanifest",
    "/service-worker.js",
    "/showcases/workers/sample.jpg",
]


def directives(response) -> set[str]:
    return {d.strip().split("=")[0].lower() for d in response.get("Cache-Control", "").split(",")}


def test_a_response_that_sets_a_cookie_is_private_and_not_stored_whatever_the_view_said(
    client, settings
):
    settings.ROOT_URLCONF = "tests.urls"
    response = client.get(WITH_COOKIE)
    assert response.cookies["probe"].value == "1"
    assert {"private", "no-store"} <= directives(response)
    assert "public" not in directives(response)

    twin = client.get(WITHOUT_COOKIE)
    assert not twin.cookies
    assert directives(twin) == {"max-age", "public", "immutable"}
    assert get_max_age(twin) == 315360000


@pytest.mark.parametrize("path", PAGES)
def test_every_page_that_sets_a_cookie_on_a_first_visit_says_so_in_cache_control(client, path):
    response = client.get(path)
    assert response.status_code == 200
    if response.cookies:
        assert {"private", "no-store"} <= directives(response), (path, response["Cache-Control"])


def test_the_csrf_and_session_cookies_both_mark_their_responses(client, django_user_model):
    # The workers page's forms set the CSRF cookie; signing in sets the session's.
    page = client.get("/showcases/workers/")
    assert "csrftoken" in page.cookies
    assert {"private", "no-store"} <= directives(page)

    django_user_model.objects.create_superuser("staff", "staff@example.com", "pass-word-1")
    client.get("/admin/login/")
    signed_in = client.post(
        "/admin/login/?next=/admin/",
        {"username": "staff", "password": "pass-word-1", "next": "/admin/"},
    )
    assert signed_in.status_code == 302
    assert "sessionid" in signed_in.cookies
    assert {"private", "no-store"} <= directives(signed_in)


def test_a_response_without_a_cookie_keeps_the_caching_its_view_chose(client):
    manifest = client.get("/manifest.webmanifest")
    assert not manifest.cookies
    assert manifest["Cache-Control"] == "public, max-age=3600"
