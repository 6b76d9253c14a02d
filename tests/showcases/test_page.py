from __future__ import annotations

import html
import io
import json
import re
import subprocess
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from notifications import heartbeat, outbox, worker
from notifications.models import NotificationDelivery
from showcases import palette
from tests.helpers import post_from, require

PAGE = "/showcases/workers/"
pytestmark = pytest.mark.django_db


def test_the_claim_on_the_page_is_the_very_statement_the_worker_runs(client):
    body = client.get(PAGE).content.decode()
    assert f"<code data-claim-sql>{html.escape(outbox.CLAIM_SQL)}</code>" in body
    # It scrolls sideways on a phone: reachable by keyboard, named by its caption.
    assert '<pre tabindex="0" aria-labelledby="claim-sql-caption">' in body


def test_the_policy_grid_is_computed_from_the_settings_and_backoff(client, settings):
    settings.DELIVERY_BATCH_SIZE = 40
    body = client.get(PAGE).content.decode()
    # Each number is tied to its unit by a no-break space, as everywhere on the site.
    curve = "30 s → 2 min → 8 min → 32 min (±15%)".replace(" s", "\u00a0s").replace(
        " min", "\u00a0min"
    )
    assert curve in body
    assert "<dd>40</dd>" in body
    assert "<dd>5\u00a0min</dd>" in body  # the lease, 300 s


@pytest.mark.parametrize(
    ("platform", "beat", "state"),
    [("container", False, "stopped"), ("container", True, "running"), ("vercel", False, "dormant")],
)
def test_the_badge_tells_whether_a_loop_really_runs(client, settings, platform, beat, state):
    settings.V10R_PLATFORM = platform
    if beat:
        heartbeat.beat(worker="web-1:77", interval=timedelta(seconds=15), report={})
    body = client.get(PAGE).content.decode()
    assert f'data-loop-state="{state}"' in body
    # The platform and the state, never the name of the host that runs the loop.
    assert "web-1" not in body


