"""The live queue under "Try it", in Chromium: a refusal stays until its wait is over, the
button stays where it is as the feed grows, and offline (or with the server silent) the queue
says so in the page's language, polls less and keeps the console quiet. Each try says how
soon a drain picked it up."""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import translation

from notifications import worker
from notifications.models import NotificationDelivery
from showcases import views
from showcases.templatetags.showcases import pickup_note
from tests.browser.conftest import csp_violations

pytestmark = pytest.mark.browser

PAGE = "/showcases/workers/"
PREFIX = {"en": "", "ru": "/ru", "de": "/de"}
POLL_S = 2
TRY_BUTTON = ".try-it button[type=submit]"
WAIT = {
    "en": re.compile(r"^Too many tries; wait (\d+) s\.$"),
    "ru": re.compile(r"^Слишком много попыток; подождите (\d+) с\.$"),
}
OFFLINE = {
    "en": "This browser is offline, so the live queue has stopped updating",
    "ru": "Браузер не в сети, поэтому очередь перестала обновляться",
}


def open_page(page, site, language: str = "en") -> None:
    page.goto(site.url + PREFIX[language] + PAGE)
    page.wait_for_selector("#palette-demo[data-ready=true]")


def polled(page, times: int = 1, *, timeout_s: float = POLL_S * 3) -> None:
    """Wait until the live queue has been replaced by `times` polls."""
    for _ in range(times):
        page.evaluate("document.getElementById('queue-live').dataset.seen = 'yes'")
        page.wait_for_function(
            "() => document.getElementById('queue-live').dataset.seen === undefined",
            timeout=timeout_s * 1000,
        )


def try_error(page) -> str:
    return " ".join(page.text_content("#try-error").split())


def console_errors(page) -> list[str]:
    errors: list[str] = []

    def record(message):
        if message.type == "error":
            errors.append(message.text)

    page.on("console", record)
    return errors


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_rate_limited_try_keeps_its_message_through_the_polls_and_counts_down(
    site, page, language, monkeypatch
):
    # The server thread reads the same module: one try a 6-second window.
    monkeypatch.setattr(views, "TRY_LIMIT", 1)
    monkeypatch.setattr(views, "LIMIT_WINDOW", timedelta(seconds=6))
    open_page(page, site, language)
    page.click(TRY_BUTTON)
    page.wait_for_selector("[data-feed-status=pending]")
    page.click(TRY_BUTTON)
    page.wait_for_selector("#try-error:not([hidden])", timeout=10_000)
    first = int(WAIT[language].match(try_error(page)).group(1))
    assert 1 <= first <= 6
    polled(page, times=2)
    # Two polls later the refusal is still there, its wait a second or more shorter.
    assert page.is_visible("#try-error")
    later = WAIT[language].match(try_error(page))
    assert later, try_error(page)
    assert int(later.group(1)) < first
    # And gone once the wait is over: the next try is let in.
    page.wait_for_selector("#try-error", state="hidden", timeout=(first + 2) * 1000)
    page.click(TRY_BUTTON)
    page.wait_for_function("() => document.querySelectorAll('[data-feed-status]').length === 2")
    assert page.is_hidden("#try-error")
    assert csp_violations(page) == []


def top_of(page, selector: str) -> float:
    """Where the element's top is on the page (not in the viewport, which a click scrolls)."""
    return page.eval_on_selector(
        selector, "(el) => el.getBoundingClientRect().top + window.scrollY"
    )


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", r"picked up in \d+\xa0(ms|s)"),
        ("ru", r"взято в работу через \d+\xa0(мс|с)"),
        ("de", r"nach \d+\xa0(ms|s) abgeholt"),
    ],
)
def test_a_try_says_how_soon_a_drain_picked_it_up(site, page, language, said):
    open_page(page, site, language)
    page.click(TRY_BUTTON)
    page.wait_for_selector("[data-feed-status=pending]")
    assert page.locator("[data-feed-pickup]").count() == 0  # nobody has claimed it yet
    worker.drain_once()  # committed apart from the try: a real wait between the two
    shown = page.wait_for_selector("[data-feed-pickup]", timeout=POLL_S * 3000).text_content()
    assert re.fullmatch(said, shown), shown
    # The very wait the row records: from its enqueue's now() to its claim's.
    (delivery,) = NotificationDelivery.objects.filter(channel="demo")
    with translation.override(language):
        assert shown == pickup_note(delivery)
    assert csp_violations(page) == []


