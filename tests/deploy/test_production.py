"""The production pair under slow clients: gunicorn (deploy/gunicorn.conf.py) behind nginx
(deploy/nginx.conf), against bare `gunicorn v10r.wsgi` as the README used to run it.

Every client here comes from 127.0.0.1, so each nginx is rendered with per-client limits
high enough for the whole attack to reach it, except in the tests of those limits.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid

import pytest

from tests.deploy import clients
from tests.helpers import poll

# The servers run on the test database (pytest-django creates it only for tests that ask),
# and whatever they write is flushed after each test.
pytestmark = pytest.mark.django_db(transaction=True)

# The requirement: an ordinary page answers within a second while slow clients are held.
ORDINARY_SECONDS = 1.0
ORDINARY_PATHS = ["/", "/showcases/workers/"]
# Room for the whole attack, and timeouts that outlast the measurement many times over.
HOLDING = {
    "CONNECTIONS_PER_CLIENT": "500",
    "REQUEST_RATE": "1000r/s",
    "REQUEST_BURST": "1000",
    "HEADER_TIMEOUT": "30s",
    "BODY_TIMEOUT": "30s",
    # One process, so its upstream keepalive cache is the only idle connection to gunicorn.
    "WORKER_PROCESSES": "1",
}


def marker() -> str:
    return uuid.uuid4().hex[:12]


def open_slow_clients(port: int, *, headers: int, bodies: int) -> tuple[list, list]:
    tag = marker()
    slow_headers = [clients.slow_header(port, f"{tag}-header-{i}") for i in range(headers)]
    slow_bodies = [clients.slow_body(port, f"{tag}-body-{i}") for i in range(bodies)]
    return slow_headers, slow_bodies


def measure_ordinary_requests(port: int, *, rounds: int, trickle: list) -> dict[str, list[float]]:
    """GET each ordinary path rounds times; between rounds every slow body sends one byte."""
    seconds: dict[str, list[float]] = {path: [] for path in ORDINARY_PATHS}
    for _ in range(rounds):
        for client in trickle:
            client.sendall(b"x")
        for path in ORDINARY_PATHS:
            response = clients.get(port, path, timeout=10)
            assert response.status == 200, (path, response.status, response.body[:300])
            seconds[path].append(response.seconds)
    return seconds


def report(label: str, seconds: dict[str, list[float]]) -> None:
    for path, values in seconds.items():
        print(
            f"{label}: GET {path} median {statistics.median(values) * 1000:.1f} ms, "
            f"max {max(values) * 1000:.1f} ms over {len(values)}"
        )


@pytest.mark.parametrize(
    ("headers", "bodies"),
    [(2, 0), (0, 2), (2, 2), (25, 25)],
    ids=["2 slow headers", "2 slow bodies", "2 of each", "burst of 50"],
)
def test_ordinary_pages_answer_within_a_second_while_slow_clients_hold_connections(
    gunicorn, nginx, headers, bodies
):
    proxy = nginx(**HOLDING)
    slow_headers, slow_bodies = open_slow_clients(proxy.port, headers=headers, bodies=bodies)
    try:
        seconds = measure_ordinary_requests(proxy.port, rounds=5, trickle=slow_bodies)
        held = [client for client in slow_headers + slow_bodies if clients.is_open(client)]
        upstream = clients.connections_to(gunicorn.port)
    finally:
        clients.close_all(slow_headers + slow_bodies)
    report(f"through nginx, {headers} slow headers + {bodies} slow bodies held", seconds)
    worst = max(max(values) for values in seconds.values())
    assert worst < ORDINARY_SECONDS, seconds
    # The attack was still on while we measured ...
    assert len(held) == headers + bodies
    # ... and none of it reached gunicorn: the one connection there is nginx's kept-alive
    # one for the ordinary requests. Streaming a slow body upstream would have taken a
    # connection (and a thread) per client.
    assert upstream <= 1, upstream
    assert not [line for line in gunicorn.access_lines() if "slow=" in line]


@pytest.mark.parametrize("kind", ["slow headers", "slow bodies"])
def test_bare_gunicorn_sync_workers_are_stalled_by_two_slow_clients(bare_gunicorn, kind):
    """The contrast: the README's old production command, without nginx."""
    open_one = clients.slow_header if kind == "slow headers" else clients.slow_body
    tag = marker()
    slow = [open_one(bare_gunicorn.port, f"{tag}-{i}") for i in range(2)]
    try:
        # Both accepted, that is each of the two workers is blocked reading one of them.
        assert poll(lambda: clients.accept_queue(bare_gunicorn.port) == 0, seconds=10)
        with pytest.raises(TimeoutError):
            clients.get(bare_gunicorn.port, "/", timeout=ORDINARY_SECONDS * 2)
        print(f"bare gunicorn, 2 {kind} held: GET / no answer within {ORDINARY_SECONDS * 2:.0f} s")
    finally:
        clients.close_all(slow)
    # The server itself was fine: once the slow clients are gone it answers again.
    assert clients.get(bare_gunicorn.port, "/", timeout=30).status == 200


