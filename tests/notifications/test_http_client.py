"""The HTTP client against real servers on loopback: the deadline holds against servers
that trickle, stall or never answer; connections are kept per sender thread and closed
when idle or at shutdown; redirects are not followed; a body is read only so far."""

from __future__ import annotations

import os
import socket
import threading
import time
import warnings
from datetime import timedelta

import pytest

from tests.httppeers import Behaviour, HTTPPeer, TricklingServer, tls_server_context
from tests.smtp import free_port
from transports import http, netguard

DEADLINE = 1.0
# The deadline plus what closing a socket and a busy machine may add.
SLACK = 0.5


def resolving_client(
    resolver, *, connect_seconds: float = 0.5, allow_loopback: bool = False
) -> http.Client:
    """A client with this module's deadline whose guard asks resolver, not the DNS, what
    addresses a host name has."""
    return http.Client(
        connect_timeout=timedelta(seconds=connect_seconds),
        total_timeout=timedelta(seconds=DEADLINE),
        guard=netguard.Guard(allow_loopback=allow_loopback, resolver=resolver),
    )


@pytest.fixture
def peer():
    with HTTPPeer() as server:
        yield server


@pytest.fixture
def client():
    made = http.Client(
        connect_timeout=timedelta(seconds=0.5), total_timeout=timedelta(seconds=DEADLINE)
    )
    yield made
    made.close()


def timed(call):
    started = time.monotonic()
    try:
        return call(), time.monotonic() - started
    except http.HttpChannelError as exc:
        return exc, time.monotonic() - started


def test_a_reply_that_trickles_is_cut_at_the_deadline(peer, client):
    """A byte every quarter of a second: each read gets one well within any per-read
    timeout, so only the deadline's own cut ends the wait for the status line."""
    peer.behaviour = Behaviour.TRICKLE
    peer.trickle_interval = 0.25
    error, seconds = timed(lambda: client.request("GET", f"{peer.url}/"))
    assert isinstance(error, http.HttpChannelError)
    assert (error.code, error.retryable) == ("HTTP_TIMEOUT", True)
    assert DEADLINE - 0.05 <= seconds < DEADLINE + SLACK
    assert client.open_connections() == 0


def test_a_2xx_whose_body_trickles_comes_back_cut_short_at_the_deadline(peer, client):
    """The status line and headers arrived: the server has answered, and a 2xx means the
    message is delivered, so the reply is returned, marked incomplete."""
    peer.behaviour = Behaviour.TRICKLE_BODY
    peer.trickle_interval = 0.25
    response, seconds = timed(lambda: client.request("GET", f"{peer.url}/"))
    assert isinstance(response, http.Response)
    assert (response.status, response.complete) == (200, False)
    assert response.body == b'{"ok": true}'[: len(response.body)]
    assert DEADLINE - 0.05 <= seconds < DEADLINE + SLACK
    assert client.open_connections() == 0  # a connection with half a body on it is no use


def test_a_server_that_never_answers_is_cut_at_the_deadline(peer, client):
    peer.behaviour = Behaviour.SILENT
    error, seconds = timed(lambda: client.request("POST", f"{peer.url}/", body=b"{}"))
    assert error.code == "HTTP_TIMEOUT"
    assert seconds < DEADLINE + SLACK


def test_a_tls_handshake_that_trickles_is_cut_at_the_deadline():
    """The TLS record header, then a byte every 0.3 s, and the handshake never ends."""
    server = TricklingServer(b"\x16\x03\x03\x40\x00" + b"\x02" * 64, interval=0.3)
    client = http.Client(
        connect_timeout=timedelta(seconds=5), total_timeout=timedelta(seconds=DEADLINE)
    )
    try:
        error, seconds = timed(lambda: client.request("GET", f"https://127.0.0.1:{server.port}/"))
        assert error.code == "HTTP_TIMEOUT"
        assert DEADLINE - 0.05 <= seconds < DEADLINE + SLACK
    finally:
        client.close()
        server.stop()


