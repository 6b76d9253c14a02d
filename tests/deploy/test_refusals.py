"""What a client is told when it is turned away behind nginx: a 429 with Retry-After, whoever
turns it away (nginx's limits or the app's), never a 503, which would say the site is down;
and the inbox's state, which every open page polls, capped for all clients together so that
polls cannot take every thread pages need."""

from __future__ import annotations

import io
import json
import threading
import uuid

import numpy as np
import pytest
from PIL import Image

from tests.deploy import clients
from tests.helpers import poll

pytestmark = pytest.mark.django_db(transaction=True)

ANALYSE = "/showcases/workers/analyse/"
STATE = "/account/inbox/state/"
# Any 32 letters make a CSRF secret; sent as cookie and header, they pass Django's check.
CSRF_SECRET = "b" * 32


def marker() -> str:
    return uuid.uuid4().hex[:12]


def upload(port: int, data: bytes, *, timeout: float = 30) -> clients.Response:
    """POST data to the server lane as a browser's form would, CSRF token and all."""
    boundary = uuid.uuid4().hex
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; '
            f'filename="photo.png"\r\nContent-Type: image/png\r\n\r\n'
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Cookie": f"csrftoken={CSRF_SECRET}",
        "X-CSRFToken": CSRF_SECRET,
    }
    return clients.request(port, "POST", ANALYSE, body=body, headers=headers, timeout=timeout)


def dear_png() -> bytes:
    """An RGB photo of 8 megapixels as PNG: priced at 128 ms, about as long to decode."""
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:2000, 0:4000].astype(np.float32)
    rgb = np.stack([x / 16 % 256, y / 8 % 256, (x + y) / 24 % 256], axis=-1)
    rgb += rng.normal(0, 4, size=rgb.shape)
    buffer = io.BytesIO()
    Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8)).save(buffer, "PNG", compress_level=1)
    return buffer.getvalue()


def test_uploads_during_an_attack_are_refused_with_429_and_retry_after_never_503(gunicorn, nginx):
    # nginx's limits out of the way: every refusal here is the app's (a busy process, a
    # spent budget). Eight at once on two processes, each decoding one and letting one wait.
    proxy = nginx(CONNECTIONS_PER_CLIENT="500", REQUEST_RATE="1000r/s", REQUEST_BURST="1000")
    data = dear_png()
    answers: list[clients.Response] = []

    def volley() -> bool:
        start = threading.Barrier(8)
        got: list[clients.Response] = []

        def one() -> None:
            start.wait()
            got.append(upload(proxy.port, data))

        threads = [threading.Thread(target=one) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        answers.extend(got)
        return any(response.status == 429 for response in got)

    assert poll(volley, seconds=60, every=0), sorted({a.status for a in answers})
    assert {a.status for a in answers} <= {200, 429}, [(a.status, a.body[:200]) for a in answers]
    for refusal in (a for a in answers if a.status == 429):
        assert int(refusal.headers["retry-after"]) >= 1
        assert json.loads(refusal.body)["error"]


def test_nginx_refuses_uploads_over_the_rate_with_429_json_and_retry_after(gunicorn, nginx):
    proxy = nginx(REQUEST_RATE="1r/m", REQUEST_BURST="1")
    # One a minute and a burst of one more; the start-up check spent none of them (it asks
    # for /, which counts in the same zone, so perhaps one).
    answers = [upload(proxy.port, b"not an image") for _ in range(3)]
    statuses = [answer.status for answer in answers]
    assert statuses[-1] == 429 and 503 not in statuses, statuses
    refusal = answers[-1]
    assert refusal.headers["retry-after"] == "1"
    assert refusal.headers["content-type"] == "application/json"
    assert json.loads(refusal.body) == {
        "error": "Too many requests; try again in 1 s.",
        "code": "too_many",
    }


def test_nginx_refuses_pages_over_the_rate_with_429_and_retry_after(gunicorn, nginx):
    proxy = nginx(REQUEST_RATE="1r/m", REQUEST_BURST="1")
    answers = [clients.get(proxy.port, "/", timeout=10) for _ in range(3)]
    assert answers[-1].status == 429
    assert answers[-1].headers["retry-after"] == "1"


def test_inbox_state_polls_are_capped_for_all_clients_together_and_pages_are_not(gunicorn, nginx):
    proxy = nginx(
        INBOX_STATE_CONNECTIONS="1",
        CONNECTIONS_PER_CLIENT="500",
        REQUEST_RATE="1000r/s",
        REQUEST_BURST="1000",
    )
    # A poll held inside the location (its headers are in, its body never comes) fills the
    # site's one slot; a poll from another address is then refused, and a page is not.
    held = [clients.slow_body(proxy.port, marker(), path=STATE)]
    seen: list[int] = []

    def refused() -> bool:
        if clients.answered(held[0]):  # the start-up check's request still held the slot
            held[0].close()
            held[0] = clients.slow_body(proxy.port, marker(), path=STATE)
        answer = clients.get(proxy.port, STATE, timeout=10, source="127.0.0.2")
        seen.append(answer.status)
        return answer.status == 429 and answer.headers.get("retry-after") == "1"

    try:
        assert poll(refused, seconds=15, every=0.1), f"statuses seen: {sorted(set(seen))}"
        assert clients.get(proxy.port, "/", timeout=10, source="127.0.0.2").status == 200
    finally:
        clients.close_all(held)
    # Signed out, the state answers 403: the slot is free again.
    assert poll(
        lambda: clients.get(proxy.port, STATE, timeout=10, source="127.0.0.2").status == 403,
        seconds=5,
    )


def test_inbox_state_polls_of_one_session_are_limited_by_nginx_from_any_address(gunicorn, nginx):
    proxy = nginx(INBOX_STATE_SESSION_RATE="1r/m", CONNECTIONS_PER_CLIENT="500")

    def poll_from(n: int, session: str) -> clients.Response:
        # The session needs no account: nginx counts the cookie, the app then answers 403.
        headers = {"Cookie": f"sessionid={session}"}
        return clients.get(proxy.port, STATE, timeout=10, headers=headers, source=f"127.0.4.{n}")

    # One a minute and a burst of 20: the 22nd is refused, whichever address it comes from.
    answers = [poll_from(n, "copied") for n in range(1, 23)]
    assert [answer.status for answer in answers] == [403] * 21 + [429]
    assert answers[-1].headers["retry-after"] == "1"
    assert poll_from(23, "another").status == 403
