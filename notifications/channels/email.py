"""The email channel: Django's mail framework over SMTP, with a real deadline."""

from __future__ import annotations

import contextlib
import smtplib
import socket
import threading
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, mailers
from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.utils import DNS_NAME
from django.core.validators import validate_email

from notifications.channels.base import AddressSource, Channel, ChannelError, Outgoing, SendResult


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
        smtp = getattr(self.backend, "connection", None)
        sock = getattr(smtp, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> _Deadline:
        self.timer.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.timer.cancel()


class EmailChannel(Channel):
    """Sends through MAILERS["default"] (SMTP in production; EMAIL_TIMEOUT is its timeout)."""

    name = "email"
    address_source = AddressSource.EMAIL
    mailer = "default"

    @property
    def timeout(self) -> float:
        options = settings.MAILERS[self.mailer].get("OPTIONS", {})
        return float(options.get("timeout") or 10)

    @property
    def worst_case(self) -> timedelta:
        # The deadline caps the whole send; a moment more covers closing the socket.
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
            # Builds the headers now: a line break in the subject (or any header) can never
            # be sent, however often it is retried, so it is a permanent failure.
            message.message()
        except ValueError as exc:
            raise ChannelError("BAD_MESSAGE", str(exc), retryable=False) from None
        backend = mailers[self.mailer]
        deadline = _Deadline(backend, self.timeout)
        try:
            with deadline:
                try:
                    backend.open()
                    if deadline.expired:
                        raise TimeoutError("deadline passed while connecting")
                    backend.send_messages([message])
                finally:
                    with contextlib.suppress(Exception):
                        backend.close()
        except ChannelError:
            raise
        except Exception as exc:
            if deadline.expired:
                raise ChannelError(
                    "TIMEOUT", f"No reply within {self.timeout:g} s.", retryable=True
                ) from exc
            raise _classify(exc) from exc
        return SendResult(provider_message_id=message_id)


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
    if isinstance(exc, smtplib.SMTPServerDisconnected | OSError):
        return ChannelError("SMTP_UNAVAILABLE", str(exc) or type(exc).__name__, retryable=True)
    return ChannelError("SMTP_ERROR", f"{type(exc).__name__}: {exc}", retryable=True)


def _from_reply(code: int, text: bytes | str) -> ChannelError:
    return ChannelError(f"SMTP_{code}", _text(text), retryable=400 <= code < 500)


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
