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

An email of a category the recipient may turn off carries RFC 8058's one-click unsubscribe
(List-Unsubscribe and List-Unsubscribe-Post: the link the drain puts on Outgoing, signed by
recipients/tokens.py on SITE_ORIGIN) and a footer that says how to choose; a required one
(security) carries neither.
See docs/unsubscribe.md.
"""

from __future__ import annotations

import contextlib
import email.errors
import email.policy
import functools
import re
import smtplib
import socket
import ssl
import time
from dataclasses import dataclass
from datetime import timedelta
from email.charset import QP, Charset
from email.header import Header
from email.mime.text import MIMEText
from email.utils import formataddr, formatdate, parseaddr

from django.conf import settings
from django.core import checks
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage, mailers
from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.backends.smtp import EmailBackend as SMTPBackend
from django.core.mail.utils import DNS_NAME
from django.core.validators import validate_email
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core.origins import ascii_origin
from transports import deadlines, pools
from transports.base import (
    AddressSource,
    Channel,
    ChannelError,
    Outgoing,
    QuietHours,
    SendResult,
)

# Close a connection nobody has used for this long. Servers drop idle clients after a while
# themselves (RFC 5321 suggests 5 minutes; providers are often quicker); closing first, with
# a QUIT, is politer than leaving them to it, and keeps no socket open on a quiet queue.
IDLE_SECONDS = 30.0
# The longest a QUIT may take when a connection is closed for being idle or at shutdown.
CLOSE_SECONDS = 2.0


class _Deadline(deadlines.Deadline):
    """A send's deadline, which cuts the backend's connection and one on its way to it."""

    def __init__(self, backend: BaseEmailBackend, seconds: float) -> None:
        self.backend = backend
        self.opening: smtplib.SMTP | None = None  # a connection on its way to the backend
        super().__init__(at=time.monotonic() + seconds, cut=self._shut)

    def _shut(self) -> None:
        for smtp in (getattr(self.backend, "connection", None), self.opening):
            sock = getattr(smtp, "sock", None)
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


# What smtplib raises for a server's reply, as opposed to a failure to get one.
_REPLIES = (smtplib.SMTPResponseException, smtplib.SMTPRecipientsRefused)


class _Dropped(Exception):
    """The connection was found closed before the server was handed the message."""


class EmailChannel(pools.Keeper, Channel):
    """Sends through MAILERS["default"] (SMTP in production; EMAIL_TIMEOUT is its timeout)."""

    name = "email"
    label = gettext_lazy("Email")
    label_in_sentence = gettext_lazy("email")
    address_source = AddressSource.EMAIL
    # An email waits in an inbox: quiet hours hold it only when the recipient asks.
    quiet_hours = QuietHours.WHEN_ASKED
    offers_unsubscribe = True
    mailer = "default"
    idle_seconds = IDLE_SECONDS

    def check(self) -> list[checks.CheckMessage]:
        """Every email goes out from DEFAULT_FROM_EMAIL: one that is not an address would fail
        them all, so it stops start-up instead."""
        try:
            sender_of(settings.DEFAULT_FROM_EMAIL)
        except ValueError as exc:
            return [
                checks.Error(
                    f"DEFAULT_FROM_EMAIL: {exc}",
                    hint='An address, or a name and an address: "v10r <noreply@example.com>".',
                    obj=type(self),
                    id="transports.E010",
                )
            ]
        return super().check()

    def __init__(self) -> None:
        # Each sender thread's mail backend, and the connection it keeps open.
        self._pool = pools.Pool(make=lambda: mailers[self.mailer], close=_close)

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
        list_headers, footer = _unsubscribing(outgoing)
        if footer:
            body = f"{body}\n\n{footer}"
        try:
            # Built now, before any connection: a line break in the subject can never be
            # sent, however often it is retried, so it is a permanent failure.
            letter = _compose(
                subject=outgoing.subject,
                body=body,
                to=outgoing.address,
                message_id=message_id,
                language=outgoing.language,
                extra_headers=list_headers,
            )
        except (ValueError, email.errors.MessageError) as exc:
            raise ChannelError("BAD_MESSAGE", str(exc), retryable=False) from None

        # Another MAILERS entry means another server: a connection to the old one is no use.
        with self._pool.checkout(key=repr(settings.MAILERS[self.mailer])) as backend:
            self._send_within_deadline(backend, letter)
        return SendResult(provider_message_id=message_id)

    def _send_within_deadline(self, backend: BaseEmailBackend, letter: _Letter) -> None:
        deadline = _Deadline(backend, self.timeout)
        keep = False
        try:
            with deadline:
                keep = self._send_on(backend, letter, deadline)
            # Expired just as the server said yes: the email is sent, but the watchdog has
            # shut the socket down.
            keep = keep and not deadline.expired
        except ChannelError:
            raise
        except Exception as exc:
            keep = _still_usable(backend, exc) and not deadline.expired
            # A reply (a refusal) says what it says even at the last moment; anything else
            # once the time is up is the deadline's, though smtplib may call a socket
            # timeout a disconnection.
            answered = isinstance(exc, _REPLIES)
            if deadline.expired or (deadline.passed and not answered):
                raise ChannelError(
                    "TIMEOUT", f"No reply within {self.timeout:g} s.", retryable=True
                ) from exc
            raise _classify(exc) from exc
        finally:
            if not keep:
                _discard(backend)

    def _send_on(self, backend: BaseEmailBackend, letter: _Letter, deadline: _Deadline) -> bool:
        """Send on the backend's connection, opening one when needed; return whether the
        connection may be kept."""
        if not isinstance(backend, SMTPBackend):
            # Another kind of mailer (the console, a file, a provider's API): Django's way.
            backend.send_messages([letter.as_django_message()])
            return True
        reused = backend.connection is not None
        if not reused:
            _open(backend, deadline, timeout=self.timeout)
        try:
            _transmit(backend.connection, letter)
        except _Dropped as dropped:
            if not reused or deadline.expired:
                raise dropped.__cause__ or smtplib.SMTPServerDisconnected("closed") from None
            # The server closed the connection we kept while it was idle: nothing of this
            # message reached it. Once more, on a new connection, within the same deadline.
            _discard(backend)
            _open(backend, deadline, timeout=self.timeout)
            try:
                _transmit(backend.connection, letter)
            except _Dropped as again:
                raise again.__cause__ or smtplib.SMTPServerDisconnected("closed") from None
        return True

    def open_connections(self) -> int:
        """How many connections the sender threads hold open now."""
        return sum(1 for b in self._pool.items() if getattr(b, "connection", None))


@dataclass(frozen=True)
class _Letter:
    """One message as SMTP carries it: the envelope's addresses and the bytes after DATA."""

    sender: str
    recipient: str
    content: bytes
    # What Django's EmailMessage needs, for a mailer that is not SMTP.
    subject: str
    body: str
    headers: dict[str, str]

    def as_django_message(self) -> EmailMessage:
        return EmailMessage(
            subject=self.subject,
            body=self.body,
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[self.recipient],
            headers=self.headers,
        )


