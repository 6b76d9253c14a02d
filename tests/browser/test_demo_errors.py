"""A lane's failure is told in the page's language. The browser's own words are English
whatever the page's language: they go to the console and the error's tooltip, never into
the sentence."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo, run_lane

pytestmark = pytest.mark.browser


PREFIX = {"en": "", "ru": "/ru"}
BROWSER_WORDS = "The source image could not be decoded."

# As Chromium rejects an image it cannot decode.
UNDECODABLE_IN_PAGE = """(words) => {
    window.createImageBitmap = () => Promise.reject(new DOMException(words, "InvalidStateError"));
}"""
UNDECODABLE_IN_WORKER = """(words) => {
    self.createImageBitmap = () => Promise.reject(new DOMException(words, "InvalidStateError"));
}"""
# As Chromium answers a canvas too large for the memory it has.
NO_CANVAS = "() => { OffscreenCanvas.prototype.getContext = () => null; }"
WORKER_URL_404 = (
    "document.getElementById('palette-demo').dataset.workerUrl = '/static/no-such-worker.js'"
)
WORKER_TIMEOUT_5_MS = "document.getElementById('palette-demo').dataset.workerTimeoutMs = '5'"

MESSAGES = {
    "decode": {
        "en": "The browser could not decode this image.",
        "ru": "Браузер не смог декодировать это изображение.",
    },
    "memory": {
        "en": "The browser ran out of memory for this photo. Try the 720 px work size.",
        "ru": "Браузеру не хватило памяти для этого фото. Попробуйте объём работы 720 пкс.",
    },
    "worker load": {
        "en": "The worker could not start, so nothing ran. Reload the page and try again.",
        "ru": (
            "Воркер не запустился, так что ничего не выполнилось. Перезагрузите страницу и "
            "попробуйте снова."
        ),
    },
    "timeout": {
        "en": (
            "The worker did not answer within 0.005 s, so it was stopped; the next run starts "
            "a fresh one."
        ),
        "ru": (
            "Воркер не ответил за 0,005 с, и его остановили; следующий запуск начнётся с "
            "нового воркера."
        ),
    },
    "unreachable": {
        "en": "The server could not be reached. Check the connection and try again.",
        "ru": "Не удалось связаться с сервером. Проверьте подключение и попробуйте снова.",
    },
    "no explanation": {
        "en": "The server answered with an error (502) and no explanation. Try again later.",
        "ru": "Сервер ответил ошибкой (502) без объяснения. Попробуйте позже.",
    },
}


def open_with_photo(page, site, language: str, photo: str) -> list[str]:
    """Open the demo with a photo chosen; return the list the console's errors land in."""
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    open_demo(page, site, PREFIX[language] + PAGE)
    page.set_input_files("#demo-file", photo)
    page.wait_for_selector("[data-run=main]:not([disabled])")
    return errors


def failure(page, lane: str) -> tuple[str, str | None]:
    """Run lane, wait for its error and the buttons; return the error and its tooltip."""
    page.click(f"[data-run={lane}]")
    error = page.wait_for_selector("[data-error]:not([hidden])", timeout=15_000)
    page.wait_for_selector(f"[data-run={lane}]:not([disabled])")
    return error.text_content(), error.get_attribute("title")


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_decode_failure_on_the_main_thread_is_told_in_the_pages_words(
    site, page, small_png, language
):
    console = open_with_photo(page, site, language, small_png)
    page.evaluate(UNDECODABLE_IN_PAGE, BROWSER_WORDS)
    message, tooltip = failure(page, "main")
    assert message == MESSAGES["decode"][language]
    assert tooltip == BROWSER_WORDS
    assert any(BROWSER_WORDS in line for line in console), console
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_decode_failure_in_the_worker_is_told_in_the_pages_words(site, page, small_png, language):
    open_with_photo(page, site, language, small_png)
    run_lane(page, "worker")  # the worker now exists, to be broken
    [worker] = page.workers
    worker.evaluate(UNDECODABLE_IN_WORKER, BROWSER_WORDS)
    message, tooltip = failure(page, "worker")
    assert message == MESSAGES["decode"][language]
    assert tooltip == BROWSER_WORDS
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
@pytest.mark.parametrize(
    ("breakage", "lane", "script"),
    [
        # A canvas the browser cannot allocate is told as running out of memory.
        pytest.param("memory", "main", NO_CANVAS, id="no-canvas"),
        # A 404 module worker, which is not a CSP matter either.
        pytest.param("worker load", "worker", WORKER_URL_404, id="worker-does-not-load"),
        # The timeout is told with a localised number.
        pytest.param("timeout", "worker", WORKER_TIMEOUT_5_MS, id="worker-timeout"),
    ],
)
def test_a_lane_that_breaks_is_told_in_the_pages_words(
    site, page, small_png, language, breakage, lane, script
):
    open_with_photo(page, site, language, small_png)
    page.evaluate(script)
    message, _tooltip = failure(page, lane)
    assert message == MESSAGES[breakage][language]
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_server_that_cannot_be_reached_is_told_in_the_pages_words(
    site, page, small_png, language
):
    open_with_photo(page, site, language, small_png)
    page.route("**/analyse/", lambda route: route.abort("connectionrefused"))
    message, tooltip = failure(page, "server")
    assert message == MESSAGES["unreachable"][language]
    assert tooltip == "Failed to fetch"
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru"])
def test_an_error_page_from_a_proxy_is_told_with_its_status(site, page, small_png, language):
    open_with_photo(page, site, language, small_png)
    page.route(
        "**/analyse/",
        lambda route: route.fulfill(
            status=502, content_type="text/html", body="<h1>502 Bad Gateway</h1>"
        ),
    )
    message, _tooltip = failure(page, "server")
    assert message == MESSAGES["no explanation"][language]
    assert csp_violations(page) == []


