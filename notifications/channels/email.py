"""The email channel: Django's mail framework over SMTP, with a real deadline per message.

Each sender thread keeps its own SMTP connection open from one message to the next, and from
one batch to the next, so a busy queue pays the connect, EHLO, STARTTLS and AUTH once per
thread rather than once per email. The worker closes connections that have been idle for
IDLE_SECONDS, and all of them when it stops.

A kept connection can turn out to be closed when it is next used: the server had an idle
timeout, or a limit of messages per connection, or went away. When that shows before the
server has been handed the message (before DATA), the message goes again, once, on a new
connection and within the same deadline; that is not the message's failure, and it cannot
make a duplicate. A connection that breaks during or after DATA is a retryable failure like
any other, since the server may have the message.
"""

from __future__ import annotations

import contextlib
import email.policy
import smtplib
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, mailers
from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.backends.smtp import EmailBackend as SMTPBackend
from django.core.mail.utils import DNS_NAME
from django.core.validators import validate_email

from notifications.channels.base import AddressSource, Channel, ChannelError, Outgoing, SendResult

# Close a connection nobody has used for this long. Servers drop idle clients after a while
# themselves (RFC 5321 suggests 5 minutes; providers are often quicker); closing first, with
# a QUIT, is politer than leaving them to it, and keeps no socket open on a quiet queue.
IDLE_SECONDS = 30.0
# The longest a QUIT may take when a connection is closed for being idle or at shutdown.
CLOSE_SECONDS = 2.0


