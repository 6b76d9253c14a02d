"""The HTTP client of the Telegram, Discord and webhook channels, and what a reply means.

Every request runs against a deadline that covers all of it: resolving the name, connecting,
TLS, sending, and reading the reply. Per-operation timeouts are not enough, since a server
that sends one byte a second never lets a read wait long; so the channels' watchdog thread
(deadlines) shuts the socket down when the deadline passes, and whatever call is blocked on
it fails at once. Redirects are never followed (the configured URL is wrong, and following
one could lead a webhook somewhere netguard never checked), and at most MAX_BODY_BYTES of a
reply are read.

Each sender thread keeps one connection per origin from one send to the next (pools), so a
busy queue pays the connect and the TLS handshake once per thread. The worker closes those
idle for IDLE_SECONDS, and all of them when it stops.

Built on urllib3's connection classes rather than on httpx. Neither bounds a whole exchange
(both time each connect and each read, not the total), so the deadline is the channels' own
either way; what decides is where the socket is made. urllib3's connection has one method
that opens the TCP connection, which this module overrides to connect to the address
netguard checked while the Host header, SNI and the certificate check keep the URL's name,
and to keep the handle the watchdog cuts. httpx buries the same step two libraries down
(httpcore's network backend, behind a transport with no public way to reach it), and comes
with five other packages where urllib3 needs none. urllib3's pools, retries and redirects
are not used: each sender thread's connections are kept in the channels' own pool, and a
failed send is the outbox's to retry.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any
from urllib.parse import quote

import urllib3.exceptions
from urllib3.connection import HTTPConnection, HTTPSConnection

from transports import deadlines, netguard, pools
from transports.base import ChannelError

# Enough for any reply the channels read (a message id, an error description); a server
# that sends more is cut off there, and cannot make the worker hold more.
MAX_BODY_BYTES = 64 * 1024
# Close a connection nobody has used for this long; providers drop idle clients themselves
# after a while, and a quiet queue should hold no sockets open.
IDLE_SECONDS = 30.0
# How many origins one sender thread keeps a connection to; webhooks can have many.
ORIGINS_PER_THREAD = 8
# The longest Retry-After taken at its word: the backoff curve itself stops at an hour.
RETRY_AFTER_CAP = timedelta(hours=1)
USER_AGENT = "v10r-notifications"
# After the deadline, a moment for the watchdog's shutdown and the sockets' closing.
MARGIN = timedelta(seconds=1)

_READ_SIZE = 16 * 1024
_DETAIL_CHARS = 200
# Retryable without a 5xx: the server timed out waiting for us (408), would not risk a
# replay (425), or limits our rate (429).
_RETRYABLE_4XX = {408, 425, 429}
_DELAY_SECONDS = re.compile(r"[0-9]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")

# Discord's "Cannot send messages to this user": DMs closed, or no shared server any more.
DISCORD_CANNOT_MESSAGE_USER = 50007


class Peer(StrEnum):
    """Who answered: the same status means different things from a bot API and a webhook."""

    TELEGRAM = "telegram"
    DISCORD = "discord"
    WEBHOOK = "webhook"
    WEBPUSH = "webpush"


class HttpChannelError(ChannelError):
    """A ChannelError that also says which HTTP status, if any, it came from."""

    def __init__(self, code: str, message: str, *, status: int | None = None, **options) -> None:
        # options: ChannelError's own (retryable, retry_after, deactivate_address, throttled).
        super().__init__(code, message, **options)
        self.status = status


@dataclass(frozen=True)
class Response:
    """A reply, whatever its status. complete is False when the body was cut short: by the
    deadline, by the server going away, or at MAX_BODY_BYTES."""

    status: int
    reason: str
    headers: Mapping[str, str]  # case-insensitive
    body: bytes
    complete: bool
    seconds: float  # from the start of the request to the end of the reply

    def json(self) -> Any:
        """Return the body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None


# --- What a reply means ------------------------------------------------------------------