# Quoted-printable for the body and encoded words for headers: text in any language, as
# 7-bit lines no server can reject, and still readable where it is ASCII.
_UTF8 = Charset("utf-8")
_UTF8.header_encoding = QP
_UTF8.body_encoding = QP
_CRLF = email.policy.compat32.clone(linesep="\r\n")


def _compose(
    *,
    subject: str,
    body: str,
    to: str,
    message_id: str,
    language: str,
    extra_headers: dict[str, str] | None = None,
) -> _Letter:
    """Build the message: a single text/plain part in UTF-8.

    Not through Django's EmailMessage: since Django 6 it builds with the email package's
    newer API, which parses every header it is given, and that took 1.3 ms a message on
    this project's benchmark machine, more than the rest of a send on a kept connection.
    The package's older API (the one Django 5 built with) makes the same message in about a
    sixth of the time; what it does not check, this does.
    """
    from_header, sender = sender_of(settings.DEFAULT_FROM_EMAIL)
    recipient = _ascii_address(to)
    message = MIMEText(body, "plain", _UTF8)
    message["Subject"] = _header_text(subject, "Subject")
    message["From"] = from_header
    message["To"] = recipient
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = message_id
    message["Content-Language"] = language
    content = message.as_bytes(policy=_CRLF)
    headers = {"Message-ID": message_id, "Content-Language": language}
    if extra_headers:
        # ASCII made by _unsubscribing, each value one URL or token and no line break, and
        # written unfolded after the others: the package would fold a value longer than a
        # line before its first character, leaving "List-Unsubscribe: " alone on a line.
        # A line of a few hundred characters at most (SITE_ORIGIN's host and the link's
        # path) stays well within SMTP's 998.
        lines = b"".join(
            f"{name}: {value}\r\n".encode("ascii") for name, value in extra_headers.items()
        )
        end = content.index(b"\r\n\r\n") + 2
        content = content[:end] + lines + content[end:]
        headers.update(extra_headers)
    return _Letter(
        sender=sender,
        recipient=recipient,
        content=content,
        subject=subject,
        body=body,
        headers=headers,
    )


