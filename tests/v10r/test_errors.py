"""Error pages for requests whose bodies cannot be read: a 400, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("collected_static")]

FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def browser():
    """A client with the CSRF check on, as a real browser meets it (the test client's default
    skips it, and with it the path that turned these 400s into 500s)."""
    client = Client(enforce_csrf_checks=True)
    client.get("/showcases/workers/")  # the csrftoken cookie
    return client


@pytest.mark.parametrize(
    "path",
    ["/showcases/workers/try/", "/ru/showcases/workers/try/", "/admin/login/"],
)
@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        (f"{FORM}; charset=utf8", b"fail=1"),
        (f"{FORM}; charset=latin-1", b"fail=1"),
        (FORM, "&".join(f"f{i}=1" for i in range(1001)).encode()),  # over 1,000 fields
    ],
    ids=["utf8", "latin-1", "too-many-fields"],
)
def test_a_form_that_cannot_be_read_is_a_400(browser, path, content_type, body):
    response = browser.generic("POST", path, body, content_type=content_type)
    assert response.status_code == 400


def test_an_unknown_page_posted_an_unreadable_form_is_a_404(browser):
    response = browser.generic(
        "POST", "/no-such-page/", b"x=1", content_type=f"{FORM}; charset=utf8"
    )
    assert response.status_code == 404


@pytest.mark.parametrize(
    "path",
    ["/", "/showcases/workers/", "/showcases/workers/queue/", "/showcases/workers/sample.jpg"],
)
def test_pages_answer_head_as_uptime_checks_send_it(client, path):
    response = client.head(path)
    assert response.status_code == 200
    assert response.content == b""


@pytest.mark.parametrize(
    ("path", "title"),
    [
        ("/no-such-page/", "Page not found"),
        ("/ru/no-such-page/", "Страница не найдена"),
        ("/de/no-such-page/", "Seite nicht gefunden"),
    ],
)
def test_a_missing_page_is_the_sites_own_in_the_visitors_language(client, path, title):
    response = client.get(path)
    assert response.status_code == 404
    body = response.content.decode()
    assert f"<h1>{title}</h1>" in body
    assert 'class="site-header"' in body  # the site's page, with its navigation


@pytest.mark.parametrize("language", ["en", "ru", "de"])
def test_the_server_error_page_renders_without_a_request_in_each_language(language):
    from django.template import loader
    from django.utils import translation

    with translation.override(language):
        body = loader.get_template("500.html").render()
    assert f'<html lang="{language}">' in body
    expected = {"en": "Something went wrong", "ru": "Что-то пошло не так"}
    expected["de"] = "Etwas ist schiefgelaufen"
    assert f"<h1>{expected[language]}</h1>" in body


@pytest.mark.parametrize(
    ("path", "language", "title"),
    [
        ("/showcases/jobs/demo/", "en", "The form was not sent"),
        ("/ru/showcases/jobs/demo/", "ru", "Форма не отправлена"),
        ("/de/showcases/jobs/demo/", "de", "Das Formular wurde nicht gesendet"),
    ],
)
def test_a_form_without_its_csrf_token_gets_the_sites_page_in_the_visitors_language(
    path, language, title
):
    response = Client(enforce_csrf_checks=True).post(path)
    assert response.status_code == 403
    body = response.content.decode()
    assert f'<html lang="{language}" ' in body
    assert f"<h1>{title}</h1>" in body
    assert 'class="site-header"' in body
    assert "DEBUG" not in body  # Django's own page speaks to developers
