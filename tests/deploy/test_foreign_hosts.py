"""A Host that is none of the site's names: closed by nginx unanswered, and, should one reach
the app some other way, logged in one line rather than a traceback."""

from __future__ import annotations

import socket
import uuid

import pytest

from tests.deploy import clients
from tests.helpers import poll

pytestmark = pytest.mark.django_db(transaction=True)


def marker() -> str:
    return uuid.uuid4().hex[:12]


def answer_to(port: int, path: str, *, host: str) -> bytes:
    """Send one GET with the given Host; return whatever comes back before the connection
    closes (nothing, if it is closed unanswered)."""
    received = b""
    with socket.create_connection((clients.HOST, port), timeout=10) as client:
        client.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        try:
            while chunk := client.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received


def lines_naming(text: str, tag: str) -> list[str]:
    return [line for line in text.splitlines() if tag in line]


@pytest.mark.parametrize(
    "host",
    ["{tag}.example", "{tag}.example:80", "127.0.0.1.{tag}.example", "localhost.{tag}"],
)
def test_nginx_closes_a_request_for_a_foreign_host_unanswered_and_the_app_never_hears_of_it(
    gunicorn, nginx, host
):
    proxy = nginx()
    tag = marker()
    assert answer_to(proxy.port, f"/?probe={tag}", host=host.format(tag=tag)) == b""
    # An ordinary request after it reaches the app, so its logs are being written ...
    assert clients.get(proxy.port, f"/?probe={tag}-after", timeout=10).status == 200
    assert poll(lambda: lines_naming("\n".join(gunicorn.access_lines()), f"{tag}-after"))
    # ... and the foreign one left no line in either.
    assert lines_naming("\n".join(gunicorn.access_lines()), f"probe={tag} ") == []
    assert lines_naming(gunicorn.log_text(), tag) == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST", "localhost."])
def test_the_sites_own_names_still_reach_the_app(gunicorn, nginx, host):
    proxy = nginx()
    answer = answer_to(proxy.port, "/", host=f"{host}:{proxy.port}")
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_the_probes_are_answered_whatever_the_host(gunicorn, nginx, path):
    # A load balancer or a kubelet names the instance by its address.
    proxy = nginx()
    answer = answer_to(proxy.port, path, host="10.1.2.3")
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert b'"status": "ok"' in answer


def test_a_foreign_host_that_reaches_the_app_is_logged_in_one_line_without_a_traceback(gunicorn):
    tag = marker()
    answer = answer_to(gunicorn.port, "/", host=f"{tag}.example")
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert poll(lambda: lines_naming(gunicorn.log_text(), tag))
    [line] = lines_naming(gunicorn.log_text(), tag)
    assert "ERROR django.security.DisallowedHost: Invalid HTTP_HOST header" in line, line
    assert "Traceback" not in gunicorn.log_text()
