"""A recipient's inbox: the notifications the in-app channel delivered, newest first.

Every function takes the user whose inbox it reads or changes, and every statement filters by
that user, so one user's id in another's request finds nothing (the views answer 404). The
inbox is the rows with inbox_at set and archived_at empty; two partial indexes serve it
(notifications/models.py): pages walk notifications_inbox by (inbox_at, id) from a cursor,
so the hundredth page costs what the first does, and the unread count reads
notifications_inbox_unread, up to UNREAD_CAP rows.

Nothing here is rendered when it is stored: each entry is rendered in the language of the page
that lists it, as the drain renders a delivery in its recipient's.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.db import connection
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from notifications.models import DatabaseNow, Notification
from recipients import catalogue

# Entries on one page.
PAGE_SIZE = 20
# The unread count stops here; the badge then says "99+". Counting further would read the
# rest of a long unread tail for a number nobody reads exactly.
UNREAD_CAP = 99

IN_INBOX = Q(inbox_at__isnull=False, archived_at__isnull=True)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# What str() writes, and nothing else: uuid.UUID(hex=…) would also take braces, dashes,
# "urn:uuid:" and non-ASCII digits (re.ASCII keeps \d to 0-9).
_DIGITS = re.compile(r"\d{1,17}", re.ASCII)
_HEX_ID = re.compile(r"[0-9a-f]{32}")
_MICROSECOND = timedelta(microseconds=1)


class BadCursor(ValueError):
    """A cursor that this module did not write: the page asked for does not exist."""


@dataclass(frozen=True, order=True)
class Cursor:
    """A place in the inbox's order: (inbox_at, id), both descending."""

    inbox_at: datetime
    id: uuid.UUID

    def __str__(self) -> str:
        # Microseconds since the epoch, then the id: plain text, safe in a query string.
        micros = (self.inbox_at - _EPOCH) // _MICROSECOND
        return f"{micros}.{self.id.hex}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """The cursor str() wrote, or BadCursor saying what is wrong with text."""
        micros, dot, hex_id = text.partition(".")
        if not dot or not _DIGITS.fullmatch(micros) or not _HEX_ID.fullmatch(hex_id):
            raise BadCursor("The page's position is not one this site wrote.")
        try:
            moment = _EPOCH + int(micros) * _MICROSECOND
            return cls(moment, uuid.UUID(hex=hex_id))
        except (ValueError, OverflowError, OSError):
            raise BadCursor("The page's position is not one this site wrote.") from None


@dataclass(frozen=True)
class Entry:
    """One notification as the inbox shows it, rendered in one language."""

    id: uuid.UUID
    subject: str
    body: str
    action_url: str
    inbox_at: datetime
    read: bool

    @property
    def cursor(self) -> Cursor:
        return Cursor(self.inbox_at, self.id)

    @property
    def link(self) -> str:
        """action_url when a page may make it a link, else "" (see safe_link)."""
        return safe_link(self.action_url)


def safe_link(url: str) -> str:
    """url when it is a relative address (this site) or an http(s) one, else "".

    action_url is stored as the sender gave it; a javascript: or data: address in an href
    would run when clicked, and "//host" or "/\\host" leave the site while looking relative.
    Whitespace and control characters, which browsers strip before reading a scheme, refuse
    the whole address rather than being guessed around."""
    if not url or not url.isprintable() or url != url.strip() or "\\" in url:
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme in ("http", "https") and parts.netloc:
        return url
    if not parts.scheme and not parts.netloc and not url.startswith("//"):
        return url
    return ""


@dataclass(frozen=True)
class Page:
    entries: tuple[Entry, ...]
    # Where the next (older) page starts; None on the last page.
    next: Cursor | None


def _entry(row: Mapping[str, Any], language: str) -> Entry:
    rendered = catalogue.render_or_key(
        key=row["message_key"], params=row["message_params"], language=language
    )
    return Entry(
        id=row["id"],
        subject=rendered.subject,
        body=rendered.body,
        action_url=row["action_url"],
        inbox_at=row["inbox_at"],
        read=row["read_at"] is not None,
    )


_FIELDS = ("id", "message_key", "message_params", "action_url", "inbox_at", "read_at")


def _in_inbox(user):
    return Notification.objects.filter(IN_INBOX, user=user)


def _older_than(cursor: Cursor) -> RawSQL:
    # A row comparison: PostgreSQL starts the index scan at the cursor and reads forward, where
    # "inbox_at < t OR (inbox_at = t AND id < i)" would scan from the newest entry and filter.
    return RawSQL(
        "(inbox_at, id) < (%s, %s)", (cursor.inbox_at, cursor.id), output_field=BooleanField()
    )


def page(user, *, language: str, before: Cursor | None = None, size: int = PAGE_SIZE) -> Page:
    """The entries after before (from the newest when None), newest first."""
    rows = _in_inbox(user)
    if before is not None:
        rows = rows.filter(_older_than(before))
    found = list(rows.order_by("-inbox_at", "-id").values(*_FIELDS)[: size + 1])
    entries = tuple(_entry(row, language) for row in found[:size])
    return Page(entries, entries[-1].cursor if len(found) > size else None)


def entry(user, entry_id: uuid.UUID, *, language: str) -> Entry | None:
    """One of user's entries, rendered in language; None when user has no such entry."""
    found = list(_in_inbox(user).filter(pk=entry_id).values(*_FIELDS)[:1])
    return _entry(found[0], language) if found else None