def test_the_servers_own_refusal_is_shown_as_the_server_wrote_it(site, page, small_png):
    open_with_photo(page, site, "ru", small_png)
    page.route(
        "**/analyse/",
        lambda route: route.fulfill(
            status=400,
            content_type="application/json",
            body='{"error": "Не удалось декодировать изображение.", "detail": "broken data"}',
        ),
    )
    message, tooltip = failure(page, "server")
    assert (message, tooltip) == ("Не удалось декодировать изображение.", "broken data")
    assert csp_violations(page) == []


TOO_LARGE = {
    "en": (
        "The server refused the photo as too large: the server lane takes files up to 20 MB. "
        "The two browser lanes can still run it."
    ),
    "ru": (
        "Сервер отклонил фото как слишком большое: серверная дорожка принимает файлы не больше "
        "20 МБ. Обе браузерные дорожки могут обработать его."
    ),
}
NGINX_413 = {
    "html page": ("text/html", "<html><h1>413 Request Entity Too Large</h1></html>"),
    "json with a code": ("application/json", '{"code": "request_too_large"}'),
    "empty": ("text/plain", ""),
}


@pytest.mark.parametrize("body", list(NGINX_413))
@pytest.mark.parametrize("language", ["en", "ru"])
def test_a_413_from_a_proxy_is_told_as_too_large_with_the_servers_limit(
    site, page, small_png, language, body
):
    open_with_photo(page, site, language, small_png)
    content_type, text = NGINX_413[body]
    page.route(
        "**/analyse/",
        lambda route: route.fulfill(status=413, content_type=content_type, body=text),
    )
    message, _tooltip = failure(page, "server")
    assert message.replace("\xa0", " ") == TOO_LARGE[language]
    assert csp_violations(page) == []


def test_the_apps_own_413_keeps_its_reason(site, page, small_png):
    # The app refuses an upload within the byte limit for what decoding it would cost: that
    # reason, translated by the server, is the one to show.
    open_with_photo(page, site, "en", small_png)
    words = "Decoding this image would take 130 MB of memory, more than the 112 MB allowed."
    page.route(
        "**/analyse/",
        lambda route: route.fulfill(
            status=413, content_type="application/json", body=json.dumps({"error": words})
        ),
    )
    message, _tooltip = failure(page, "server")
    assert message == words
    assert csp_violations(page) == []


TOO_MANY = {
    "en": (
        "The server is getting too many requests from this address; try again in a second. "
        "The two browser lanes can still run it."
    ),
    "ru": (
        "С этого адреса на сервер приходит слишком много запросов; попробуйте через секунду. "
        "Обе браузерные дорожки могут обработать фото."
    ),
}


@pytest.mark.parametrize("language", ["en", "ru"])
def test_nginxs_429_is_told_in_the_pages_language(site, page, small_png, language):
    open_with_photo(page, site, language, small_png)
    # deploy/nginx.conf's @photo_too_many, word for word.
    body = '{"error": "Too many requests; try again in 1 s.", "code": "too_many"}'
    page.route(
        "**/analyse/",
        lambda route: route.fulfill(
            status=429, content_type="application/json", body=body, headers={"Retry-After": "1"}
        ),
    )
    message, _tooltip = failure(page, "server")
    assert message.replace("\xa0", " ") == TOO_MANY[language]
    assert csp_violations(page) == []