def test_a_refused_connection_is_a_retryable_connect_error(client):
    error, seconds = timed(lambda: client.request("GET", f"http://127.0.0.1:{free_port()}/"))
    assert (error.code, error.retryable) == ("HTTP_CONNECT", True)
    assert "refused" in error.message.lower()


def test_a_connection_dropped_in_the_status_line_is_a_retryable_network_error(peer, client):
    peer.behaviour = Behaviour.DROP
    error, _ = timed(lambda: client.request("GET", f"{peer.url}/"))
    assert (error.code, error.retryable) == ("HTTP_NETWORK", True)


def test_a_connection_dropped_in_a_2xx_body_comes_back_incomplete(peer, client):
    peer.behaviour = Behaviour.DROP_BODY
    response = client.request("GET", f"{peer.url}/")
    assert (response.status, response.complete) == (200, False)


def test_a_redirect_is_returned_and_never_followed(peer, client):
    peer.behaviour = Behaviour.REDIRECT
    response = client.request("POST", f"{peer.url}/hook", body=b"{}")
    assert response.status == 302
    assert response.headers["Location"] == f"{peer.url}/moved/hook"
    assert [r.path for r in peer.requests] == ["/hook"]


def test_a_huge_body_is_read_only_up_to_the_cap(peer, client):
    peer.behaviour = Behaviour.HUGE
    response = client.request("GET", f"{peer.url}/")
    assert response.status == 200
    assert len(response.body) == http.MAX_BODY_BYTES
    assert not response.complete
    assert client.open_connections() == 0  # the rest of the body is still on it


def test_requests_on_one_thread_share_one_connection(peer, client):
    for _ in range(5):
        assert client.request("GET", f"{peer.url}/").status == 200
    assert peer.accepted == 1
    assert client.open_connections() == 1


def test_each_sender_thread_keeps_a_connection_of_its_own(peer, client):
    errors = []

    def send_three():
        try:
            for _ in range(3):
                client.request("POST", f"{peer.url}/", body=b"{}")
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send_three) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert (len(peer.requests), peer.accepted) == (6, 2)
    assert client.open_connections() == 2


def test_a_kept_connection_the_server_closed_is_replaced_without_an_error(peer, client):
    client.request("GET", f"{peer.url}/")
    peer.drop_connections()
    assert peer.wait_for_open_connections(0) == 0
    assert client.request("GET", f"{peer.url}/").status == 200
    assert peer.accepted == 2


def test_a_reply_that_closes_its_connection_is_not_kept(peer, client):
    peer.behaviour = Behaviour.CLOSE
    for _ in range(2):
        assert client.request("GET", f"{peer.url}/").complete
    assert peer.accepted == 2
    assert client.open_connections() == 0


def test_close_idle_closes_the_connections_idle_long_enough(peer, client, monkeypatch):
    client.request("GET", f"{peer.url}/")
    monkeypatch.setattr(http.Client, "idle_seconds", 3600)
    client.close_idle()
    assert client.open_connections() == 1
    monkeypatch.setattr(http.Client, "idle_seconds", 0)
    client.close_idle()
    assert client.open_connections() == 0
    assert peer.wait_for_open_connections(0) == 0
    # The next request opens a new one.
    client.request("GET", f"{peer.url}/")
    assert peer.accepted == 2


def test_close_closes_every_connection_but_one_in_use(peer, client):
    client.request("GET", f"{peer.url}/")
    peer.behaviour = Behaviour.SILENT
    outcome = []
    busy = threading.Thread(
        target=lambda: outcome.append(timed(lambda: client.request("GET", f"{peer.url}/"))[0])
    )
    busy.start()
    until = time.monotonic() + 2
    while len(peer.requests) < 2 and time.monotonic() < until:
        time.sleep(0.01)
    assert client.open_connections() == 2
    client.close()
    assert client.open_connections() == 1  # the one a sender is using is left alone
    busy.join()
    assert outcome[0].code == "HTTP_TIMEOUT"
    client.close()
    assert client.open_connections() == 0


