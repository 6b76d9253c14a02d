"""Real SMTP servers on loopback for the email channel: aiosmtpd, and one that never speaks."""

from __future__ import annotations

import asyncio
import email
import socket
import ssl
import subprocess
import threading
from collections import Counter
from email.message import Message
from pathlib import Path

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP

from tests.listener import Listener


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Mailbox:
    """An aiosmtpd handler: accepts mail, except for recipients whose local part says not to.

    busy…@ gets a 451 (try again later), nope…@ a 550 (no such user). With step_delay set,
    the server waits that long before each reply to MAIL, RCPT and DATA: every reply is
    prompt enough for a per-operation timeout, the whole conversation is not.
    """

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.raw: list[bytes] = []  # each message as it came, before any decoding
        self.lock = threading.Lock()
        self.step_delay = 0.0
        # Connections that got as far as MAIL, whether they had switched to TLS, and QUITs.
        self.sessions: list = []
        self.tls_sessions = 0
        self.quits = 0
        # A limit of messages per connection, as some providers have: past it, MAIL gets a
        # 421 and the connection is closed.
        self.per_connection: int | None = None
        # A server that goes away in the middle of a batch: once this many messages have
        # arrived, every connection open then is cut, without a word, at its next MAIL.
        self.drop_after: int | None = None
        # A connection cut in the middle of DATA: the message arrived, its reply never did.
        self.drop_in_data = False
        self._counts: dict[int, int] = {}
        self._doomed: set[int] = set()
        self.dropped = 0  # connections cut by drop_after or drop()
        self.connections = 0  # connections greeted (aiosmtpd's own start-up probe too)
        self.closing = False  # the server is stopping: greet nobody late
        self.transports: list = []
        # Seconds before the greeting of each new connection (a server restarting, Postfix's
        # postscreen): the client has connected, and waits for "220".
        self.greeting_delay = 0.0

    def drop(self) -> None:
        """Cut every connection open now, at its next MAIL."""
        with self.lock:
            self._doomed = {id(s) for s in self.sessions}

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        if self.step_delay:
            await asyncio.sleep(self.step_delay)
        with self.lock:
            if id(session) in self._doomed:
                self._doomed.discard(id(session))
                self.dropped += 1
                server.transport.abort()
                return "421 4.3.2 Gone"  # never sent: the connection is already closed
            if all(s is not session for s in self.sessions):
                self.sessions.append(session)
                self.tls_sessions += session.ssl is not None
            sent_here = self._counts.get(id(session), 0)
        if self.per_connection is not None and sent_here >= self.per_connection:
            asyncio.get_running_loop().call_soon(server.transport.close)
            return "421 4.7.0 Too many messages on one connection, closing"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.step_delay:
            await asyncio.sleep(self.step_delay)
        local = address.split("@", 1)[0]
        if local.startswith("busy"):
            return "451 4.3.0 Mailbox busy, try again later"
        if local.startswith("nope"):
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.step_delay:
            await asyncio.sleep(self.step_delay)
        message = email.message_from_bytes(envelope.content)
        with self.lock:
            self.messages.append(message)
            self.raw.append(envelope.original_content)
            self._counts[id(session)] = self._counts.get(id(session), 0) + 1
            if self.drop_after is not None and len(self.messages) >= self.drop_after:
                self.drop_after = None
                self._doomed = {id(s) for s in self.sessions}
            if self.drop_in_data:
                self.drop_in_data = False
                server.transport.abort()
        return "250 Message accepted for delivery"

    async def handle_QUIT(self, server, session, envelope):
        with self.lock:
            self.quits += 1
        return "221 Bye"

    def message_ids(self) -> Counter:
        with self.lock:
            return Counter(m["Message-ID"] for m in self.messages)


class _Greeter(SMTP):
    """aiosmtpd's server, which waits the mailbox's greeting_delay before saying 220."""

    async def push(self, status: str) -> None:
        if status.startswith("220 ") and self.session.host_name is None:  # the greeting
            mailbox = self.event_handler
            with mailbox.lock:
                mailbox.connections += 1
                mailbox.transports.append(self.transport)
            waited = 0.0
            while waited < mailbox.greeting_delay and not mailbox.closing:
                await asyncio.sleep(0.05)  # in steps, so that stopping the server need not wait
                waited += 0.05
        await super().push(status)


class _Controller(Controller):
    def factory(self):
        return _Greeter(self.handler, **self.SMTP_kwargs)


class SMTPServer:
    """aiosmtpd on a free loopback port; with tls_context, it insists on STARTTLS, or with
    implicit_tls too, speaks TLS from the first byte (port 465's way, EMAIL_USE_SSL)."""

    def __init__(
        self, *, tls_context: ssl.SSLContext | None = None, implicit_tls: bool = False
    ) -> None:
        self.mailbox = Mailbox()
        self.port = free_port()
        if tls_context is None:
            tls = {}
        elif implicit_tls:
            tls = {"ssl_context": tls_context}
        else:
            tls = {"tls_context": tls_context, "require_starttls": True}
        self.controller = _Controller(self.mailbox, hostname="127.0.0.1", port=self.port, **tls)
        self.controller.start()

    def mailer(self, *, timeout: float, **options) -> dict:
        """A MAILERS entry that sends here."""
        return {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": self.port, "timeout": timeout, **options},
        }

    def stop(self) -> None:
        # Cut what is still connected first: since Python 3.12, aiosmtpd's stop waits for
        # every connection to close, which a client stuck mid-greeting would make take
        # aiosmtpd's idle timeout (5 minutes).
        self.mailbox.closing = True
        with self.mailbox.lock:
            transports = list(self.mailbox.transports)
        self.controller.loop.call_soon_threadsafe(lambda: [t.abort() for t in transports])
        self.controller.stop()


class SilentServer(Listener):
    """Accepts TCP connections and never says a word: the SMTP greeting never comes."""

    def __init__(self) -> None:
        self.held: list[socket.socket] = []
        super().__init__()

    def take(self, conn: socket.socket) -> None:
        self.held.append(conn)

    def stop(self) -> None:
        super().stop()
        for conn in self.held:
            conn.close()


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by itself, and its key (openssl, a day's validity)."""
    certificate, key = folder / "smtp.crt", folder / "smtp.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(certificate)],
        check=True,
        capture_output=True,
    )
    return certificate, key
