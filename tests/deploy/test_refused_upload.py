"""A photo refused by the server lane's rate limit, in production's shape: the refusal comes
before the body is read, and still reaches the client whole, on a connection that goes on.

gunicorn's gthread worker drains at most 64 KB of a body the app left unread before it reuses
the connection; past that it closes it, and a close with unread bytes in the socket is a
reset, which the client (or nginx, still sending the body) sees instead of the answer.
"""

from __future__ import annotations

import http.client

import pytest

from core import ratelimit
from showcases import views
from tests.deploy import clients

pytestmark = pytest.mark.django_db(transaction=True)

ANALYSE = "/showcases/workers/analyse/"
# Under the lane's 20 MB and the 64 KB of multipart envelope nginx and the app allow.
PHOTO_BYTES = 19 * 2**20
BOUNDARY = "refused-upload-boundary"


def upload() -> bytes:
    return (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        + b"\0" * PHOTO_BYTES
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


def spend_the_analyses_of(address: str) -> None:
    for _ in range(views.ANALYSE_LIMIT):
        ratelimit.hit(
            key=f"analyse:{address}", limit=views.ANALYSE_LIMIT, window=views.LIMIT_WINDOW
        )


def refused_then_reused(port: int, *, address: str) -> tuple[int, str, bytes, int]:
    """Post the photo from address over the limit, then GET the page on the same connection;
    return the refusal's status, Retry-After and body, and the page's status."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=30, source_address=(address, 0)
    )
    try:
        connection.request(
            "POST",
            ANALYSE,
            body=upload(),
            headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        )
        refusal = connection.getresponse()
        body = refusal.read()
        connection.request("GET", "/showcases/workers/")
        page = connection.getresponse()
        page.read()
        return refusal.status, refusal.getheader("Retry-After"), body, page.status
    finally:
        connection.close()


def test_a_refused_photo_sent_straight_to_gunicorn_gets_its_429_and_the_connection_goes_on(
    gunicorn,
):
    spend_the_analyses_of("127.0.0.1")
    status, retry_after, body, next_status = refused_then_reused(gunicorn.port, address="127.0.0.1")
    assert (status, next_status) == (429, 200), body[:300]
    assert int(retry_after) >= 1
    assert b"Too many analyses" in body


def upstream_connections(gunicorn_port: int) -> set[int]:
    """The local ports of the established connections to gunicorn (nginx's, in this test)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                local, remote, state = line.split()[1:4]
                if state == "01" and int(remote.rsplit(":", 1)[1], 16) == gunicorn_port:
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def test_a_refused_photo_sent_through_nginx_gets_its_429_on_a_connection_nginx_keeps(
    gunicorn, nginx
):
    # One nginx process, so one pool of idle connections to gunicorn.
    proxy = nginx(
        WORKER_PROCESSES="1",
        CONNECTIONS_PER_CLIENT="100",
        REQUEST_RATE="100r/s",
        REQUEST_BURST="100",
    )
    spend_the_analyses_of("127.0.0.7")
    assert clients.get(proxy.port, "/", timeout=10).status == 200
    kept = upstream_connections(gunicorn.port)
    assert len(kept) == 1, kept
    status, retry_after, body, next_status = refused_then_reused(proxy.port, address="127.0.0.7")
    assert (status, next_status) == (429, 200), body[:300]
    assert int(retry_after) >= 1
    assert b"Too many analyses" in body
    # gunicorn read the body and kept the connection: nginx sent the next request down the
    # same one (a reset would have made it open another).
    assert upstream_connections(gunicorn.port) == kept
    assert "upstream" not in proxy.log_text(), proxy.log_text()