# RFC 8058: the POST a mail provider sends to the List-Unsubscribe link when its reader clicks
# "Unsubscribe", with this as its whole body.
ONE_CLICK = "List-Unsubscribe=One-Click"


def _unsubscribing(outgoing: Outgoing) -> tuple[dict[str, str], str]:
    """The List-Unsubscribe headers and the body's footer for outgoing: none of either when
    the recipient may not stop its category (a required one: the drain then gives no
    category_label); no headers, and a footer without links, when the drain could make no
    link (the site has no SITE_ORIGIN)."""
    if not outgoing.category_label:
        return {}, ""
    if not outgoing.unsubscribe_url:
        return {}, _footer_without_links(outgoing.language)
    before, after = _footer_parts(
        language=outgoing.language,
        category_label=outgoing.category_label,
        origin=settings.SITE_ORIGIN,
        urlconf=settings.ROOT_URLCONF,
    )
    link = outgoing.unsubscribe_url
    headers = {"List-Unsubscribe": f"<{link}>", "List-Unsubscribe-Post": ONE_CLICK}
    return headers, f"{before}{link}{after}"


# "-- " on a line of its own: RFC 3676's signature separator, which mail readers show apart
# from the message (and leave out of a reply's quote).
SIGNATURE = "-- \n"
# Where the link goes in what _footer_parts makes: a NUL, which neither a translation nor a
# URL reverse() makes can hold (it quotes one as %00).
_LINK = "\x00"


@functools.lru_cache(maxsize=64)
def _footer_parts(
    *, language: str, category_label: str, origin: str, urlconf: str
) -> tuple[str, str]:
    """The footer around the unsubscribe link, in language: (before, after). The preference
    centre's link is under the language's prefix, the page's."""
    origin = ascii_origin(origin)
    with translation.override(language):
        footer = "\n".join(
            (
                _("Stop “%(category)s” emails: %(link)s")
                % {"category": category_label, "link": _LINK},
                _("Choose which emails you get: %(link)s")
                % {"link": origin + reverse("accounts:preferences")},
            )
        )
    before, after = footer.split(_LINK)
    return SIGNATURE + before, after


@functools.lru_cache(maxsize=8)
def _footer_without_links(language: str) -> str:
    with translation.override(language):
        return SIGNATURE + _(
            "To choose which emails you get, sign in and open your notification settings."
        )