def unread_count(user) -> int:
    """Unread entries, counted up to UNREAD_CAP + 1 (more reads as UNREAD_CAP + 1)."""
    return _in_inbox(user).filter(read_at__isnull=True).order_by()[: UNREAD_CAP + 1].count()


def badge(count: int) -> str:
    """The count as the header shows it: "" for none, "99+" past the cap."""
    if count <= 0:
        return ""
    return f"{UNREAD_CAP}+" if count > UNREAD_CAP else str(count)


# The inbox's version, in one statement on its two indexes: the unread count (capped) and the
# newest entry. A new entry, a read and a mark-all change it; so does archiving the newest.
STATE_SQL = f"""
SELECT
  (SELECT count(*) FROM (
     SELECT 1 FROM notifications.notifications
     WHERE user_id = %(user)s AND inbox_at IS NOT NULL AND archived_at IS NULL
       AND read_at IS NULL
     LIMIT {UNREAD_CAP + 1}) AS unread),
  newest.inbox_at, newest.id
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
  SELECT inbox_at, id FROM notifications.notifications
  WHERE user_id = %(user)s AND inbox_at IS NOT NULL AND archived_at IS NULL
  ORDER BY inbox_at DESC, id DESC LIMIT 1
) AS newest ON true
"""


@dataclass(frozen=True)
class State:
    unread: int
    newest: Cursor | None

    @property
    def etag(self) -> str:
        """An opaque tag of this state, for conditional requests (If-None-Match)."""
        text = f"{self.unread}:{self.newest or ''}"
        return hashlib.blake2s(text.encode(), digest_size=8).hexdigest()


def state(user) -> State:
    with connection.cursor() as cursor:
        cursor.execute(STATE_SQL, {"user": user.pk})
        unread, inbox_at, entry_id = cursor.fetchone()
    return State(unread, Cursor(inbox_at, entry_id) if inbox_at is not None else None)


def mark_read(user, entry_id: uuid.UUID) -> bool:
    """Mark one of user's entries read; False when user has no such entry."""
    found = _in_inbox(user).filter(pk=entry_id)
    return found.update(read_at=Coalesce("read_at", DatabaseNow())) > 0


def mark_unread(user, entry_id: uuid.UUID) -> bool:
    """Mark one of user's entries unread again; False when user has no such entry."""
    return _in_inbox(user).filter(pk=entry_id).update(read_at=None) > 0


def mark_all_read(user, *, through: Cursor | None = None) -> int:
    """Mark every unread entry read, or only those up to through (the newest the reader was
    shown: one that arrived after they looked stays unread). Returns how many changed."""
    rows = _in_inbox(user).filter(read_at__isnull=True)
    if through is not None:
        rows = rows.filter(inbox_at__lte=through.inbox_at).filter(
            Q(inbox_at__lt=through.inbox_at) | Q(id__lte=through.id)
        )
    return rows.update(read_at=DatabaseNow())


def archive(user, entry_id: uuid.UUID) -> bool:
    """Take one of user's entries out of the inbox, read (the row stays: staff still see it);
    False when user never had such an entry. Archiving twice is archiving once."""
    found = Notification.objects.filter(pk=entry_id, user=user, inbox_at__isnull=False)
    now = DatabaseNow()
    return (
        found.update(archived_at=Coalesce("archived_at", now), read_at=Coalesce("read_at", now)) > 0
    )