def test_htmx_gets_only_the_live_queue_fragment(client, user_with_deliveries):
    response = client.get(PAGE + "queue/", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="queue-live"')
    assert "<html" not in body
    assert '<dd data-depth="pending">2</dd>' in body


@pytest.fixture
def user_with_deliveries(django_user_model):
    from tests.helpers import make_deliveries

    user = django_user_model.objects.create_user("someone", email="s@example.com")
    return make_deliveries(user, 2, channel="email")


def test_try_it_queues_a_demo_notification_and_shows_it_in_the_feed(client):
    response = client.post(PAGE + "try/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-feed-status="pending"' in body
    assert "demo #1" in body
    [delivery] = NotificationDelivery.objects.filter(channel="demo")
    assert delivery.notification.message_params == {"label": "demo #1", "fail": False}

    report = worker.drain_once()
    assert report.sent == 1
    body = client.get(PAGE + "queue/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-feed-status="sent"' in body


def test_every_try_of_a_session_gets_a_number_of_its_own(client):
    # More tries than the feed keeps (FEED_SIZE): the labels still count on.
    for _ in range(10):
        assert client.post(PAGE + "try/", HTTP_HX_REQUEST="true").status_code == 200
    labels = [
        d.notification.message_params["label"]
        for d in NotificationDelivery.objects.filter(channel="demo").order_by("id")
    ]
    assert labels == [f"demo #{n}" for n in range(1, 11)]
    body = client.get(PAGE + "queue/", HTTP_HX_REQUEST="true").content.decode()
    assert "demo #10" in body and "demo #9" in body


def test_a_failing_demo_delivery_shows_as_retrying(client):
    client.post(PAGE + "try/", {"fail": "1"}, HTTP_HX_REQUEST="true")
    assert worker.drain_once().retrying == 1
    body = client.get(PAGE + "queue/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-feed-status="retrying"' in body
    assert NotificationDelivery.objects.get().error_code == "DEMO_FAILURE"


def test_try_it_without_javascript_redirects_back_to_the_queue(client):
    response = client.post(PAGE + "try/")
    assert response.status_code == 302
    assert response["Location"] == PAGE + "#queue-worker"
    assert NotificationDelivery.objects.filter(channel="demo").count() == 1


def test_try_it_needs_the_csrf_token_and_a_post_without_one_costs_only_its_sender_a_try(
    client,
):
    from django.test import Client

    # The count comes before the CSRF check (which would read the body), so a post without a
    # token is counted too: it costs the server what a try does.
    hostile = Client(enforce_csrf_checks=True, REMOTE_ADDR="203.0.113.9")
    assert [hostile.post(PAGE + "try/").status_code for _ in range(11)] == [403] * 10 + [429]
    # Nothing but a try is counted against a visitor: not another client's posts, the page,
    # the polls, a GET of the form's address or a post refused for its size.
    assert client.get(PAGE).status_code == 200
    assert client.get(PAGE + "queue/").status_code == 200
    assert client.get(PAGE + "try/").status_code == 405
    oversized = client.generic(
        "POST",
        PAGE + "try/",
        b"",
        content_type="application/x-www-form-urlencoded",
        CONTENT_LENGTH=str(10**9),
    )
    assert oversized.status_code == 413
    codes = [client.post(PAGE + "try/", HTTP_HX_REQUEST="true").status_code for _ in range(11)]
    assert codes == [200] * 10 + [429]
    assert NotificationDelivery.objects.filter(channel="demo").count() == 10


def test_clients_in_one_ipv6_64_share_one_limit(client):
    codes = [
        client.post(
            PAGE + "try/", HTTP_HX_REQUEST="true", REMOTE_ADDR=f"2001:db8:7:7::{i:x}"
        ).status_code
        for i in range(11)
    ]
    assert codes == [200] * 10 + [429]
    other = client.post(PAGE + "try/", HTTP_HX_REQUEST="true", REMOTE_ADDR="2001:db8:7:8::1")
    assert other.status_code == 200


def test_behind_a_trusted_proxy_each_visitor_has_a_limit_of_their_own(client, settings):
    settings.V10R_TRUSTED_PROXIES = 1

    def try_from(visitor: str) -> int:
        return post_from(client, PAGE + "try/", visitor=visitor)

    assert [try_from("203.0.113.1") for _ in range(11)] == [200] * 10 + [429]
    assert try_from("203.0.113.2") == 200


def test_a_full_demo_queue_says_so_and_queues_nothing(client, monkeypatch):
    from showcases import queue_demo

    monkeypatch.setattr(queue_demo, "PENDING_LIMIT", 3)
    codes = [client.post(PAGE + "try/", HTTP_HX_REQUEST="true").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    full = client.post(PAGE + "try/", HTTP_HX_REQUEST="true")
    assert full["Retry-After"] == "60"
    assert "The demo queue is full; try again in a minute." in full.content.decode()
    assert NotificationDelivery.objects.filter(channel="demo").count() == 3
    # Finished rows make room again.
    worker.drain_once(batch_size=10, concurrency=4)
    assert client.post(PAGE + "try/", HTTP_HX_REQUEST="true").status_code == 200


def test_a_refused_try_without_javascript_gets_the_whole_page_with_the_reason(client):
    for _ in range(10):
        client.post(PAGE + "try/")
    response = client.post(PAGE + "try/")
    body = response.content.decode()
    assert response.status_code == 429
    assert body.lstrip().startswith("<!doctype html>")
    # Beside the button, outside the polled live queue, with the wait for the page to count.
    assert re.search(
        r'<p id="try-error" class="demo-error" role="alert" data-try-error data-retry-after="\d+"'
        r' data-countdown="Too many tries; wait \{seconds\} s.">Too many tries; wait \d+ s\.</p>',
        body,
    ), body


def test_demo_rows_waiting_out_a_long_backoff_do_not_fill_the_demo_queue(client, monkeypatch):
    from django.db import connection

    from showcases import queue_demo

    monkeypatch.setattr(queue_demo, "PENDING_LIMIT", 2)
    for _ in range(2):
        client.post(PAGE + "try/", {"fail": "1"}, HTTP_HX_REQUEST="true")
    assert client.post(PAGE + "try/", HTTP_HX_REQUEST="true").status_code == 429
    # Both failed a few times and now wait 8 minutes for their next send.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE notifications.notification_deliveries SET attempts = 3, "
            "next_attempt_at = now() + interval '8 minutes' WHERE channel = 'demo'"
        )
    assert queue_demo.waiting() == 0
    assert client.post(PAGE + "try/", HTTP_HX_REQUEST="true").status_code == 200


def test_the_public_counts_stop_at_their_limit(client, monkeypatch, user_with_deliveries):
    from showcases import views

    monkeypatch.setattr(views, "PUBLIC_COUNT_LIMIT", 2)
    body = client.get(PAGE + "queue/", HTTP_HX_REQUEST="true").content.decode()
    assert '<dd data-depth="pending">2+</dd>' in body
    assert '<dd data-depth="failed">0</dd>' in body


def test_the_sample_photo_is_a_jpeg_made_on_the_server(client):
    response = client.get(PAGE + "sample.jpg")
    assert response["Content-Type"] == "image/jpeg"
    image = Image.open(io.BytesIO(response.content))
    assert (image.format, image.size) == ("JPEG", (2400, 1600))
    assert len(palette.dominant_colors(np.asarray(image.convert("RGBA")))) == 6


# --- The server lane --------------------------------------------------------------------------


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def post_image(client, data: bytes, name: str = "photo.png"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return client.post(PAGE + "analyse/", {"image": SimpleUploadedFile(name, data)})


def test_the_server_lane_returns_palette_py_on_the_decoded_pixels(client):
    rng = np.random.default_rng(3)
    image = Image.fromarray(rng.integers(0, 256, size=(50, 70, 3), dtype=np.uint8))
    response = post_image(client, encoded(image, "PNG"))
    assert response.status_code == 200
    result = response.json()
    assert (result["width"], result["height"]) == (70, 50)
    expected = palette.dominant_colors(np.asarray(image.convert("RGBA")))
    assert result["swatches"] == expected


def test_the_server_lane_reports_as_many_palette_passes_as_it_runs(client, monkeypatch):
    passes = []
    real = palette.dominant_colors

    def counted(*args, **kwargs):
        passes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(palette, "dominant_colors", counted)
    result = post_image(client, encoded(Image.new("RGB", (40, 30), (9, 80, 200)), "PNG")).json()
    assert result["passes"] == len(passes) == 1


def test_the_browser_lanes_run_as_many_palette_passes_as_the_server_lane(client):
    """The page shows the three lanes' times under one word, "Analysis": so one piece of work."""
    module = Path(__file__).parents[2] / "showcases/static/showcases/image-analysis.js"
    script = f"const {{ PASSES }} = await import({module.as_uri()!r}); console.log(PASSES);"
    node = require("node", install="Node.js 20 or later")
    browser = subprocess.run(
        [node, "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    server = post_image(client, encoded(Image.new("RGB", (40, 30), (9, 80, 200)), "PNG")).json()
    assert int(browser.stdout) == server["passes"]
    body = client.get(PAGE).content.decode()
    assert "one palette pass over the pixels analysed" in body


def test_a_large_jpeg_is_shrunk_to_720_on_its_longest_edge(client):
    image = Image.new("RGB", (4000, 3000), (30, 140, 200))
    result = post_image(client, encoded(image, "JPEG"), "big.jpg").json()
    assert (result["sourceWidth"], result["width"], result["height"]) == (4000, 720, 540)
    assert result["swatches"][0]["share"] == 1.0


def _truncated_png() -> bytes:
    rng = np.random.default_rng(9)
    whole = encoded(Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)), "PNG")
    return whole[: len(whole) // 2]


@pytest.mark.parametrize(
    ("data", "status", "message"),
    [
        (b"", 400, "The file you sent is empty (0 bytes): there is no image in it."),
        (b"plain text, not a picture", 415, "Only PNG, JPEG and WebP"),
        (encoded(Image.new("RGB", (4, 4)), "GIF"), 415, "Only PNG, JPEG and WebP"),
        # 8000 × 8000 = 64 MP: a few KB of PNG that would decode to 256 MB.
        (
            encoded(Image.new("1", (8000, 8000)), "PNG"),
            413,
            "more than 50 million pixels. Scale it down to 50 megapixels or fewer",
        ),
        # A PNG's signature, then nothing Pillow can read: damaged, not another format.
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, 400, "could not be decoded"),
        (_truncated_png(), 400, "could not be decoded"),
    ],
    ids=["empty", "text", "gif", "bomb", "broken png", "truncated png"],
)
def test_bad_uploads_get_a_clear_error(client, data, status, message):
    response = post_image(client, data)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_an_oversized_upload_is_refused_before_it_is_read(client):
    response = post_image(client, b"\xff" * (21 * 1024 * 1024), "huge.jpg")
    assert response.status_code == 413
    assert "larger than 20 MB" in response.json()["error"]


def test_a_request_without_a_file_and_a_get_are_refused(client):
    assert client.post(PAGE + "analyse/").status_code == 400
    assert client.get(PAGE + "analyse/").status_code == 405


def test_the_server_lane_is_rate_limited_per_client(client):
    data = encoded(Image.new("RGB", (2, 2)), "PNG")
    codes = [post_image(client, data).status_code for _ in range(21)]
    assert codes == [200] * 20 + [429]
    assert "Too many analyses" in post_image(client, data).json()["error"]


def test_errors_are_translated(client):
    response = client.post("/ru" + PAGE + "analyse/")
    assert response.json()["error"] == "Сначала выберите изображение."


def test_concurrent_first_requests_for_the_sample_paint_it_once(monkeypatch):
    import functools
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from showcases import sample

    paintings = []

    @functools.cache
    def slow_paint() -> bytes:
        paintings.append(threading.get_ident())
        time.sleep(0.2)  # long enough for every thread to arrive while it runs
        return b"jpeg"

    monkeypatch.setattr(sample, "_paint", slow_paint)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: sample.sample_jpeg(), range(4)))
    assert results == [b"jpeg"] * 4
    assert len(paintings) == 1


def test_the_picker_offers_only_the_formats_every_lane_reads(client):
    # GIF and the rest decode in browsers but the server lane refuses them (415).
    body = client.get(PAGE).content.decode()
    assert 'type="file" accept="image/jpeg,image/png,image/webp"' in body


@pytest.mark.parametrize(
    ("prefix", "says"),
    [("", "for the drain loop to claim and deliver"), ("/ru", "чтобы цикл обработки захватил")],
)
def test_a_pending_try_does_not_claim_to_be_delivered(client, prefix, says):
    body = client.post(prefix + PAGE + "try/", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-feed-status="pending"' in body
    assert says in body
    assert "delivered by" not in body and "доставлено циклом" not in body


@pytest.mark.parametrize(
    ("prefix", "says"),
    [
        ("", "it keeps the site’s scripts, styles and icons and an offline page per language"),
        ("/ru", "хранит скрипты, стили и значки сайта и офлайн-страницу на каждом языке"),
        ("/de", "bewahrt die Skripte, Stile und Symbole der Website und eine Offline-Seite"),
    ],
)
def test_the_service_worker_row_says_what_the_registered_worker_does(client, prefix, says):
    body = client.get(prefix + PAGE).content.decode()
    assert says in body
    assert 'data-service-worker="/service-worker.js"' in body


@pytest.mark.parametrize(
    ("prefix", "says", "not_any_more"),
    [
        ("", "always on a 720 px copy whatever the work size", "Both lanes of the demo"),
        ("/ru", "всегда на копии размером 720 пкс", "Обе дорожки демо"),
        ("/de", "immer auf einer 720-px-Kopie", "Beide Bahnen der Demo"),
    ],
)
def test_the_page_says_the_server_lane_works_at_720_px_in_its_own_way(
    client, prefix, says, not_any_more
):
    body = " ".join(client.get(prefix + PAGE).content.decode().split())
    assert says in body
    assert not_any_more not in body


@pytest.mark.parametrize(
    ("prefix", "wakes", "status", "tick"),
    [
        (
            "",
            "says how soon it was picked up, until a retry claims it again",
            "it ticks when a new row wakes it, and at least every 2 s.",
            "Loop tick, without a wake-up",
        ),
        (
            "/ru",
            "как быстро её взяли в работу, пока повтор не захватит её снова",
            "такт — когда его будит новая строка, и не реже чем каждые 2 с.",
            "Такт цикла обработки без пробуждения",
        ),
        (
            "/de",
            "wie schnell sie abgeholt wurde, bis ein Neuversuch sie erneut übernimmt",
            "ein Takt, sobald eine neue Zeile sie weckt, und spätestens alle 2 s.",
            "Takt der Versandschleife ohne Wecksignal",
        ),
    ],
)
def test_the_page_says_a_commit_wakes_the_loop_and_the_tick_is_the_fallback(
    client, settings, prefix, wakes, status, tick
):
    settings.V10R_PLATFORM = "container"
    heartbeat.beat(worker="web-1:77", interval=timedelta(seconds=2), report={})
    # Words joined by single spaces (split() takes the no-break spaces too).
    body = " ".join(client.get(prefix + PAGE).content.decode().split())
    assert wakes in body
    assert status in body
    assert f"<dt>{tick}</dt>" in body


def script_sentences(body: str, element_id: str) -> dict:
    """The sentences a json_script element hands to the page's scripts."""
    found = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', body)
    assert found, element_id
    return json.loads(found.group(1))


@pytest.mark.parametrize(
    ("prefix", "failed", "frames", "offline"),
    [
        (
            "",
            "The worker failed.",
            {"one": "{count} frame drawn", "other": "{count} frames drawn"},
            "This browser is offline; “Try it” needs the network.",
        ),
        (
            "/ru",
            "Воркер не справился.",
            {
                "one": "Отрисован {count} кадр",
                "few": "Отрисовано {count} кадра",
                "many": "Отрисовано {count} кадров",
                "other": "Отрисовано {count} кадра",
            },
            "Браузер не в сети, а для «Попробовать» нужна сеть.",
        ),
        (
            "/de",
            "Der Worker ist gescheitert.",
            {"one": "{count} Frame gezeichnet", "other": "{count} Frames gezeichnet"},
            "Dieser Browser ist offline; „Ausprobieren“ braucht das Netz.",
        ),
    ],
)
def test_the_scripts_sentences_reach_the_page_in_its_language(
    client, prefix, failed, frames, offline
):
    body = client.get(prefix + PAGE).content.decode()
    demo = script_sentences(body, "palette-demo-messages")
    assert demo["workerFailed"] == failed
    assert demo["framesDrawn"] == frames
    assert script_sentences(body, "queue-live-messages")["tryOffline"] == offline