# What would end a header line early: every line break str.splitlines() knows (the email
# package folds and unfolds with it), and the other control characters, which no header may
# carry. A tab is whitespace, and allowed.
_NOT_IN_HEADERS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")
# RFC 2047's limit for one encoded word, and so about the longest word a header line can
# hold without breaking SMTP's 998: a longer one, or any non-ASCII text, goes as encoded words.
_LONGEST_WORD = 75


def _header_text(text: str, name: str) -> str | Header:
    """text as a header's value, or a ValueError naming the character that cannot be in it."""
    if found := _NOT_IN_HEADERS.search(text):
        raise ValueError(
            f"{name} contains {found.group()!r}: header values may not contain line breaks "
            "or other control characters (such as a linefeed or carriage return)"
        )
    # Plain ASCII goes as it is, unless it holds what a reader would decode as an encoded
    # word ("=?utf-8?q?...?="): a name chosen to look like another subject is encoded, so it
    # is shown as typed.
    if (
        text.isascii()
        and "=?" not in text
        and all(len(word) <= _LONGEST_WORD for word in text.split())
    ):
        return text
    return Header(text, _UTF8, header_name=name)


@functools.lru_cache(maxsize=8)
def sender_of(from_email: str) -> tuple[str | Header, str]:
    """from_email (DEFAULT_FROM_EMAIL) as a From header and as the envelope's sender; a
    ValueError that says why when it is not an address (a system check calls this)."""
    if _NOT_IN_HEADERS.search(from_email):
        raise ValueError(f"{from_email!r} contains a line break or another control character.")
    name, address = parseaddr(from_email)
    if "@" not in address:
        raise ValueError(f"{from_email!r} is not an email address (name <user@domain>).")
    address = _ascii_address(address)
    if name.isascii() and all(len(word) <= _LONGEST_WORD for word in name.split()):
        return formataddr((name, address)), address
    header = Header(name, _UTF8, header_name="From")
    header.append(f"<{address}>", "us-ascii")
    return header, address


def _ascii_address(address: str) -> str:
    """The address as SMTP needs it: an internationalised domain in its ASCII (IDNA) form."""
    if address.isascii():
        return address
    local, _, domain = address.rpartition("@")
    if not local.isascii():
        raise ValueError(f"{address!r}: a non-ASCII local part needs SMTPUTF8, not supported")
    return f"{local}@{domain.encode('idna').decode('ascii')}"


def _transmit(connection: smtplib.SMTP, letter: _Letter) -> None:
    """MAIL, RCPT and DATA for one message on an open connection.

    Raises _Dropped when the connection proves closed before DATA: up to there the server
    holds nothing of this message, so sending it again elsewhere cannot make a duplicate.
    A refusal is raised as smtplib's exception, after a RSET that leaves the connection
    ready for the next message.
    """
    sender, content = letter.sender, letter.content
    try:
        connection.ehlo_or_helo_if_needed()
        options = [f"size={len(content)}"] if connection.has_extn("size") else []
        code, reply = connection.mail(sender, options)
        if code == 421:  # the server is closing the connection
            raise _Dropped from smtplib.SMTPSenderRefused(code, reply, sender)
        if code != 250:
            _reset(connection)
            raise smtplib.SMTPSenderRefused(code, reply, sender)
        code, reply = connection.rcpt(letter.recipient)
        if code == 421:
            raise _Dropped from smtplib.SMTPRecipientsRefused({letter.recipient: (code, reply)})
        if code not in (250, 251):
            _reset(connection)
            raise smtplib.SMTPRecipientsRefused({letter.recipient: (code, reply)})
    except (smtplib.SMTPServerDisconnected, ConnectionError) as exc:
        raise _Dropped from exc
    code, reply = connection.data(content)
    if code != 250:
        _reset(connection)
        raise smtplib.SMTPDataError(code, reply)