class _Deadline:
    """Cut an SMTP conversation off after a total time, not just per socket operation.

    smtplib's timeout bounds each read and write; a server that answers slowly, line by line,
    could hold a send far longer. When the deadline passes, the socket is shut down from a
    timer thread, so whatever call is blocked on it fails at once.
    """

    def __init__(self, backend: BaseEmailBackend, seconds: float) -> None:
        self.backend = backend
        self.expired = False
        self.timer = threading.Timer(seconds, self._expire)
        self.timer.daemon = True

    def _expire(self) -> None:
        self.expired = True
        # While connecting, STARTTLS or AUTH, the backend holds the connection aside.
        for name in ("connection", "_partial_connection"):
            sock = getattr(getattr(self.backend, name, None), "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def check(self) -> None:
        if self.expired:
            raise TimeoutError("deadline passed while connecting")

    def __enter__(self) -> _Deadline:
        self.timer.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.timer.cancel()


class _Dropped(Exception):
    """The connection was found closed before the server was handed the message."""


@dataclass
class _Session:
    """One sender thread's mail backend, and the connection it keeps open."""

    backend: BaseEmailBackend
    config: str  # the MAILERS entry it was made from: another entry means another session
    last_used: float
    busy: bool = False


class EmailChannel(Channel):
    """Sends through MAILERS["default"] (SMTP in production; EMAIL_TIMEOUT is its timeout)."""

    name = "email"
    address_source = AddressSource.EMAIL
    mailer = "default"

    def __init__(self) -> None:
        self._sessions: dict[int, _Session] = {}  # by sender thread
        self._lock = threading.Lock()

    @property
    def timeout(self) -> float:
        options = settings.MAILERS[self.mailer].get("OPTIONS", {})
        return float(options.get("timeout") or 10)

    @property
    def worst_case(self) -> timedelta:
        # The deadline caps the whole send, a reconnection included; a moment more covers
        # closing the socket.
        return timedelta(seconds=self.timeout + 1)

    def send(self, outgoing: Outgoing) -> SendResult:
        if not outgoing.address:
            raise ChannelError("NO_RECIPIENT", "The user has no email address.", retryable=False)
        try:
            validate_email(outgoing.address)
        except ValidationError:
            raise ChannelError(
                "BAD_ADDRESS", f"{outgoing.address!r} is not an email address.", retryable=False
            ) from None

        # Stable per delivery, so a retry after a lost reply carries the same Message-ID and
        # the receiving side can tell it is the same message.
        message_id = f"<delivery-{outgoing.delivery_id}@{DNS_NAME}>"
        body = outgoing.body
        if outgoing.action_url:
            body = f"{body}\n\n{outgoing.action_url}"
        message = EmailMessage(
            subject=outgoing.subject,
            body=body,
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[outgoing.address],
            headers={"Message-ID": message_id, "Content-Language": outgoing.language},
        )
        try:
            # Builds the message now, once: a line break in the subject (or any header) can
            # never be sent, however often it is retried, so it is a permanent failure.
            content = message.message(policy=email.policy.SMTP).as_bytes()
        except ValueError as exc:
            raise ChannelError("BAD_MESSAGE", str(exc), retryable=False) from None

        session = self._checkout()
        deadline = _Deadline(session.backend, self.timeout)
        keep = False
        try:
            with deadline:
                keep = self._send_on(session, message, content, deadline)
        except ChannelError:
            raise
        except Exception as exc:
            keep = _still_usable(session.backend, exc) and not deadline.expired
            if deadline.expired:
                raise ChannelError(
                    "TIMEOUT", f"No reply within {self.timeout:g} s.", retryable=True
                ) from exc
            raise _classify(exc) from exc
        finally:
            self._checkin(session, keep=keep)
        return SendResult(provider_message_id=message_id)

    def _send_on(
        self, session: _Session, message: EmailMessage, content: bytes, deadline: _Deadline
    ) -> bool:
        """Send on the session's connection, opening one when needed; return whether the
        connection may be kept."""
        backend = session.backend
        if not isinstance(backend, SMTPBackend):
            # Another kind of mailer (the console, a file, a provider's API): its own way.
            backend.send_messages([message])
            return True
        reused = backend.connection is not None
        if not reused:
            _open(backend, deadline)
        sender = backend.prep_address(message.from_email)
        recipients = [backend.prep_address(address) for address in message.recipients()]
        try:
            _transmit(backend.connection, sender, recipients, content)
        except _Dropped as dropped:
            if not reused or deadline.expired:
                raise dropped.__cause__ or smtplib.SMTPServerDisconnected("closed") from None
            # The server closed the connection we kept while it was idle: nothing of this
            # message reached it. Once more, on a new connection, within the same deadline.
            _discard(backend)
            _open(backend, deadline)
            try:
                _transmit(backend.connection, sender, recipients, content)
            except _Dropped as again:
                raise again.__cause__ or smtplib.SMTPServerDisconnected("closed") from None
        return True

    # --- The connections each sender thread keeps ------------------------------------------

    def _checkout(self) -> _Session:
        thread = threading.get_ident()
        config = repr(settings.MAILERS[self.mailer])
        stale = None
        with self._lock:
            session = self._sessions.get(thread)
            if session is not None and session.config != config:
                # The settings changed under us (a test, a reload): a connection to the old
                # server is no use.
                stale, session = self._sessions.pop(thread), None
            if session is None:
                session = _Session(mailers[self.mailer], config, time.monotonic())
                self._sessions[thread] = session
            session.busy = True
        if stale is not None:
            _close(stale.backend)
        return session

    def _checkin(self, session: _Session, *, keep: bool) -> None:
        if not keep:
            _discard(session.backend)
        with self._lock:
            session.busy = False
            session.last_used = time.monotonic()

    def close_idle(self) -> None:
        """Close the connections no sender has used for IDLE_SECONDS."""
        self._close_where(lambda s: time.monotonic() - s.last_used >= IDLE_SECONDS)

    def close(self) -> None:
        """Close every connection not in use: the worker is stopping."""
        self._close_where(lambda s: True)

    def _close_where(self, test) -> None:
        with self._lock:
            closing = [t for t, s in self._sessions.items() if not s.busy and test(s)]
            sessions = [self._sessions.pop(t) for t in closing]
        for session in sessions:
            _close(session.backend)

    def open_connections(self) -> int:
        """How many connections the sender threads hold open now."""
        with self._lock:
            return sum(1 for s in self._sessions.values() if getattr(s.backend, "connection", None))


def _transmit(connection: smtplib.SMTP, sender: str, recipients: list[str], content: bytes):
    """MAIL, RCPT and DATA for one message on an open connection.

    Raises _Dropped when the connection proves closed before DATA: up to there the server
    holds nothing of this message, so sending it again elsewhere cannot make a duplicate.
    A refusal is raised as smtplib's exception, after a RSET that leaves the connection
    ready for the next message.
    """
    try:
        connection.ehlo_or_helo_if_needed()
        options = [f"size={len(content)}"] if connection.has_extn("size") else []
        code, reply = connection.mail(sender, options)
        if code == 421:  # the server is closing the connection
            raise _Dropped from smtplib.SMTPSenderRefused(code, reply, sender)
        if code != 250:
            _reset(connection)
            raise smtplib.SMTPSenderRefused(code, reply, sender)
        refused = {}
        for recipient in recipients:
            code, reply = connection.rcpt(recipient)
            if code == 421:
                raise _Dropped from smtplib.SMTPRecipientsRefused({recipient: (code, reply)})
            if code not in (250, 251):
                refused[recipient] = (code, reply)
        if len(refused) == len(recipients):
            _reset(connection)
            raise smtplib.SMTPRecipientsRefused(refused)
    except (smtplib.SMTPServerDisconnected, ConnectionError) as exc:
        raise _Dropped from exc
    code, reply = connection.data(content)
    if code != 250:
        _reset(connection)
        raise smtplib.SMTPDataError(code, reply)


def _open(backend: SMTPBackend, deadline: _Deadline) -> None:
    backend.open()
    deadline.check()


def _reset(connection: smtplib.SMTP) -> None:
    # A failed RSET leaves the connection closed (smtplib closes it): _still_usable sees that.
    with contextlib.suppress(smtplib.SMTPException, OSError):
        connection.rset()


def _still_usable(backend: BaseEmailBackend, exc: Exception) -> bool:
    """Whether the connection may carry the next message after exc: only a plain refusal
    (4xx or 5xx, not 421) on a connection that is still open."""
    smtp = getattr(backend, "connection", None)
    return (
        isinstance(exc, smtplib.SMTPResponseException | smtplib.SMTPRecipientsRefused)
        and getattr(exc, "smtp_code", None) != 421
        and smtp is not None
        and getattr(smtp, "sock", None) is not None
    )


def _discard(backend: BaseEmailBackend) -> None:
    """Forget a connection that cannot be trusted any more, without talking to the server."""
    smtp = getattr(backend, "connection", None)
    if smtp is not None:
        with contextlib.suppress(Exception):
            smtp.close()
        backend.connection = None


def _close(backend: BaseEmailBackend) -> None:
    """Say QUIT and close, within CLOSE_SECONDS."""
    with _Deadline(backend, CLOSE_SECONDS), contextlib.suppress(Exception):
        backend.close()
    _discard(backend)


def _classify(exc: Exception) -> ChannelError:
    """Map what smtplib raised to retryable (4xx, network, timeout) or not (5xx)."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, text = next(iter(exc.recipients.values()))
        return _from_reply(code, text)
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        # Our credentials, not the recipient: a system fault worth retrying once it is fixed.
        return ChannelError("SMTP_AUTH", _text(exc.smtp_error), retryable=True)
    if isinstance(exc, smtplib.SMTPResponseException):
        return _from_reply(exc.smtp_code, exc.smtp_error)
    if isinstance(exc, TimeoutError | socket.timeout):
        return ChannelError("TIMEOUT", str(exc) or "timed out", retryable=True)
    if isinstance(exc, ssl.SSLError):
        return ChannelError("SMTP_TLS", str(exc), retryable=True)
    if isinstance(exc, smtplib.SMTPServerDisconnected | OSError):
        return ChannelError("SMTP_UNAVAILABLE", str(exc) or type(exc).__name__, retryable=True)
    return ChannelError("SMTP_ERROR", f"{type(exc).__name__}: {exc}", retryable=True)


def _from_reply(code: int, text: bytes | str) -> ChannelError:
    return ChannelError(f"SMTP_{code}", _text(text), retryable=400 <= code < 500)


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
