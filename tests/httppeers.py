"""Real HTTP servers on loopback for the HTTP channels: Telegram's Bot API, Discord's, and a
webhook receiver, each told per test how to misbehave.

They speak enough of each provider's protocol for the channels' whole conversation (the
routes, the JSON, the error bodies), count the TCP connections they accept, and record every
request. The webhook receiver checks signatures with spec_verify below, written from the
Standard Webhooks specification on its own, not with the module under test.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import http
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.listener import Listener


class Behaviour(StrEnum):
    OK = "ok"
    RATE_LIMITED = "rate_limited"  # 429, with Retry-After
    UNAVAILABLE = "unavailable"  # 503
    BLOCKED = "blocked"  # 403: the recipient blocked the bot (a webhook: forbidden)
    GONE = "gone"  # 410
    BAD_REQUEST = "bad_request"  # 400
    REDIRECT = "redirect"  # 302, to a path on this server that nobody should follow
    TRICKLE = "trickle"  # the whole reply, status line first, a byte a second
    TRICKLE_BODY = "trickle_body"  # a 200's headers at once, then its body a byte a second
    DROP = "drop"  # the connection cut halfway through the status line
    DROP_BODY = "drop_body"  # a 200's headers, half its body, then the connection cut
    SILENT = "silent"  # reads the request and never answers
    SLOW = "slow"  # a 200, after slow_seconds
    HUGE = "huge"  # a 200 with a 1 MiB body
    CLOSE = "close"  # a 200 with Connection: close, then the connection closed


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    verified: bool | None = None  # the webhook receiver's verdict on the signature

    def json(self):
        return json.loads(self.body)


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    def raw(self, *, close: bool = False) -> bytes:
        phrase = http.HTTPStatus(self.status).phrase
        lines = [f"HTTP/1.1 {self.status} {phrase}"]
        headers = {"Content-Length": str(len(self.body)), **self.headers}
        if close:
            headers["Connection"] = "close"
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


def json_reply(status: int, payload, headers: dict[str, str] | None = None) -> Reply:
    body = json.dumps(payload).encode()
    return Reply(status, body, {"Content-Type": "application/json", **(headers or {})})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    peer: HTTPPeer

    def handle_error(self, request, client_address) -> None:
        # A client that goes away mid-conversation (cut off at its deadline, say) is what
        # these tests make happen; anything else is printed as usual.
        if not isinstance(sys.exception(), OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: connections are reused, and counted
    timeout = 30  # an idle kept connection is closed by the server after this long
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.peer._opened(self.connection)

    def finish(self) -> None:
        try:
            with contextlib.suppress(OSError):
                super().finish()
        finally:
            self.server.peer._closed(self.connection)

    def log_message(self, format, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 1 << 20))
        request = Request(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
        )
        try:
            self.server.peer._answer(self, request)
        except OSError:  # the client went away (cut at its deadline, say)
            self.close_connection = True


class HTTPPeer:
    """A threaded HTTP/1.1 server on a free loopback port. Answers {"ok": true} with a 200
    unless its behaviour says otherwise; subclasses speak a provider's routes."""

    def __init__(self, *, tls: ssl.SSLContext | None = None) -> None:
        self.behaviour = Behaviour.OK
        # Seconds between the bytes of a trickle: one a second, as a slow server might; a
        # test shortens it to show that no per-read timeout is what cuts a trickle off.
        self.trickle_interval = 1.0
        self.slow_seconds = 1.0
        self.requests: list[Request] = []
        self.accepted = 0  # TCP connections accepted, ever
        self.server_names: list[str | None] = []  # the SNI of each TLS handshake
        self.lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.peer = self
        self.port = self._server.server_address[1]
        self.scheme = "http"
        if tls is not None:
            tls.sni_callback = self._heard_server_name
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def _heard_server_name(self, sock, name, context) -> None:
        with self.lock:
            self.server_names.append(name)

    @property
    def open_connections(self) -> int:
        with self.lock:
            return len(self._sockets)

    def wait_for_open_connections(self, count: int, *, seconds: float = 2.0) -> int:
        """Poll until count connections are open (the client's close reaches the server a
        moment later), or the time is up; return how many are open."""
        until = time.monotonic() + seconds
        while self.open_connections != count and time.monotonic() < until:
            time.sleep(0.01)
        return self.open_connections

    def drop_connections(self) -> None:
        """Cut every open connection, as a server restarting would, without a word."""
        with self.lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> HTTPPeer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self.drop_connections()

    # --- What it answers ---------------------------------------------------------------

    def ok(self, request: Request) -> Reply:
        return json_reply(200, {"ok": True})

    def rate_limited(self, request: Request) -> Reply:
        return Reply(429, b"slow down", {"Retry-After": "120"})

    def blocked(self, request: Request) -> Reply:
        return Reply(403, b"forbidden")

    def behaviour_of(self, request: Request) -> Behaviour:
        """How to answer request: as self.behaviour says, unless a test replaces this to
        answer one route one way and another route another."""
        return self.behaviour

    def reply(self, request: Request, behaviour: Behaviour) -> Reply:
        """The reply for a behaviour that is a plain HTTP answer."""
        if behaviour == Behaviour.RATE_LIMITED:
            return self.rate_limited(request)
        if behaviour == Behaviour.BLOCKED:
            return self.blocked(request)
        if behaviour == Behaviour.UNAVAILABLE:
            return Reply(503, b"<html>Service Unavailable</html>", {"Content-Type": "text/html"})
        if behaviour == Behaviour.GONE:
            return Reply(410, b"gone")
        if behaviour == Behaviour.BAD_REQUEST:
            return json_reply(400, {"message": "Bad Request"})
        if behaviour == Behaviour.REDIRECT:
            return Reply(302, b"", {"Location": f"{self.url}/moved{request.path}"})
        if behaviour == Behaviour.HUGE:
            return Reply(200, b"x" * (1 << 20), {"Content-Type": "application/json"})
        return self.ok(request)

    def _answer(self, handler: _Handler, request: Request) -> None:
        with self.lock:
            self.requests.append(request)
        behaviour = self.behaviour_of(request)
        out = handler.wfile
        if behaviour == Behaviour.SILENT:
            self._stopping.wait()
            handler.close_connection = True
            return
        if behaviour == Behaviour.SLOW:
            self._stopping.wait(self.slow_seconds)
        reply = self.reply(request, behaviour)
        raw = reply.raw(close=behaviour == Behaviour.CLOSE)
        if behaviour == Behaviour.TRICKLE:
            self._trickle(out, raw)
        elif behaviour == Behaviour.TRICKLE_BODY:
            head = len(raw) - len(reply.body)
            out.write(raw[:head])
            out.flush()
            self._trickle(out, raw[head:])
        elif behaviour == Behaviour.DROP:
            out.write(raw[: raw.index(b"\r\n") // 2])
            out.flush()
        elif behaviour == Behaviour.DROP_BODY:
            out.write(raw[: len(raw) - len(reply.body) // 2])
            out.flush()
        else:
            out.write(raw)
            out.flush()
            if behaviour != Behaviour.CLOSE:
                return
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    def _trickle(self, out, data: bytes) -> None:
        for i in range(len(data)):
            out.write(data[i : i + 1])
            out.flush()
            if self._stopping.wait(self.trickle_interval):
                return

    def _opened(self, sock: socket.socket) -> None:
        with self.lock:
            self.accepted += 1
            self._sockets.add(sock)

    def _closed(self, sock: socket.socket) -> None:
        with self.lock:
            self._sockets.discard(sock)


class TelegramPeer(HTTPPeer):
    """The Bot API: /bot<token>/sendMessage and /bot<token>/getMe."""

    def __init__(self, *, token: str) -> None:
        self.token = token
        self.messages: list[dict] = []
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.url

    def ok(self, request: Request) -> Reply:
        prefix = f"/bot{self.token}/"
        if not request.path.startswith(prefix):
            return json_reply(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
        method = request.path.removeprefix(prefix)
        if method == "getMe":
            bot = {"id": 42, "is_bot": True, "first_name": "V10r", "username": "v10r_bot"}
            return json_reply(200, {"ok": True, "result": bot})
        if method == "sendMessage" and request.method == "POST":
            sent = request.json()
            with self.lock:
                self.messages.append(sent)
                message_id = 100 + len(self.messages)
            result = {"message_id": message_id, "chat": {"id": sent["chat_id"]}, "text": "…"}
            return json_reply(200, {"ok": True, "result": result})
        return json_reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})

    def rate_limited(self, request: Request) -> Reply:
        return json_reply(
            429,
            {
                "ok": False,
                "error_code": 429,
                "description": "Too Many Requests: retry after 7",
                "parameters": {"retry_after": 7},
            },
            {"Retry-After": "7"},
        )

    def blocked(self, request: Request) -> Reply:
        description = "Forbidden: bot was blocked by the user"
        return json_reply(403, {"ok": False, "error_code": 403, "description": description})


class DiscordPeer(HTTPPeer):
    """The REST API under /api/v10: opening a DM channel, posting to it, and /users/@me."""

    PREFIX = "/api/v10"

    def __init__(self, *, token: str) -> None:
        self.token = token
        self.channels: dict[str, str] = {}  # DM channel id -> recipient's user id
        self.messages: list[dict] = []  # each with the recipient and the posted JSON
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.url + self.PREFIX

    def ok(self, request: Request) -> Reply:
        if request.headers.get("authorization") != f"Bot {self.token}":
            return json_reply(401, {"message": "401: Unauthorized", "code": 0})
        path = request.path.removeprefix(self.PREFIX)
        if path == "/users/@me" and request.method == "GET":
            return json_reply(200, {"id": "4242", "username": "v10r-bot", "bot": True})
        if path == "/users/@me/channels" and request.method == "POST":
            recipient = request.json()["recipient_id"]
            with self.lock:
                channel = next((c for c, r in self.channels.items() if r == recipient), None)
                if channel is None:
                    channel = str(9_000_000 + len(self.channels))
                    self.channels[channel] = recipient
            return json_reply(200, {"id": channel, "type": 1, "recipients": [{"id": recipient}]})
        parts = path.split("/")  # "", "channels", id, "messages"
        if len(parts) == 4 and parts[1] == "channels" and parts[3] == "messages":
            with self.lock:
                recipient = self.channels.get(parts[2])
                if recipient is None:
                    return json_reply(404, {"message": "Unknown Channel", "code": 10003})
                self.messages.append({"recipient": recipient, "payload": request.json()})
                message_id = str(7_000_000 + len(self.messages))
            return json_reply(200, {"id": message_id, "channel_id": parts[2]})
        return json_reply(404, {"message": "404: Not Found", "code": 0})

    def rate_limited(self, request: Request) -> Reply:
        return json_reply(
            429,
            {"message": "You are being rate limited.", "retry_after": 2.5, "global": False},
            {"Retry-After": "3"},
        )

    def blocked(self, request: Request) -> Reply:
        # Opening the DM channel still works; posting to it is what fails.
        if not request.path.endswith("/messages"):
            return self.ok(request)
        return json_reply(403, {"message": "Cannot send messages to this user", "code": 50007})


# A bot channel's deadline under test, in seconds: longer than a peer's second between
# trickled bytes, so no per-read timeout can be what cuts a trickle, only the deadline.
BOT_DEADLINE = 1.5


@dataclass(frozen=True)
class BotCase:
    """A bot channel under test: its provider's peer, the channel class, and the token both
    are given."""

    peer_class: type[HTTPPeer]
    channel_class: type
    token: str

    @property
    def name(self) -> str:
        return self.channel_class.name


def bot_fixtures(*cases: BotCase):
    """The bot, api and channel fixtures of bot channel tests: the case under test, its
    provider's API on loopback, and the channel pointed at it, with a connect timeout of half
    a second and a deadline of BOT_DEADLINE. Given more than one case, each test that uses them runs
    once per case. Assign all three in the test module: bot, api, channel = bot_fixtures(...)."""

    @pytest.fixture(params=cases if len(cases) > 1 else None, ids=[case.name for case in cases])
    def bot(request):
        return getattr(request, "param", cases[0])

    @pytest.fixture
    def api(bot):
        with bot.peer_class(token=bot.token) as peer:
            yield peer

    @pytest.fixture
    def channel(bot, api):
        made = bot.channel_class(
            base_url=api.base_url,
            token=bot.token,
            connect_timeout=timedelta(seconds=0.5),
            total_timeout=timedelta(seconds=BOT_DEADLINE),
        )
        yield made
        made.close()

    return bot, api, channel


class WebhookReceiver(HTTPPeer):
    """Takes any POST, and checks its signature against secrets with spec_verify."""

    def __init__(self, *, secrets: list[str]) -> None:
        self.secrets = secrets
        super().__init__()

    def ok(self, request: Request) -> Reply:
        return json_reply(200, {"received": True})

    def _answer(self, handler: _Handler, request: Request) -> None:
        request.verified = spec_verify(request.headers, request.body, self.secrets)
        super()._answer(handler, request)


def check_one_connection_until_closed(
    channel, peer: HTTPPeer, *, outgoing, monkeypatch, requests_per_send: int = 1
) -> None:
    """Three sends through channel to peer share one connection, which close_idle keeps while
    it is fresh and drops once idle; the next send opens another, and close drops that.
    outgoing(delivery_id=…) is the message to send."""
    for delivery_id in range(3):
        channel.send(outgoing(delivery_id=delivery_id))
    assert (len(peer.requests), peer.accepted) == (3 * requests_per_send, 1)
    monkeypatch.setattr("transports.http.Client.idle_seconds", 3600)
    channel.close_idle()
    assert channel.client.open_connections() == 1
    monkeypatch.setattr("transports.http.Client.idle_seconds", 0)
    channel.close_idle()
    assert peer.wait_for_open_connections(0) == 0
    channel.send(outgoing(delivery_id=7))
    channel.close()
    assert peer.wait_for_open_connections(0) == 0
    assert peer.accepted == 2


class TricklingServer(Listener):
    """Accepts TCP connections and sends each the same bytes, one every interval seconds:
    a TLS server whose handshake never ends, say, or any reply at a crawl."""

    def __init__(self, data: bytes, *, interval: float) -> None:
        self.data = data
        self.interval = interval
        self.accepted = 0
        self._stopping = threading.Event()
        super().__init__()

    def take(self, conn: socket.socket) -> None:
        self.accepted += 1
        threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            for i in range(len(self.data)):
                try:
                    conn.sendall(self.data[i : i + 1])
                except OSError:
                    return
                if self._stopping.wait(self.interval):
                    return

    def stop(self) -> None:
        self._stopping.set()
        super().stop()


def tls_server_context(folder: Path, *, name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for name (openssl, self-signed, a day's
    validity), and a client context that trusts exactly that certificate."""
    certificate, key = folder / "peer.crt", folder / "peer.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}"]
        + ["-keyout", str(key), "-out", str(certificate)],
        check=True,
        capture_output=True,
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certificate, key)
    client = ssl.create_default_context(cafile=str(certificate))
    return server, client


# --- Standard Webhooks, from the specification -------------------------------------------


def spec_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """The specification's v1 signature: the key is the base64 after "whsec_", the signed
    content "<id>.<timestamp>.<body>", the MAC HMAC-SHA256, sent as base64."""
    key = base64.b64decode(secret.split("_", 1)[1])
    content = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    return "v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()


def spec_verify(
    headers: dict[str, str], body: bytes, secrets: list[str], *, tolerance: int = 300
) -> bool:
    """Whether headers (lower-case names) sign body with any secret, stamped within
    tolerance seconds of now."""
    try:
        msg_id = headers["webhook-id"]
        timestamp = headers["webhook-timestamp"]
        offered = headers["webhook-signature"].split(" ")
    except KeyError:
        return False
    if abs(time.time() - int(timestamp)) > tolerance:
        return False
    expected = {spec_signature(secret, msg_id, timestamp, body) for secret in secrets}
    return any(hmac.compare_digest(s, e) for s in offered for e in expected)
