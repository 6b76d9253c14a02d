"""The server lane's rate limit answers before anything reads the body (core/middleware.py):
a refused photo's bytes are never read by the app, under gunicorn as in production (behind
nginx, and straight) and under Django's development server; the CSRF check still stands for
every upload the limit lets through.

The servers are sent the request's headers and the first megabyte of its body only: an app
that read the body (the CSRF check parsing the form, or a drain) would wait for the rest and
never answer.
"""

from __future__ import annotations

import functools
import io
import json
import socket

import pytest
from django.test import Client

from core import ratelimit
from showcases import views
from tests.deploy.conftest import gunicorn, nginx, production_env  # noqa: F401 - fixtures
from tests.showcases.test_page import encoded

ANALYSE = "/showcases/workers/analyse/"
PHOTO_BYTES = 19 * 2**20  # under the lane's 20 MB
BOUNDARY = "refused-upload-boundary"
CSRF_TOKEN = "c" * 32
HEAD_START = 2**20  # of the body, sent before the answer is awaited
SECONDS = 10


def multipart(data: bytes) -> bytes:
    return (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


@functools.cache
def photo() -> bytes:
    return multipart(b"\0" * PHOTO_BYTES)


def spend_the_analyses_of(address: str) -> None:
    for _ in range(views.ANALYSE_LIMIT):
        ratelimit.hit(
            key=f"analyse:{address}", limit=views.ANALYSE_LIMIT, window=views.LIMIT_WINDOW
        )


def post_head(port: int, *, body: bytes, address: str = "127.0.0.1") -> socket.socket:
    """Open a connection from address and send the photo's headers and first megabyte."""
    connection = socket.create_connection(
        ("127.0.0.1", port), timeout=SECONDS, source_address=(address, 0)
    )
    head = (
        f"POST {ANALYSE} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    connection.sendall(head + body[:HEAD_START])
    return connection


def read_answer(connection: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one answer with a Content-Length from connection: status, headers, body."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = connection.recv(65536)
        assert chunk, f"closed before an answer: {buffer!r}"
        buffer += chunk
    head, _, body = buffer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, _, value in (line.partition(": ") for line in lines)}
    while len(body) < int(headers["content-length"]):
        chunk = connection.recv(65536)
        assert chunk, "closed inside the answer"
        body += chunk
    return int(status_line.split()[1]), headers, body


def closes(connection: socket.socket) -> bool:
    """Whether the server closes connection (an end of file or a reset) within SECONDS,
    with nothing more sent."""
    try:
        return connection.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def assert_refused(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 429, body[:300]
    assert int(headers["retry-after"]) >= 1
    assert "Too many analyses" in json.loads(body)["error"]


class CountingStream(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0

    def read(self, size=-1):
        chunk = super().read(size)
        self.taken += len(chunk)
        return chunk

    def readline(self, size=-1):
        line = super().readline(size)
        self.taken += len(line)
        return line


@pytest.mark.django_db
def test_a_refused_upload_without_a_csrf_token_is_refused_for_its_count_and_never_read():
    spend_the_analyses_of("127.0.0.1")
    stream = CountingStream(photo())
    response = Client(enforce_csrf_checks=True).generic(
        "POST",
        ANALYSE,
        b"",
        content_type=f"multipart/form-data; boundary={BOUNDARY}",
        CONTENT_LENGTH=str(len(photo())),
        **{"wsgi.input": stream},
    )
    # The count answered, not the CSRF check (a 403), and it read not one byte of the body.
    assert_refused(response.status_code, response, response.content)
    assert stream.taken == 0


@pytest.mark.django_db
def test_an_upload_the_limit_lets_through_still_needs_the_csrf_token():
    from django.core.files.uploadedfile import SimpleUploadedFile
    from PIL import Image

    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = CSRF_TOKEN
    image = encoded(Image.new("RGB", (2, 2)), "PNG")

    def post(**headers):
        return browser.post(ANALYSE, {"image": SimpleUploadedFile("a.png", image)}, **headers)

    assert post().status_code == 403
    assert post(HTTP_X_CSRFTOKEN="d" * 32).status_code == 403
    assert post(HTTP_X_CSRFTOKEN=CSRF_TOKEN).status_code == 200


# gunicorn, as deploy/ runs it, on the test database: the spent count must be committed.
@pytest.mark.deploy
@pytest.mark.django_db(transaction=True)
def test_gunicorn_refuses_a_photo_before_its_body_arrives_and_then_closes_the_connection(
    gunicorn,  # noqa: F811 - the fixture imported above
):
    spend_the_analyses_of("127.0.0.1")
    with post_head(gunicorn.port, body=photo()) as connection:
        assert_refused(*read_answer(connection))
        # The 18 MB left unsent are not awaited, nor read: the connection ends.
        assert closes(connection)


@pytest.mark.deploy
@pytest.mark.django_db(transaction=True)
def test_a_refused_small_post_is_drained_by_gunicorn_and_its_connection_goes_on(
    gunicorn,  # noqa: F811
):
    spend_the_analyses_of("127.0.0.1")
    small = multipart(b"\0" * 10_000)  # under the 64 KB gunicorn drains itself
    with post_head(gunicorn.port, body=small) as connection:
        assert_refused(*read_answer(connection))
        connection.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{gunicorn.port}\r\n\r\n".encode())
        assert read_answer(connection)[0] == 200


@pytest.mark.deploy
@pytest.mark.django_db(transaction=True)
def test_through_nginx_every_refused_photo_gets_its_429_whole_and_the_visitor_carries_on(
    gunicorn,  # noqa: F811
    nginx,  # noqa: F811
):
    # One nginx process, so one pool of idle connections to gunicorn.
    proxy = nginx(
        WORKER_PROCESSES="1",
        CONNECTIONS_PER_CLIENT="100",
        REQUEST_RATE="100r/s",
        REQUEST_BURST="100",
    )
    spend_the_analyses_of("127.0.0.7")
    page = f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n\r\n".encode()
    with socket.create_connection(
        ("127.0.0.1", proxy.port), timeout=30, source_address=("127.0.0.7", 0)
    ) as visitor:
        visitor.sendall(page)
        assert read_answer(visitor)[0] == 200
        kept = upstream_connections(gunicorn.port)
        assert len(kept) == 1, kept
        for _ in range(5):
            request = (
                f"POST {ANALYSE} HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
                f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
                f"Content-Length: {len(photo())}\r\n\r\n"
            ).encode()
            visitor.sendall(request + photo())
            assert_refused(*read_answer(visitor))
            # The visitor's connection to nginx goes on to the next request.
            visitor.sendall(page)
            assert read_answer(visitor)[0] == 200
    # The refusal ended the connection nginx had kept (gunicorn did not carry the body to go
    # on with it), and nginx, which had the body whole, took the answer and opened another
    # for the next request, with no error on the way.
    assert not kept & upstream_connections(gunicorn.port)
    assert "[error]" not in proxy.log_text(), proxy.log_text()


def upstream_connections(gunicorn_port: int) -> set[int]:
    """The local ports of the established connections to gunicorn (nginx's, here)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                local, remote, state = line.split()[1:4]
                if state == "01" and int(remote.rsplit(":", 1)[1], 16) == gunicorn_port:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


# Django's development server (runserver's handler, in pytest-django's server thread).
@pytest.mark.django_db(transaction=True)
def test_the_development_server_refuses_a_photo_before_its_body_arrives(live_server):
    spend_the_analyses_of("127.0.0.1")
    port = int(live_server.url.rsplit(":", 1)[1])
    with post_head(port, body=photo()) as connection:
        assert_refused(*read_answer(connection))
        # This server reads what is left itself, so the connection carries the next request.
        connection.sendall(photo()[HEAD_START:])
        connection.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        assert read_answer(connection)[0] == 200