def classify(
    response: Response,
    *,
    peer: Peer,
    now: datetime | None = None,
    secrets: Sequence[str] = (),
) -> HttpChannelError | None:
    """Return None for a 2xx, else the error the reply stands for.

    3xx: a permanent configuration error. 408, 425, 429 and 5xx: retryable, with the
    server's Retry-After. A bot's recipient who blocked it (Telegram's 403, Discord's 50007)
    and a webhook's 410 Gone deactivate the address; other 4xx are permanent.
    """
    status = response.status
    if 200 <= status < 300:
        return None
    detail = redact(_detail(response), secrets=secrets)
    if 300 <= status < 400:
        location = response.headers.get("Location") or "nowhere (no Location header)"
        return HttpChannelError(
            "HTTP_REDIRECT",
            f"{status} redirect to {redact(_printable(location), secrets=secrets)}; redirects are "
            "not followed, so the configured URL must be the final one.",
            retryable=False,
            status=status,
        )
    if status in _RETRYABLE_4XX or 500 <= status < 600:
        return HttpChannelError(
            f"HTTP_{status}",
            detail,
            retryable=True,
            retry_after=retry_after(response, now=now or datetime.now(UTC)),
            status=status,
            # Only a 429 is about our rate; a 503's Retry-After is the server's own trouble.
            throttled=status == 429,
        )
    payload = response.json()
    payload = payload if isinstance(payload, dict) else {}
    if peer == Peer.TELEGRAM and status == 403:
        # "bot was blocked by the user", "user is deactivated", "bot was kicked from the
        # group chat": every 403 from sendMessage says this chat is closed to the bot.
        return HttpChannelError(
            "BOT_BLOCKED", detail, retryable=False, deactivate_address=True, status=status
        )
    if (
        peer == Peer.DISCORD
        and status in (400, 403)
        and payload.get("code") == DISCORD_CANNOT_MESSAGE_USER
    ):
        return HttpChannelError(
            "BOT_BLOCKED", detail, retryable=False, deactivate_address=True, status=status
        )
    if peer == Peer.WEBHOOK and status == 410:
        return HttpChannelError(
            "ENDPOINT_GONE", detail, retryable=False, deactivate_address=True, status=status
        )
    return HttpChannelError(f"HTTP_{status}", detail, retryable=False, status=status)


def retry_after(response: Response, *, now: datetime) -> timedelta | None:
    """The wait the server asked for: its Retry-After header, else the bot API's own field
    (Telegram's parameters.retry_after, Discord's retry_after), capped at RETRY_AFTER_CAP."""
    wait = parse_retry_after(response.headers.get("Retry-After"), now=now)
    if wait is not None:
        return wait
    payload = response.json()
    if not isinstance(payload, dict):
        return None
    parameters = payload.get("parameters")
    seconds = parameters.get("retry_after") if isinstance(parameters, dict) else None
    if seconds is None:
        seconds = payload.get("retry_after")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return timedelta(seconds=min(seconds, RETRY_AFTER_CAP.total_seconds()))


def parse_retry_after(value: str | None, *, now: datetime) -> timedelta | None:
    """Read a Retry-After header: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).

    None when absent or unreadable; a date already past is no wait at all; anything longer
    than RETRY_AFTER_CAP is capped.
    """
    if value is None:
        return None
    value = value.strip()
    if _DELAY_SECONDS.fullmatch(value):
        seconds = min(int(value), RETRY_AFTER_CAP.total_seconds())
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # "-0000": UTC, with no claim about local time
            when = when.replace(tzinfo=UTC)
        seconds = min(max((when - now).total_seconds(), 0), RETRY_AFTER_CAP.total_seconds())
    return timedelta(seconds=seconds)


def redact(text: str, *, secrets: Sequence[str]) -> str:
    """text with every secret (and its percent-encoded form) replaced."""
    for secret in secrets:
        if secret:
            for form in {secret, quote(secret, safe="")}:
                text = text.replace(form, "[redacted]")
    return text