def test_nginx_cuts_slow_clients_after_its_timeouts(gunicorn, nginx):
    proxy = nginx(HEADER_TIMEOUT="2s", BODY_TIMEOUT="2s", CONNECTIONS_PER_CLIENT="500")
    started = time.monotonic()
    slow_headers, slow_bodies = open_slow_clients(proxy.port, headers=2, bodies=2)
    try:
        cut = [
            clients.seconds_until_closed(client, started=started, limit=10)
            for client in slow_headers + slow_bodies
        ]
    finally:
        clients.close_all(slow_headers + slow_bodies)
    print(f"nginx with 2 s timeouts cut 2 slow headers + 2 slow bodies after (s): {cut}")
    assert None not in cut, cut
    # By the timeouts, not by some refusal at once.
    # (nginx's clock is cached per turn of its event loop: allow it to run a little early.)
    assert min(cut) >= 1.5, cut


def logged(gunicorn, tag: str) -> list[str]:
    return [line for line in gunicorn.access_lines() if tag in line]


def refused_unseen(gunicorn, proxy, *, path: str, length: int) -> bytes:
    """POST headers declaring length bytes to path through proxy; check the answer is a 413
    that never reached gunicorn, and return it whole."""
    tag = marker()
    # Headers only: the refusal comes from Content-Length, without waiting for the body.
    status, received = clients.headers_only(
        proxy.port, "POST", f"{path}?probe={tag}", length=length
    )
    assert status == "HTTP/1.1 413 Request Entity Too Large", received[:300]
    # An ordinary request after it is logged, so the log is being written ...
    assert clients.get(proxy.port, f"/?probe={tag}-after", timeout=10).status == 200
    assert poll(lambda: logged(gunicorn, f"{tag}-after"), seconds=5)
    # ... and the refused one never reached gunicorn.
    assert logged(gunicorn, f"probe={tag} ") == []
    return received


@pytest.mark.parametrize(("path", "length"), [("/", 2560 * 1024 + 1), ("/admin/login/", 3_000_000)])
def test_nginx_refuses_an_oversized_body_with_413_before_the_app_sees_it(
    gunicorn, nginx, path, length
):
    received = refused_unseen(gunicorn, nginx(), path=path, length=length)
    assert b"<center>nginx</center>" in received  # nginx's own page, which says "Too Large"
    assert b"413 Request Entity Too Large" in received


@pytest.mark.parametrize(
    ("path", "length"),
    [
        ("/showcases/workers/analyse/", 20544 * 1024 + 1),
        ("/ru/showcases/workers/analyse/", 25_000_000),
        ("/de/showcases/workers/analyse/", 25_000_000),
    ],
)
def test_nginx_refuses_an_oversized_photo_with_the_server_lanes_json_before_the_app_sees_it(
    gunicorn, nginx, path, length
):
    from django.utils import translation

    from showcases import analysis

    received = refused_unseen(gunicorn, nginx(), path=path, length=length)
    head, _, body = received.partition(b"\r\n\r\n")
    assert b"\r\nContent-Type: application/json\r\n" in head, head
    # The shape of the app's own refusals ({"error": ...}), in English, which is all nginx
    # can say, and a code the page translates.
    with translation.override("en"):
        assert json.loads(body) == {"error": analysis.too_large(), "code": "too_large"}