def test_the_try_it_button_stays_in_place_as_the_feed_grows(site, page):
    open_page(page, site)
    before = top_of(page, TRY_BUTTON)
    for count in range(1, 5):
        page.click(TRY_BUTTON)
        page.wait_for_function(
            "(n) => document.querySelectorAll('[data-feed-status]').length === n", arg=count
        )
        assert top_of(page, TRY_BUTTON) == pytest.approx(before, abs=1), count


@pytest.mark.parametrize("language", ["en", "ru"])
def test_offline_the_live_queue_says_so_stops_polling_and_logs_nothing(site, page, language):
    open_page(page, site, language)
    polled(page)
    errors = console_errors(page)
    polls: list[str] = []

    def record(request):
        if "/queue/" in request.url:
            polls.append(request.url)

    page.on("request", record)
    page.context.set_offline(True)
    page.wait_for_selector("[data-queue-note]:not([hidden])")
    assert page.text_content("[data-queue-note]").startswith(OFFLINE[language])
    assert "stale" in page.get_attribute("#queue-live", "class")
    # Three polls' worth of time: none is sent, and nothing is logged.
    page.wait_for_timeout(3 * POLL_S * 1000)
    assert polls == []
    assert errors == []
    page.context.set_offline(False)
    polled(page)
    assert page.is_hidden("[data-queue-note]")
    assert "stale" not in page.get_attribute("#queue-live", "class")
    assert errors == []
    assert csp_violations(page) == []


def test_when_the_server_does_not_answer_the_live_queue_backs_off_and_says_so(site, page):
    open_page(page, site)
    errors = console_errors(page)
    attempts: list[float] = []

    def refuse(route):
        attempts.append(time.monotonic())
        route.abort("connectionrefused")

    page.route("**/showcases/workers/queue/", refuse)
    note = page.wait_for_selector("[data-queue-note]:not([hidden])", timeout=POLL_S * 3000)
    assert note.text_content() == (
        "The server did not answer, so the live queue has stopped updating; it tries again in 4 s."
    )
    page.wait_for_function(
        "() => document.querySelector('[data-queue-note]').textContent.endsWith('in 8 s.')",
        timeout=10_000,
    )
    first, second = attempts[:2]
    # Twice the poll interval after the first failure, not the usual two seconds.
    assert second - first >= 2 * POLL_S - 0.5, attempts
    # What is left in the console is the browser's own line for each failed request.
    assert len(errors) <= len(attempts), errors
    assert all("net::ERR_CONNECTION_REFUSED" in error for error in errors), errors
    page.unroute("**/showcases/workers/queue/")
    polled(page, timeout_s=8 + POLL_S * 3)
    assert page.is_hidden("[data-queue-note]")


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", "This browser is offline; “Try it” needs the network."),
        ("ru", "Браузер не в сети, а для «Попробовать» нужна сеть."),
    ],
)
def test_try_it_offline_says_it_needs_the_network_and_sends_nothing(site, page, language, said):
    open_page(page, site, language)
    errors = console_errors(page)
    posts: list[str] = []

    def record(request):
        if request.method == "POST":
            posts.append(request.url)

    page.on("request", record)
    page.context.set_offline(True)
    page.wait_for_selector("[data-queue-note]:not([hidden])")
    page.click(TRY_BUTTON)
    page.wait_for_selector("#try-error:not([hidden])")
    assert try_error(page) == said
    assert posts == []
    assert errors == []
    page.context.set_offline(False)
    page.wait_for_selector("#try-error", state="hidden")
    page.click(TRY_BUTTON)
    page.wait_for_selector("[data-feed-status=pending]")
    assert csp_violations(page) == []