def _open(backend: SMTPBackend, deadline: _Deadline, *, timeout: float) -> None:
    """What backend.open() does, inside the deadline: connecting may take at most the time
    the message has left, and from the greeting on, the watchdog can cut the connection.

    Not backend.open() itself: it makes and connects the smtplib client in one call, so the
    greeting is awaited before anything outside it holds the client (the watchdog could not
    cut a server that greets a byte at a time), with the whole EMAIL_TIMEOUT to connect
    rather than the time the message has left; and until AUTH is done it keeps the client
    in a private attribute (_partial_connection). Its one hook, connection_class, is not
    documented, and overriding it would take a backend subclass named in MAILERS, which a
    site's settings may not name (whatever else sends Django mail, mail_admins or another
    app's send_mail, goes through the same entry). So its steps are done here, through
    smtplib's public API: a client whose connect() the deadline sees (_within_deadline),
    then STARTTLS and AUTH as Django does them. timeout is each socket operation's: the
    channel's, which is 10 s where OPTIONS has none (Django would leave the socket
    blocking).
    """
    options = {"local_hostname": DNS_NAME.get_fqdn(), "timeout": timeout}
    if backend.use_ssl:
        options["context"] = backend.ssl_context
    # Given the host, smtplib's constructor connects at once (and remembers the host, which
    # the certificate is checked against): the deadline learns of the client in connect().
    smtp_class = _within_deadline(backend.connection_class)
    smtp = None
    try:
        smtp = smtp_class(backend.host, backend.port, deadline=deadline, **options)
        deadline.check()
        if backend.use_tls and not backend.use_ssl:
            smtp.starttls(context=backend.ssl_context)
        if backend.username and backend.password:
            smtp.login(backend.username, backend.password)
        deadline.check()
    except BaseException:
        # A client whose constructor failed is known to the deadline alone.
        for client in (smtp, deadline.opening):
            if client is not None:
                client.close()
        raise
    finally:
        deadline.opening = None
    backend.connection = smtp


class _Connecting:
    """An smtplib client that tells the send's deadline about itself as it connects.

    smtplib's constructor calls connect() when it is given a host, as its documentation
    says: overriding that public method is the way in between making the client and
    waiting for its greeting.
    """

    def __init__(self, *args, deadline: _Deadline, **kwargs) -> None:
        self.deadline = deadline
        super().__init__(*args, **kwargs)

    def connect(
        self, host: str = "localhost", port: int = 0, source_address: tuple[str, int] | None = None
    ):
        # The watchdog shuts down the socket as soon as smtplib has one, greeting included.
        self.deadline.opening = self
        # Connecting (and, on implicit TLS, the handshake) and the greeting may take only
        # the time left; every later read and write gets the whole timeout, and the
        # deadline bounds their sum.
        timeout = self.timeout
        self.timeout = max(min(timeout, self.deadline.left()), 0.001)
        try:
            return super().connect(host, port, source_address)
        finally:
            self.timeout = timeout
            if self.sock is not None:
                self.sock.settimeout(timeout)


@functools.cache
def _within_deadline(smtp_class: type[smtplib.SMTP]) -> type[smtplib.SMTP]:
    """The backend's connection_class (smtplib.SMTP, or SMTP_SSL for implicit TLS), with
    _Connecting's connect()."""
    return type(smtp_class.__name__, (_Connecting, smtp_class), {})


def _reset(connection: smtplib.SMTP) -> None:
    # A failed RSET leaves the connection closed (smtplib closes it): _still_usable sees that.
    with contextlib.suppress(smtplib.SMTPException, OSError):
        connection.rset()


def _still_usable(backend: BaseEmailBackend, exc: Exception) -> bool:
    """Whether the connection may carry the next message after exc: only a plain refusal
    (4xx or 5xx, not 421) on a connection that is still open."""
    smtp = getattr(backend, "connection", None)
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = {code for code, _ in exc.recipients.values()}
    elif isinstance(exc, smtplib.SMTPResponseException):
        codes = {exc.smtp_code}
    else:
        return False
    return 421 not in codes and smtp is not None and getattr(smtp, "sock", None) is not None


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