def test_the_connection_goes_to_the_checked_address_with_the_urls_host_name(peer):
    def hooks_example(host, port, **kwargs):
        assert host == "hooks.example"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    client = resolving_client(hooks_example, allow_loopback=True)
    try:
        client.request("POST", f"http://hooks.example:{peer.port}/in", body=b"{}")
    finally:
        client.close()
    assert peer.requests[0].headers["host"] == f"hooks.example:{peer.port}"


def test_over_tls_sni_and_the_certificate_check_use_the_urls_host_name(tmp_path):
    server_context, client_context = tls_server_context(tmp_path, name="hooks.example")
    peer = HTTPPeer(tls=server_context)

    def hooks_example(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    client = http.Client(
        connect_timeout=timedelta(seconds=1),
        total_timeout=timedelta(seconds=2),
        guard=netguard.Guard(allow_loopback=True, resolver=hooks_example),
        ssl_context=client_context,
    )
    try:
        for _ in range(2):
            response = client.request("GET", f"https://hooks.example:{peer.port}/")
            assert response.status == 200
        assert peer.server_names == ["hooks.example"]  # one handshake, for two requests
        assert peer.requests[0].headers["host"] == f"hooks.example:{peer.port}"
        # The certificate names hooks.example: reached as 127.0.0.1, it does not match.
        error, _ = timed(lambda: client.request("GET", f"https://127.0.0.1:{peer.port}/"))
        assert (error.code, error.retryable) == ("HTTP_TLS", True)
    finally:
        client.close()
        peer.stop()


def test_a_resolver_that_hangs_is_cut_within_the_connect_timeout(peer):
    def hangs(host, port, **kwargs):
        time.sleep(3)
        return []

    client = resolving_client(hangs, connect_seconds=0.3)
    error, seconds = timed(lambda: client.request("GET", "http://slow-dns.example/"))
    assert (error.code, error.retryable) == ("HTTP_DNS", True)
    assert seconds < 0.3 + SLACK


def test_a_name_that_does_not_resolve_is_a_retryable_dns_error():
    def unknown(host, port, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    client = resolving_client(unknown)
    error, _ = timed(lambda: client.request("GET", "http://nowhere.example/"))
    assert (error.code, error.retryable) == ("HTTP_DNS", True)
    assert "nowhere.example" in error.message


def test_a_shared_deadline_that_has_passed_fails_before_connecting(peer, client):
    error, _ = timed(
        lambda: client.request("GET", f"{peer.url}/", deadline=time.monotonic() - 0.01)
    )
    assert error.code == "HTTP_TIMEOUT"
    assert peer.accepted == 0


def test_worst_case_is_the_deadline_and_a_second(client):
    assert client.worst_case == timedelta(seconds=DEADLINE + 1)


def test_a_forked_child_starts_without_the_parents_connections_or_watchdog(peer, client):
    """The child never sends on the parent's connections, and its deadlines are kept by a
    watchdog of its own: the parent's thread did not come with the fork."""
    peer.trickle_interval = 0.25  # well within any per-read timeout: only the watchdog cuts
    peer.behaviour_of = lambda request: (
        Behaviour.TRICKLE if request.path == "/trickle" else Behaviour.OK
    )
    assert client.request("GET", f"{peer.url}/").status == 200
    assert client.open_connections() == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads running
        child = os.fork()
    if child == 0:
        try:
            fresh = client.open_connections() == 0
            sent = client.request("GET", f"{peer.url}/").status == 200
            error, seconds = timed(lambda: client.request("GET", f"{peer.url}/trickle"))
            cut = getattr(error, "code", None) == "HTTP_TIMEOUT" and seconds < DEADLINE + SLACK
            os._exit(0 if fresh and sent and cut else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert peer.accepted == 2  # the child made a connection of its own
    assert client.request("GET", f"{peer.url}/").status == 200  # the parent's is still good
    assert peer.accepted == 2