@pytest.mark.parametrize("prefix", ["", "/ru", "/de"])
def test_the_analysis_endpoint_lets_a_photo_over_the_general_limit_through_to_the_app(
    gunicorn, nginx, prefix
):
    proxy = nginx()
    tag = marker()
    # 3 MB: over every other location's 2.5 MB, well under the analysis endpoint's 20 MB.
    response = clients.request(
        proxy.port,
        "POST",
        f"{prefix}/showcases/workers/analyse/?probe={tag}",
        body=b"x" * 3_000_000,
        headers={"Content-Type": "application/octet-stream"},
        timeout=30,
    )
    # The app answered (here: the CSRF check, as the post carries no token), not nginx.
    assert response.status != 413, response.body[:300]
    assert poll(lambda: logged(gunicorn, f"probe={tag}"), seconds=5)


def test_nginx_writes_the_forwarding_headers_and_a_client_cannot(gunicorn, nginx):
    proxy = nginx()
    tag = marker()
    spoofed = {
        "X-Forwarded-For": "203.0.113.9",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Ssl": "on",
        "X-Forwarded-Protocol": "ssl",
    }
    assert clients.get(proxy.port, f"/?probe={tag}", headers=spoofed, timeout=10).status == 200
    # gunicorn does believe X-Forwarded-Proto from the proxy's address: sent straight to it
    # from loopback, the same header makes the request https.
    direct = {"X-Forwarded-Proto": "https"}
    straight = clients.get(gunicorn.port, f"/?probe={tag}-direct", headers=direct, timeout=10)
    assert straight.status == 200
    # Each worker writes its own access lines, so either may land first: wait for both.
    assert poll(lambda: logged(gunicorn, f"{tag}-direct"), seconds=5)
    assert poll(lambda: logged(gunicorn, f"probe={tag} "), seconds=5)
    [through_nginx] = logged(gunicorn, f"probe={tag} ")
    [direct_line] = logged(gunicorn, f"{tag}-direct")
    assert "xff=127.0.0.1 scheme=http " in through_nginx, through_nginx
    assert "scheme=https " in direct_line, direct_line


def test_a_client_over_its_connection_limit_is_refused_with_429(gunicorn, nginx):
    # A request rate no test can reach, so a 429 here can only be the connection limit's.
    proxy = nginx(CONNECTIONS_PER_CLIENT="3", REQUEST_RATE="1000r/s", REQUEST_BURST="1000")
    # Slow bodies count: their headers are in. Three of them fill the client's allowance.
    slow = [clients.slow_body(proxy.port, f"{marker()}-{i}") for i in range(3)]
    seen = []

    def refused() -> bool:
        # nginx frees a request's slot a moment after its last byte is sent, so on a busy
        # machine the start-up check's request may still hold one when the slow bodies
        # arrive, and the third is itself refused. Such a one is replaced, until three hold.
        for index, connection in enumerate(slow):
            if clients.answered(connection):
                connection.close()
                slow[index] = clients.slow_body(proxy.port, f"{marker()}-{index}")
        seen.append(clients.get(proxy.port, "/", timeout=10).status)
        return seen[-1] == 429

    try:
        # nginx counts a connection once it has read its headers: on a busy machine that can
        # take a moment after our sendall, so the wait is generous (it ends at the first 429).
        assert poll(refused, seconds=15, every=0.1), f"statuses seen: {sorted(set(seen))}"
    finally:
        clients.close_all(slow)
    # Their slots are freed with them.
    assert poll(lambda: clients.get(proxy.port, "/", timeout=10).status == 200, seconds=5)


def test_requests_over_the_rate_are_refused_with_429_but_static_files_are_not(gunicorn, nginx):
    proxy = nginx(REQUEST_RATE="1r/m", REQUEST_BURST="1")
    # One a minute and a burst of one more; the start-up check spent one or both of them.
    statuses = [clients.get(proxy.port, "/", timeout=10).status for _ in range(3)]
    assert statuses in ([200, 429, 429], [429, 429, 429])
    static = [
        clients.get(proxy.port, "/static/showcases/palette.js", timeout=10).status for _ in range(5)
    ]
    assert static == [200] * 5