def clip(text: str, *, units: int) -> str:
    """Return text cut to at most units UTF-16 code units, ending in an ellipsis when cut.

    Both bot APIs count a message's length the way JavaScript does, in UTF-16 code units,
    so an emoji counts twice.
    """
    encoded = text.encode("utf-16-le")
    if len(encoded) <= units * 2:
        return text
    # A cut through a surrogate pair leaves half a character, which the decoder drops.
    return encoded[: max(units - 1, 0) * 2].decode("utf-16-le", errors="ignore") + "…"


def _detail(response: Response) -> str:
    """The status and, when the body is JSON that says one, the provider's own reason."""
    text = f"{response.status} {response.reason}".strip()
    payload = response.json()
    if isinstance(payload, dict):
        for key in ("description", "message", "error"):  # Telegram, Discord, anyone
            if isinstance(payload.get(key), str) and payload[key].strip():
                text = f"{text}: {payload[key].strip()}"
                break
    return _printable(text)[:_DETAIL_CHARS]


def _printable(text: str) -> str:
    return _CONTROL.sub(" ", text)


def resolve_within(resolve: Callable[[], list], *, host: str, seconds: float) -> list:
    """Run resolve on a thread of its own and wait at most seconds for it.

    The C library's resolver takes no timeout, and a slow name server (one that a webhook's
    owner runs, say) must not hold a send past its deadline. A lookup given up on finishes
    in the background, on a daemon thread, and its answer is dropped.
    """
    outcome: list = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, resolve()))
        except BaseException as exc:  # handed to the sender thread, which raises it
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="http-resolve", daemon=True).start()
    if not done.wait(max(seconds, 0)):
        raise HttpChannelError(
            "HTTP_DNS", f"{host} did not resolve within {seconds:.1f} s.", retryable=True
        )
    succeeded, value = outcome[0]
    if succeeded:
        return value
    raise value


# --- Connections -------------------------------------------------------------------------


