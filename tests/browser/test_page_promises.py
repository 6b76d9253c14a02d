"""What the workers page and the site around it promise a visitor, checked in Chromium in
English and Russian: the Try-it feed says what each row waits for, the page's copy is true of
the site today, and the site has its own icons and error pages."""

from __future__ import annotations

import re

import pytest

from notifications import worker
from showcases import views
from tests.browser.conftest import csp_violations

pytestmark = pytest.mark.browser

PAGE = "/showcases/workers/"
PREFIX = {"en": "", "ru": "/ru"}


def open_page(page, site, language: str) -> None:
    page.goto(site.url + PREFIX[language] + PAGE)
    page.wait_for_selector("#palette-demo[data-ready=true]")


def try_it(page, *, fail: bool = False) -> None:
    """Queue one and wait until the feed has a new newest row."""
    newest = page.evaluate(
        "() => document.querySelector('[data-feed-status]')?.textContent ?? null"
    )
    page.set_checked(".try-it input[name=fail]", fail)
    page.click(".try-it button[type=submit]")
    page.wait_for_function(
        """(newest) => {
            const row = document.querySelector('[data-feed-status]');
            return row !== null && row.textContent !== newest;
        }""",
        arg=newest,
    )


def feed(page) -> list[dict]:
    return page.evaluate(
        """() => [...document.querySelectorAll('[data-feed-status]')].map((row) => ({
            status: row.dataset.feedStatus,
            text: row.textContent.replace(/\\s+/g, ' ').trim(),
            note: row.querySelector('[data-feed-note]')?.textContent.trim() ?? '',
        }))"""
    )


@pytest.mark.parametrize("language", ["en", "ru"])
def test_ten_tries_are_ten_different_rows(site, page, language):
    open_page(page, site, language)
    for _ in range(views.TRY_LIMIT):
        try_it(page)
    labels = [re.search(r"[#№] ?(\d+)", row["text"]).group(1) for row in feed(page)]
    # The feed keeps the newest eight, newest first: tries 10 down to 3, none repeated.
    assert labels == [str(n) for n in range(10, 2, -1)]
    assert csp_violations(page) == []


@pytest.mark.parametrize(
    ("language", "said", "not_said"),
    [
        ("en", "for the drain loop to claim and deliver", "claimed and delivered"),
        ("ru", "чтобы цикл обработки захватил и доставил", "захвачено и доставлено"),
    ],
)
def test_a_queued_row_says_it_waits_for_the_drain_loop_not_that_it_was_delivered(
    site, page, language, said, not_said
):
    open_page(page, site, language)
    try_it(page)
    (row,) = feed(page)
    assert row["status"] == "pending"
    assert said in row["text"]
    assert not_said not in row["text"]
    # And why it waits: no drain loop ticks in this test, so nothing will claim it yet.
    assert (
        row["note"]
        == {
            "en": "No drain loop is running, so it waits until one starts.",
            "ru": "Цикл обработки не запущен, поэтому доставка ждёт, пока он не заработает.",
        }[language]
    )


@pytest.mark.parametrize(
    ("language", "failed", "then"),
    [
        ("en", "Send 1 of 5 failed: as you asked, the demo channel refused it.", "The next send"),
        (
            "ru",
            "Отправка 1 из 5 не удалась: как вы и просили, демо-канал её отклонил.",
            "Следующая",
        ),
    ],
)
def test_a_failing_row_shows_its_error_and_its_next_send(site, page, language, failed, then):
    open_page(page, site, language)
    try_it(page, fail=True)
    worker.drain_once()  # the drain loop's turn: one send, which fails as asked
    page.wait_for_selector("[data-feed-status=retrying]", timeout=10_000)
    (row,) = feed(page)
    assert row["note"].startswith(f"{failed} {then}"), row["note"]
    assert re.search(r"\d+\s(min|мин)", row["note"]), "says when it will be given up"
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_refused_try_says_why_in_the_visitors_language(site, page, language, monkeypatch):
    from showcases import queue_demo

    monkeypatch.setattr(queue_demo, "PENDING_LIMIT", 1)  # the server thread shares the module
    open_page(page, site, language)
    try_it(page)
    page.click(".try-it button[type=submit]")
    alert = page.wait_for_selector("#try-error:not([hidden])", timeout=10_000)
    assert (
        alert.text_content()
        == {
            "en": "The demo queue is full; try again in a minute.",
            "ru": "Очередь демо заполнена; попробуйте через минуту.",
        }[language]
    )
    assert csp_violations(page) == []


@pytest.mark.parametrize(
    ("language", "browser_lanes", "server_lane", "service_worker"),
    [
        (
            "en",
            "The two browser lanes run the same function",
            "always on a 720 px copy",
            "keeps the site’s scripts, styles and icons and an offline page per language",
        ),
        (
            "ru",
            "Две браузерные дорожки запускают одну и ту же функцию",
            "всегда на копии размером 720 пкс",
            "хранит скрипты, стили и значки сайта и офлайн-страницу на каждом языке",
        ),
    ],
)
def test_the_page_says_only_what_the_site_does(
    site, page, language, browser_lanes, server_lane, service_worker
):
    open_page(page, site, language)
    text = " ".join(page.inner_text("main").split())
    assert browser_lanes in text
    assert server_lane in text
    assert service_worker in text
    assert not re.search(r"[Bb]oth lanes|[Оо]бе дорожки", text)
    # The service-worker row describes a worker the page really registers (what it keeps is
    # checked in test_service_worker.py).
    assert page.get_attribute("html", "data-service-worker") == "/service-worker.js"


@pytest.mark.parametrize(
    ("language", "heading"), [("en", "Page not found"), ("ru", "Страница не найдена")]
)
def test_a_missing_page_is_the_sites_own_in_the_visitors_language(site, page, language, heading):
    response = page.goto(site.url + PREFIX[language] + "/no-such-page/")
    assert response.status == 404
    assert page.get_attribute("html", "lang") == language
    assert heading in page.text_content("h1")
    assert page.locator("header a[href]").count() >= 1, "a way back to the site"
    assert csp_violations(page) == []


def test_every_page_has_an_icon_that_loads(site, page):
    failed = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    open_page(page, site, "en")
    icon = page.get_attribute("link[rel=icon]", "href")
    touch = page.get_attribute("link[rel=apple-touch-icon]", "href")
    assert page.request.get(site.url + icon).headers["content-type"] == "image/svg+xml"
    assert page.request.get(site.url + touch).headers["content-type"] == "image/png"
    assert page.request.get(site.url + "/favicon.ico").ok  # followed to the SVG
    assert page.request.head(site.url + "/").status == 200
    assert failed == []
