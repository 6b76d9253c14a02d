"""A push service on loopback that Firefox itself subscribes to and receives pushes from.

Two sides, as a real push service has:

- a WebSocket server speaking Mozilla's push protocol (Firefox's PushServiceWebSocket, the
  `push-notification` subprotocol), which Firefox reaches through its `dom.push.serverURL`
  pref: it says hello, registers a channel per subscription (with the site's VAPID key)
  and acks each push it was handed;
- an HTTPS server taking RFC 8030 push POSTs on the endpoints it issued, as the site's
  webpush channel sends them.

A POST is checked before it is taken: the VAPID JWT (tests/pushpeer.py's vapid_problems,
written from RFC 8292 on its own), signed with the key the subscription was made with
(RFC 8292 §4.2: a push service refuses any other), and an aes128gcm body. One that passes
is forwarded to the browser's WebSocket as it came, still encrypted: only the browser holds
the keys, so its ack (100, delivered) is what proves the encryption right. One that fails is
refused with the status a push service would give, and recorded with its problems.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from tests.httppeers import HTTPPeer, Reply, Request
from tests.pushpeer import b64url, b64url_decode, certificate, vapid_params, vapid_problems

T = TypeVar("T")

# Firefox's acks: delivered to the service worker, could not decrypt, not delivered.
ACK_DELIVERED, ACK_DECRYPTION_ERROR, ACK_NOT_DELIVERED = 100, 101, 102


@dataclass
class Registration:
    """One channel a browser registered: one push subscription."""

    channel_id: str
    uaid: str
    key: bytes  # the application server's VAPID public key the browser subscribed with
    endpoint: str


@dataclass
class Push:
    """One POST to an endpoint, and what became of it."""

    path: str
    headers: dict[str, str]
    problems: list[str]  # why it was refused; empty when it was forwarded
    version: str = ""  # the message id the browser was sent, and acks
    ack: int | None = None  # the browser's ack code, once it came
    size: int = 0


@dataclass
class _Agent:
    """A connected browser (a user agent, in Mozilla's words)."""

    uaid: str
    connection: ServerConnection
    lock: threading.Lock = field(default_factory=threading.Lock)  # one send at a time

    def send(self, message: dict) -> None:
        with self.lock:
            self.connection.send(json.dumps(message))


class _Endpoints(HTTPPeer):
    """The HTTPS side: each POST to an issued endpoint is checked, then handed to the
    service."""

    def __init__(self, service: MozPushService, folder: Path) -> None:
        self.service = service
        tls, self.ca_file = certificate(folder)
        super().__init__(tls=tls)

    def reply(self, request: Request, behaviour) -> Reply:
        return self.service._posted(request)


class MozPushService:
    """The push service: websocket_url for Firefox's pref, endpoints on an HTTPS url whose
    certificate is ca_file, what was registered and what was pushed."""

    def __init__(self, folder: Path) -> None:
        self.registrations: dict[str, Registration] = {}  # by channel id
        self.pushes: list[Push] = []
        self.received: list[dict] = []  # every message a browser sent, in order
        self._agents: dict[str, _Agent] = {}  # connected browsers, by uaid
        self._changed = threading.Condition()
        self._endpoints = _Endpoints(self, folder)
        self.url = self._endpoints.url
        self.ca_file = self._endpoints.ca_file
        # The connection lives as long as Firefox keeps it (it pings when idle): no keepalive
        # of the server's own, which could close it while a busy machine delays a pong.
        self._server = serve(
            self._converse,
            "127.0.0.1",
            0,
            subprotocols=["push-notification"],
            ping_interval=None,
        )
        port = self._server.socket.getsockname()[1]
        self.websocket_url = f"ws://127.0.0.1:{port}/"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        with self._changed:
            agents = list(self._agents.values())
        for agent in agents:
            with contextlib.suppress(OSError):
                agent.connection.close()
        self._thread.join(timeout=5)
        self._endpoints.stop()

    def __enter__(self) -> MozPushService:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # --- Waiting, for tests -------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], T], *, seconds: float, what: str) -> T:
        """Wait until predicate() (called under the service's lock) returns something true,
        and return it; AssertionError naming what after seconds."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while not (found := predicate()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"no {what} within {seconds} s; the browser sent {self.received}, "
                        f"was pushed {self.pushes}"
                    )
                self._changed.wait(left)
            return found

    # --- The WebSocket side: Mozilla's push protocol ------------------------------------

    def _converse(self, connection: ServerConnection) -> None:
        agent: _Agent | None = None
        try:
            for text in connection:
                message = json.loads(text)
                with self._changed:
                    self.received.append(message)
                    self._changed.notify_all()
                kind = message.get("messageType") if isinstance(message, dict) else None
                if kind is None or kind == "ping":  # "{}" is a ping; so is an answer to it
                    connection.send("{}")
                elif kind == "hello":
                    agent = self._hello(connection, message)
                elif agent is None:
                    connection.close(code=1002, reason="hello first")
                elif kind == "register":
                    self._register(agent, message)
                elif kind == "unregister":
                    with self._changed:
                        self.registrations.pop(message.get("channelID"), None)
                    answer = {"messageType": "unregister", "status": 200}
                    agent.send({**answer, "channelID": message.get("channelID")})
                elif kind in ("ack", "nack"):
                    self._acked(message)
                # Anything else (broadcast_subscribe) asks for nothing this service offers.
        except ConnectionClosed:
            pass
        finally:
            if agent is not None:
                with self._changed:
                    if self._agents.get(agent.uaid) is agent:
                        del self._agents[agent.uaid]
                    self._changed.notify_all()

    def _hello(self, connection: ServerConnection, message: dict) -> _Agent:
        # A browser with subscriptions names its uaid to keep them; one without is given a
        # fresh one (Firefox rotates it until it subscribes).
        uaid = message.get("uaid") or uuid.uuid4().hex
        agent = _Agent(uaid, connection)
        with self._changed:
            self._agents[uaid] = agent
            self._changed.notify_all()
        # use_webpush: payloads are carried. Without it Firefox makes no keys for its
        # subscriptions and drops a push's data.
        agent.send({"messageType": "hello", "status": 200, "uaid": uaid, "use_webpush": True})
        return agent

    def _register(self, agent: _Agent, message: dict) -> None:
        channel_id = str(message.get("channelID", ""))
        answer = {"messageType": "register", "channelID": channel_id}
        try:
            uuid.UUID(channel_id)
            # Firefox sends the key padded; a subscription without one (no VAPID) is not
            # what the site makes, and is refused as a push service that requires it would.
            key = b64url_decode(message["key"].rstrip("="))
        except (KeyError, ValueError, AttributeError):
            agent.send({**answer, "status": 401})
            return
        registration = Registration(channel_id, agent.uaid, key, f"{self.url}/push/{channel_id}")
        with self._changed:
            self.registrations[channel_id] = registration
            self._changed.notify_all()
        agent.send({**answer, "status": 200, "pushEndpoint": registration.endpoint})

    def _acked(self, message: dict) -> None:
        with self._changed:
            if message["messageType"] == "nack":
                codes = {str(message.get("version")): message.get("code")}
            else:
                codes = {str(u.get("version")): u.get("code") for u in message.get("updates", [])}
            for push in self.pushes:
                if push.version in codes:
                    push.ack = codes[push.version]
            self._changed.notify_all()

    # --- The HTTPS side: RFC 8030 pushes ------------------------------------------------

    def _posted(self, request: Request) -> Reply:
        channel_id = request.path.removeprefix("/push/")
        push = Push(request.path, request.headers, [], size=len(request.body))
        with self._changed:
            registration = self.registrations.get(channel_id)
            agent = self._agents.get(registration.uaid) if registration else None
            self.pushes.append(push)
            self._changed.notify_all()
        if request.method != "POST":
            return self._refuse(push, 405, f"method {request.method}")
        if registration is None:
            return self._refuse(push, 404, "no such subscription")
        authorization = request.headers.get("authorization", "")
        push.problems += vapid_problems(authorization, origin=self.url, now=time.time())
        if _vapid_key(authorization) != registration.key:
            push.problems.append("not signed with the key the subscription was made with")
        if push.problems:
            return self._refuse(push, 401, "")
        if request.headers.get("content-encoding") != "aes128gcm":
            problem = f"content-encoding {request.headers.get('content-encoding')!r}"
            return self._refuse(push, 415, problem)
        if not request.headers.get("ttl", "").isdigit():
            return self._refuse(push, 400, "no TTL")
        if agent is None:
            # A real service would keep it for the TTL; here no browser connected is a
            # broken test, and a retryable answer makes the drain say so without losing it.
            return self._refuse(push, 503, "the browser is not connected")
        push.version = uuid.uuid4().hex
        agent.send(
            {
                "messageType": "notification",
                "channelID": channel_id,
                "version": push.version,
                "data": b64url(request.body),
                "headers": {"encoding": "aes128gcm"},
            }
        )
        return Reply(201, b"", {"Location": f"{self.url}/message/{push.version}"})

    def _refuse(self, push: Push, status: int, problem: str) -> Reply:
        with self._changed:
            if problem:
                push.problems.append(problem)
            self._changed.notify_all()
        return Reply(status, json.dumps({"errors": push.problems}).encode())


def _vapid_key(authorization: str) -> bytes | None:
    """The k= of an Authorization: vapid t=…, k=… header, as bytes; None when unreadable."""
    _, params = vapid_params(authorization)
    try:
        return b64url_decode(params["k"].rstrip("="))
    except (KeyError, ValueError):
        return None