class _Opening:
    """urllib3's connect step, done the client's way.

    The client resolves the name (checking every address with netguard, for webhooks) and
    connects to one of the addresses it checked; urllib3 goes on from there with the URL's
    own host name, for the Host header, SNI and the certificate. A second handle on the
    socket is kept for the watchdog: shutting it down cuts the connection even in the
    middle of the TLS handshake, while the ssl module holds the socket.
    """

    client: Client
    until: float = 0.0
    handle: socket.socket | None = None

    def _new_conn(self) -> socket.socket:
        sock = self.client._connect(self.host, self.port, until=self.until)
        self._drop_handle()
        self.handle = sock.dup()
        if time.monotonic() >= self.until:
            # The watchdog may have come while the handle was being made, and missed it.
            self.shutdown()
        return sock

    def shutdown(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.shutdown(socket.SHUT_RDWR)

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
        self._drop_handle()

    def _drop_handle(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()


class _PlainConnection(_Opening, HTTPConnection):
    pass


class _TLSConnection(_Opening, HTTPSConnection):
    pass


@dataclass
class _Link:
    """One kept connection, to one origin."""

    conn: _PlainConnection | _TLSConnection

    @property
    def is_open(self) -> bool:
        return self.conn.sock is not None

    def shutdown(self) -> None:
        self.conn.shutdown()

    def discard(self) -> None:
        self.conn.discard()


@dataclass
class _Origins:
    """One sender thread's connections, by origin, the most recently used last."""

    links: dict[tuple[str, str, int], _Link] = field(default_factory=dict)

    def close(self) -> None:
        for link in self.links.values():
            link.discard()
        self.links.clear()


class Client(pools.Keeper):
    """Sends HTTP requests within a deadline, on connections kept per sender thread.

    guard: check every address a host name resolves to before connecting (webhooks); None
    trusts the name (a bot API's configured base URL). ssl_context: the system's trusted
    certificates unless given (a private CA, a test's own).
    """

    idle_seconds = IDLE_SECONDS

    def __init__(
        self,
        *,
        connect_timeout: timedelta,
        total_timeout: timedelta,
        guard: netguard.Guard | None = None,
        user_agent: str = USER_AGENT,
        max_body_bytes: int = MAX_BODY_BYTES,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.connect_seconds = connect_timeout.total_seconds()
        self.total_seconds = total_timeout.total_seconds()
        self.guard = guard
        self.user_agent = user_agent
        self.max_body_bytes = max_body_bytes
        self._ssl_context = ssl_context
        self._pool = pools.Pool(make=_Origins, close=_Origins.close)

    @property
    def worst_case(self) -> timedelta:
        """The longest a request (or several sharing one deadline) can take: the deadline
        covers resolving and connecting too, and MARGIN covers closing the socket."""
        return timedelta(seconds=self.total_seconds) + MARGIN

    def deadline(self) -> float:
        """A deadline from now, on time.monotonic()'s clock, for requests that share one."""
        return time.monotonic() + self.total_seconds

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        deadline: float | None = None,
        secrets: Sequence[str] = (),
    ) -> Response:
        """Send one request and return the reply, whatever its status.

        Raise HttpChannelError when there is no reply to judge: the URL or its address is
        refused, the name does not resolve, nothing answers, the connection drops, or the
        deadline passes before the status line and headers have all arrived. A reply whose
        body is then cut short is still returned, with complete=False: the server has
        answered, and for a 2xx the message is delivered. secrets are kept out of every
        error message.
        """
        until = self.deadline() if deadline is None else deadline
        try:
            destination = netguard.parse_url(url)
        except netguard.Refused as exc:
            raise HttpChannelError(
                "BAD_URL", redact(str(exc), secrets=secrets), retryable=False
            ) from None
        if until <= time.monotonic():
            raise HttpChannelError(
                "HTTP_TIMEOUT", f"The deadline of {self.total_seconds:g} s passed.", retryable=True
            )
        sent_headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        sent_headers.update(headers or {})
        with self._pool.checkout() as origins:
            return self._request_on(
                origins, destination, method, sent_headers, body, until=until, secrets=secrets
            )

    def _request_on(
        self,
        origins: _Origins,
        destination: netguard.Destination,
        method: str,
        headers: dict[str, str],
        body: bytes | None,
        *,
        until: float,
        secrets: Sequence[str],
    ) -> Response:
        link = self._link(origins, destination)
        started = time.monotonic()
        deadline = deadlines.Deadline(at=until, cut=link.shutdown)
        keep = False
        try:
            with deadline:
                conn = link.conn
                conn.until = until
                # Every read and write may wait at most until the deadline; the watchdog
                # takes care of a server that is slow without ever going quiet.
                conn.timeout = max(until - time.monotonic(), 0.001)
                conn.request(
                    method,
                    destination.target,
                    body=body,
                    headers=headers,
                    preload_content=False,
                    # No Accept-Encoding is sent, so a server has no reason to compress; a
                    # body that comes compressed anyway is not inflated, so the cap holds.
                    decode_content=False,
                )
                raw = conn.getresponse()
                content, complete = self._read_body(raw, until)
                complete = complete and not deadline.expired
                if not complete:
                    raw.close()
            keep = complete and not deadline.expired and link.is_open
            return Response(
                status=raw.status,
                reason=raw.reason or "",
                headers=raw.headers,
                body=content,
                complete=complete,
                seconds=time.monotonic() - started,
            )
        except HttpChannelError:
            raise
        except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as exc:
            if deadline.passed:
                raise HttpChannelError(
                    "HTTP_TIMEOUT",
                    f"No reply from {destination.host} within {self.total_seconds:g} s.",
                    retryable=True,
                ) from exc
            raise _transport_error(exc, host=destination.host, secrets=secrets) from exc
        finally:
            if not keep:
                origins.links.pop(_origin(destination), None)
                link.discard()

    def _read_body(self, raw: urllib3.BaseHTTPResponse, until: float) -> tuple[bytes, bool]:
        """Read at most max_body_bytes, as it arrives, until the deadline; say whether that
        was the whole body."""
        chunks: list[bytes] = []
        size = 0
        try:
            while size <= self.max_body_bytes and time.monotonic() < until:
                data = raw.read1(min(_READ_SIZE, self.max_body_bytes + 1 - size))
                if not data:
                    return b"".join(chunks), True
                chunks.append(data)
                size += len(data)
        except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError):
            pass  # cut off or dropped: what came is kept, the connection is not
        return b"".join(chunks)[: self.max_body_bytes], False

    def _connect(self, host: str, port: int, *, until: float) -> socket.socket:
        """Resolve host once, check the addresses when guarded, and connect to one of them."""
        guard = self.guard

        def resolve() -> list[netguard.Address]:
            if guard is not None:
                return guard.resolve(host, port)
            return netguard.addresses(host, port)

        left = until - time.monotonic()
        try:
            if netguard.address_literal(host) is not None:
                found = resolve()  # nothing to look up: no thread needed
            else:
                found = resolve_within(resolve, host=host, seconds=min(self.connect_seconds, left))
        except netguard.Refused as exc:
            raise HttpChannelError("UNSAFE_ADDRESS", str(exc), retryable=False) from None
        except socket.gaierror as exc:
            raise HttpChannelError(
                "HTTP_DNS", f"{host} does not resolve: {exc.strerror or exc}", retryable=True
            ) from None
        failure: OSError | None = None
        for address in found:
            left = until - time.monotonic()
            if left <= 0:
                break
            try:
                sock = socket.create_connection(
                    (str(address), port), timeout=min(self.connect_seconds, left)
                )
            except OSError as exc:
                failure = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        why = (failure.strerror or str(failure)) if failure else "no time left"
        raise HttpChannelError(
            "HTTP_CONNECT", f"Cannot connect to {host} port {port}: {why}", retryable=True
        )

    # --- The connections each sender thread keeps --------------------------------------

    def _link(self, origins: _Origins, destination: netguard.Destination) -> _Link:
        """The thread's connection to destination's origin: the kept one when it is still
        open, else a new one (made, not yet connected)."""
        origin = _origin(destination)
        link = origins.links.pop(origin, None)
        # A kept connection the server has closed (or sent something unasked on) since it
        # was last used is readable: it cannot carry a request.
        if link is not None and not (link.is_open and link.conn.is_connected):
            link.discard()
            link = None
        if link is None:
            link = _Link(self._new_connection(destination))
        origins.links[origin] = link
        while len(origins.links) > ORIGINS_PER_THREAD:
            origins.links.pop(next(iter(origins.links))).discard()
        return link

    def _new_connection(
        self, destination: netguard.Destination
    ) -> _PlainConnection | _TLSConnection:
        if destination.scheme == "https":
            if self._ssl_context is None:
                self._ssl_context = ssl.create_default_context()
            conn = _TLSConnection(destination.host, destination.port, ssl_context=self._ssl_context)
        else:
            conn = _PlainConnection(destination.host, destination.port)
        conn.client = self
        return conn

    def open_connections(self) -> int:
        """How many connections the sender threads hold open now."""
        kept = self._pool.items()
        return sum(link.is_open for origins in kept for link in list(origins.links.values()))


def _origin(destination: netguard.Destination) -> tuple[str, str, int]:
    return (destination.scheme, destination.host, destination.port)


def _transport_error(exc: Exception, *, host: str, secrets: Sequence[str]) -> HttpChannelError:
    """Map a failure with no reply to judge: all retryable, since none says the request
    itself was wrong."""
    text = _printable(f"{host}: {type(exc).__name__}: {exc}")
    text = redact(text, secrets=secrets)[:_DETAIL_CHARS]
    if isinstance(exc, ssl.SSLError):
        return HttpChannelError("HTTP_TLS", text, retryable=True)
    if isinstance(exc, TimeoutError):
        return HttpChannelError("HTTP_TIMEOUT", text, retryable=True)
    return HttpChannelError("HTTP_NETWORK", text, retryable=True)
