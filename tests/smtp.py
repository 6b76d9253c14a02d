"""Real SMTP servers on loopback for the email channel: aiosmtpd, and one that never speaks."""

from __future__ import annotations

import asyncio
import email
import socket
import threading
from collections import Counter
from email.message import Message

from aiosmtpd.controller import Controller


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
        self.lock = threading.Lock()
        self.step_delay = 0.0

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        if self.step_delay:
            await asyncio.sleep(self.step_delay)
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
        return "250 Message accepted for delivery"

    def message_ids(self) -> Counter:
        with self.lock:
            return Counter(m["Message-ID"] for m in self.messages)


class SMTPServer:
    def __init__(self) -> None:
        self.mailbox = Mailbox()
        self.port = free_port()
        self.controller = Controller(self.mailbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def mailer(self, *, timeout: float) -> dict:
        """A MAILERS entry that sends here."""
        return {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": self.port, "timeout": timeout},
        }

    def stop(self) -> None:
        self.controller.stop()


class SilentServer:
    """Accepts TCP connections and never says a word: the SMTP greeting never comes."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(conn)

    def stop(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()
