"""HTTP clients for the production tests: ordinary ones, and slow ones that hold connections.

Raw sockets for the slow ones: an HTTP library would send a request whole or not at all.
"""

from __future__ import annotations

import http.client
import select
import socket
import time
from dataclasses import dataclass

HOST = "127.0.0.1"
# A slow body declares a form post below every body limit (Django's 2.5 MB, nginx's), so the
# server waits for all of it; the CSRF cookie makes Django read it (the CSRF check reads the
# POST data once a cookie is there to compare with).
SLOW_BODY_LENGTH = 2_000_000
CSRF_COOKIE = "csrftoken=" + "a" * 32


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float


def get(
    port: int,
    path: str,
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    source: str | None = None,
) -> Response:
    return request(port, "GET", path, timeout=timeout, headers=headers, source=source)


def request(
    port: int,
    method: str,
    path: str,
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    source: str | None = None,
) -> Response:
    """One request on a fresh connection, timed from connect to the last byte of the body.

    source: the loopback address to connect from (any of 127.0.0.0/8), so that nginx, which
    counts clients by their address, sees another client."""
    started = time.perf_counter()
    source_address = (source, 0) if source else None
    connection = http.client.HTTPConnection(
        HOST, port, timeout=timeout, source_address=source_address
    )
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        content = response.read()
        return Response(
            status=response.status,
            headers={name.lower(): value for name, value in response.getheaders()},
            body=content,
            seconds=time.perf_counter() - started,
        )
    finally:
        connection.close()


def slow_header(port: int, marker: str) -> socket.socket:
    """A connection that sends half a request (line and one unfinished header), then nothing."""
    client = socket.create_connection((HOST, port), timeout=5)
    client.sendall(f"GET /?slow={marker} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: sl".encode())
    return client


def slow_body(port: int, marker: str, *, path: str = "/") -> socket.socket:
    """A connection that sends complete headers of a 2 MB form post, then 1 KB of the body."""
    client = socket.create_connection((HOST, port), timeout=5)
    client.sendall(
        (
            f"POST {path}?slow={marker} HTTP/1.1\r\nHost: {HOST}\r\nCookie: {CSRF_COOKIE}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {SLOW_BODY_LENGTH}\r\n\r\n"
        ).encode()
        + b"x" * 1024
    )
    return client


def answered(connection: socket.socket) -> bool:
    """Whether the server has answered (or closed) a connection we have not finished."""
    timeout = connection.gettimeout()
    connection.settimeout(0)
    try:
        connection.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False  # nothing yet: still waiting for the rest of our request
    except OSError:
        return True  # reset
    else:
        return True  # an answer, or the end of the stream
    finally:
        connection.settimeout(timeout)


def headers_only(port: int, method: str, path: str, *, length: int) -> tuple[str, bytes]:
    """Send headers declaring a body of length bytes, and none of it; return the answer's
    status line and the whole answer.

    Read by its Content-Length, not to the end: after refusing a body nginx keeps the
    connection open a while (lingering_timeout) to swallow what the client may still send."""
    with socket.create_connection((HOST, port), timeout=5) as client:
        client.sendall(
            (
                f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {length}\r\n\r\n"
            ).encode()
        )
        received = b""
        for _ in range(100):  # a refusal is a page, not a stream
            head, separator, rest = received.partition(b"\r\n\r\n")
            if separator:
                declared = [
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if declared and len(rest) >= declared[0]:
                    break
            chunk = client.recv(65536)
            if not chunk:
                break
            received += chunk
    return received.split(b"\r\n", 1)[0].decode(), received


def is_open(client: socket.socket) -> bool:
    """True while the server has neither closed the connection nor answered on it."""
    readable, _, _ = select.select([client], [], [], 0)
    return not readable


def seconds_until_closed(client: socket.socket, *, started: float, limit: float) -> float | None:
    """Wait up to limit seconds for the server to close the connection (after any answer);
    return how long after started (a time.monotonic()) it did, or None if it did not."""
    deadline = started + limit
    while (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([client], [], [], remaining)
        if not readable:
            return None
        try:
            if not client.recv(65536):
                return time.monotonic() - started
        except ConnectionResetError:  # nginx resets timed-out connections
            return time.monotonic() - started
    return None


def close_all(sockets: list[socket.socket]) -> None:
    for client in sockets:
        client.close()


def _tcp_table() -> list[tuple[int, int, str, int]]:
    """(local port, remote port, state, receive queue) of every IPv4 TCP socket here."""
    rows = []
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            receive_queue = int(fields[4].split(":")[1], 16)
            rows.append(
                (int(local.split(":")[1], 16), int(remote.split(":")[1], 16), state, receive_queue)
            )
    return rows


ESTABLISHED = "01"
LISTEN = "0A"


def connections_to(port: int) -> int:
    """How many established connections some client here holds to port."""
    return sum(1 for _, remote, state, _ in _tcp_table() if remote == port and state == ESTABLISHED)


def accept_queue(port: int) -> int:
    """Connections that reached port's listening socket and no process has accepted yet."""
    return sum(
        queue for local, _, state, queue in _tcp_table() if local == port and state == LISTEN
    )
