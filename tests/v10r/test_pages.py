from __future__ import annotations

import html
import re
from pathlib import Path
from typing import NamedTuple

import polib
import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db

PAGES = ["/", "/showcases/workers/", "/showcases/jobs/"]


def catalogue(language: str) -> list[polib.POEntry]:
    path = Path(settings.BASE_DIR, "locale", language, "LC_MESSAGES", "django.po")
    return [e for e in polib.pofile(str(path)) if e.msgstr and e.msgstr != e.msgid]


def visible_text(body: str) -> str:
    """Return the page's prose: less scripts, styles, code (SQL reads the same in any
    language) and links marked as another language (the language switcher names each
    language in itself: "English" on the Russian page)."""
    text = re.sub(r"<(script|style|pre|code)\b.*?</\1>", " ", body, flags=re.S)
    text = re.sub(r"<a\b[^>]*\blang=[^>]*>.*?</a>", " ", text, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    return " ".join(html.unescape(text).split())


def untranslated(text: str, entries: list[polib.POEntry]) -> list[str]:
    """Return the catalogue's English messages that stand in text as whole words.

    A one-word message that the translations use themselves ("Worker" inside "Web Worker",
    German "des Workers") proves nothing, so it is not looked for.
    """
    loanwords = {word for e in entries for word in re.findall(r"\w+", e.msgstr)}
    return [
        e.msgid
        for e in entries
        if not (" " not in e.msgid.strip() and e.msgid.strip() in loanwords)
        and re.search(r"(?<!\w)" + re.escape(" ".join(e.msgid.split())) + r"(?!\w)", text)
    ]


class Words(NamedTuple):
    """What the site says in one of its languages."""

    prefix: str  # of its URLs
    language: str
    heading: str  # the home page's
    header: str  # the admin's
    back: str  # the admin's link back to the site


IN_EACH_LANGUAGE = [
    Words("", "en", "Workers, made concrete", "v10r administration", "Back to the site"),
    Words("/ru", "ru", "Воркеры на деле", "Администрирование v10r", "Вернуться на сайт"),
    Words("/de", "de", "Worker zum Anfassen", "v10r-Verwaltung", "Zurück zur Website"),
]


@pytest.mark.parametrize("words", IN_EACH_LANGUAGE, ids=lambda words: words.language)
def test_the_home_page_speaks_the_language_of_its_url(client, words):
    response = client.get(words.prefix + "/")
    assert response.status_code == 200
    body = response.content.decode()
    assert f'<html lang="{words.language}" ' in body
    assert f"<h1>{words.heading}</h1>" in body
    assert response["Content-Language"] == words.language


def test_the_home_page_links_the_workers_showcase_and_the_admin(client):
    body = client.get("/de/").content.decode()
    assert 'href="/de/showcases/workers/"' in body
    assert 'href="/de/admin/"' in body


@pytest.mark.parametrize("page", PAGES)
def test_every_page_links_itself_in_every_language(client, page):
    body = client.get("/ru" + page).content.decode()
    for code, url in [("en", page), ("ru", "/ru" + page), ("de", "/de" + page)]:
        assert f'<a href="{url}" hreflang="{code}" lang="{code}"' in body


@pytest.mark.parametrize("language", ["ru", "de"])
@pytest.mark.parametrize("page", PAGES)
def test_no_catalogued_english_is_left_on_a_translated_page(client, language, page):
    text = visible_text(client.get(f"/{language}{page}").content.decode())
    assert untranslated(text, catalogue(language)) == []


def test_the_check_above_bites_on_the_english_page(client):
    text = visible_text(client.get("/").content.decode())
    assert len(untranslated(text, catalogue("ru"))) > 10


@pytest.mark.parametrize(
    "path", ["/", "/ru/", "/de/showcases/workers/", "/admin/login/", "/no-such-page/"]
)
def test_every_html_response_carries_the_content_security_policy(client, path):
    response = client.get(path)
    assert response["Content-Type"].startswith("text/html")
    policy = response["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'self'"
    assert directives["script-src"].startswith("'self'")
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert directives["worker-src"] == "'self' blob:"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"


def test_pages_refuse_methods_they_do_not_serve(client):
    assert client.post("/").status_code == 405


@pytest.mark.parametrize("page", [*PAGES, "/ru/", "/admin/login/"])
def test_every_page_links_the_icons(client, page):
    body = client.get(page).content.decode()
    assert re.search(r'<link rel="icon" href="[^"]*favicon[^"]*\.svg" type="image/svg\+xml">', body)
    if not page.startswith("/admin/"):
        assert re.search(
            r'<link rel="apple-touch-icon" href="[^"]*apple-touch-icon[^"]*\.png">', body
        )


@pytest.mark.parametrize("method", ["get", "head"])
def test_favicon_ico_leads_to_the_icon(client, method):
    response = getattr(client, method)("/favicon.ico")
    assert response.status_code == 302
    assert re.fullmatch(r"/static/icons/favicon(\.[0-9a-f]+)?\.svg", response["Location"])
    assert client.post("/favicon.ico").status_code == 405


def test_the_icons_are_what_they_say():
    from django.contrib.staticfiles import finders
    from PIL import Image

    with Image.open(finders.find("icons/apple-touch-icon.png")) as touch:
        assert (touch.format, touch.size, touch.mode) == ("PNG", (180, 180), "RGB")
    svg = Path(finders.find("icons/favicon.svg")).read_text()
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"')


@pytest.mark.parametrize("words", IN_EACH_LANGUAGE, ids=lambda words: words.language)
def test_the_admin_speaks_its_urls_language_is_branded_and_leads_back_to_the_site(client, words):
    # The login page, where a visitor who followed "Admin" lands, included.
    response = client.get(f"{words.prefix}/admin/login/")
    assert response.status_code == 200
    body = response.content.decode()
    assert f'<html lang="{words.language}"' in body
    assert f'<a href="{words.prefix}/admin/">{words.header}</a>' in body
    assert f'<a class="admin-back" href="{words.prefix}/">{words.back}</a>' in body
    assert "Django administration" not in body


@pytest.mark.parametrize("prefix", ["", "/ru", "/de"])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_leads_to_both_showcases_in_its_language(client, prefix, page):
    body = client.get(prefix + page).content.decode()
    nav = body.split('class="site-nav"', 1)[1].split("</nav>", 1)[0]
    assert f'href="{prefix}/showcases/workers/"' in nav
    assert f'href="{prefix}/showcases/jobs/"' in nav
