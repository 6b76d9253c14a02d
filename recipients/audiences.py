"""Audiences: named sets of recipients (models in recipients/models.py).

A static audience keeps its members as rows, added and removed in bulk by one statement each
(ADD_SQL, REMOVE_SQL) or from a CSV of usernames and emails (import_csv). The others are read
when asked: a Django group's members, every active user, or a queryset a site registered under
a name, from an app's notifications.py:

    from recipients import audiences

    audiences.register("subscribers", lambda: User.objects.filter(profile__plan="paid"))

Whatever the kind, members() holds only active users: a deactivated account receives nothing.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils.translation import gettext

from recipients.models import Audience, AudienceKind, AudienceMember

# Each registered name's queryset factory: called for every read, so it sees today's rows.
REGISTERED: dict[str, Callable[[], QuerySet]] = {}


def register(name: str, queryset_factory: Callable[[], QuerySet]) -> None:
    """Make queryset_factory()'s users the members of every audience registered as name.

    The same factory again is a no-op (a module imported twice); another under a taken name is
    a mistake, refused at start-up rather than reached by a broadcast."""
    if REGISTERED.get(name, queryset_factory) is not queryset_factory:
        raise ImproperlyConfigured(f"An audience queryset is already registered as {name!r}.")
    REGISTERED[name] = queryset_factory


def unregister(name: str) -> None:
    """Remove the queryset registered as name (KeyError when there is none)."""
    del REGISTERED[name]


def members(audience: Audience) -> QuerySet:
    """The audience's active users, as a queryset of the user model."""
    users = get_user_model().objects.filter(is_active=True)
    match audience.kind:
        case AudienceKind.STATIC:
            joined = AudienceMember.objects.filter(audience=audience).values("user_id")
            return users.filter(pk__in=joined)
        case AudienceKind.GROUP:
            return users.filter(groups=audience.group_id)
        case AudienceKind.ACTIVE:
            return users
        case AudienceKind.REGISTERED:
            factory = REGISTERED.get(audience.registered_name)
            if factory is None:
                raise LookupError(
                    f"No audience queryset is registered as {audience.registered_name!r}."
                )
            # Through pk__in, so a factory's joins or distinct() cannot repeat a user.
            return users.filter(pk__in=factory().values("pk"))
    raise ValueError(f"Unknown audience kind {audience.kind!r}.")


def size(audience: Audience, *, at_most: int | None = None) -> int:
    """How many members the audience has; with at_most, counting stops past it (the admin's
    list of a million-member audience counts no further than it shows)."""
    found = members(audience)
    if at_most is not None:
        found = found.order_by()[: at_most + 1]
    return found.count()


def _ids(users: Iterable) -> list[int]:
    return [getattr(user, "pk", user) for user in users]


def _static(audience: Audience) -> None:
    if audience.kind != AudienceKind.STATIC:
        raise ValueError(f"{audience.key}: only a static audience's members are added or removed.")


def _chosen(users: QuerySet) -> tuple[str, tuple]:
    """A queryset of users as SQL of their ids, for the database to read without a round trip
    through Python (Django writes it with positional placeholders)."""
    return users.order_by().values("pk").query.sql_with_params()


# One statement for any number of users. The join with the user table drops ids that name no
# user (rather than fail on the foreign key); ON CONFLICT skips members already in, so adding
# is idempotent and the row count is the number newly added. {users} is the user model's table.
ADD_SQL = """
    INSERT INTO notifications.audience_members (audience_id, user_id)
    SELECT %(audience)s, u.id FROM {users} u WHERE u.id = ANY(%(ids)s)
    ON CONFLICT (audience_id, user_id) DO NOTHING
"""
# The same for a queryset of users, its own SQL inside: a million users never leave the
# database. Positional placeholders, as the queryset's own SQL has.
ADD_QUERY_SQL = """
    INSERT INTO notifications.audience_members (audience_id, user_id)
    SELECT %s, chosen.id FROM ({query}) AS chosen(id)
    ON CONFLICT (audience_id, user_id) DO NOTHING
"""


def add(audience: Audience, users: Iterable) -> int:
    """Add users (a queryset, users or ids) to a static audience; return how many were new."""
    _static(audience)
    with connection.cursor() as cursor:
        if isinstance(users, QuerySet):
            query, params = _chosen(users)
            cursor.execute(ADD_QUERY_SQL.format(query=query), (audience.pk, *params))
            return cursor.rowcount
        ids = _ids(users)
        if not ids:
            return 0
        table = connection.ops.quote_name(get_user_model()._meta.db_table)
        cursor.execute(ADD_SQL.format(users=table), {"audience": audience.pk, "ids": ids})
        return cursor.rowcount


# The array is one parameter however many users: one statement, one plan.
REMOVE_SQL = """
    DELETE FROM notifications.audience_members
    WHERE audience_id = %(audience)s AND user_id = ANY(%(ids)s)
"""
REMOVE_QUERY_SQL = """
    DELETE FROM notifications.audience_members
    WHERE audience_id = %s AND user_id IN ({query})
"""


def remove(audience: Audience, users: Iterable) -> int:
    """Remove users (a queryset, users or ids) from a static audience; return how many were in."""
    _static(audience)
    with connection.cursor() as cursor:
        if isinstance(users, QuerySet):
            query, params = _chosen(users)
            cursor.execute(REMOVE_QUERY_SQL.format(query=query), (audience.pk, *params))
            return cursor.rowcount
        ids = _ids(users)
        if not ids:
            return 0
        cursor.execute(REMOVE_SQL, {"audience": audience.pk, "ids": ids})
        return cursor.rowcount


# --- CSV import -------------------------------------------------------------------------------

# A first row whose cell is one of these is a header, not a user.
HEADER_NAMES = {"username", "user", "login", "email", "e-mail", "mail"}
# Lines matched and added per statement: a few hundred kilobytes of parameters, and a 100,000
# line file in twenty round trips.
BATCH_LINES = 5_000
# How many unmatched and invalid lines a report keeps, with their values; the rest are counted.
KEPT_LINES = 100
# Longer than any username (150) or email (254) the user model holds.
LONGEST_VALUE = 254


class ImportRefused(ValueError):
    """The file cannot be imported as it is; nothing of it was added."""


@dataclass
class ImportReport:
    """What an import did, line by line: every line read is exactly one of matched, not
    matched, blank or invalid; matched lines are added (new) or already members."""

    lines: int = 0
    header: bool = False
    matched: int = 0
    added: int = 0
    already_members: int = 0
    not_matched: int = 0
    blank: int = 0
    invalid: int = 0
    # (line number, value), the first KEPT_LINES of each.
    unmatched_lines: list[tuple[int, str]] = field(default_factory=list)
    invalid_lines: list[tuple[int, str]] = field(default_factory=list)


# A line matches a user by username (exactly, as Django signs in) or else by email, in any case.
# Two hash joins over the batch rather than one lookup a line: an email has no index of its own.
# An email several users share matches the oldest account.
MATCH_SQL = """
    WITH line AS (
        SELECT * FROM unnest(%(numbers)s::int[], %(values)s::text[]) AS line(number, value)
    ),
    by_username AS (
        SELECT line.number, u.id FROM line JOIN {users} u ON u.username = line.value
    ),
    by_email AS (
        SELECT DISTINCT ON (line.number) line.number, u.id
        FROM line JOIN {users} u ON lower(u.email) = lower(line.value)
        WHERE line.number NOT IN (SELECT number FROM by_username)
        ORDER BY line.number, u.id
    )
    SELECT number, id FROM by_username UNION ALL SELECT number, id FROM by_email
"""


def _match(numbers: list[int], values: list[str]) -> dict[int, int]:
    """Each matched line's number and its user's id."""
    table = connection.ops.quote_name(get_user_model()._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(MATCH_SQL.format(users=table), {"numbers": numbers, "values": values})
        return dict(cursor.fetchall())


def _flush(audience: Audience, batch: list[tuple[int, str]], report: ImportReport) -> None:
    numbers = [number for number, _ in batch]
    matched = _match(numbers, [value for _, value in batch])
    for number, value in batch:
        if number not in matched:
            report.not_matched += 1
            if len(report.unmatched_lines) < KEPT_LINES:
                report.unmatched_lines.append((number, value))
    report.matched += len(matched)
    added = add(audience, set(matched.values()))
    report.added += added
    # A line whose user was already in, or named again by an earlier line, added nobody.
    report.already_members += len(matched) - added


def _file_size(file: IO[bytes]) -> int:
    known = getattr(file, "size", None)
    if known is not None:
        return known
    here = file.tell()
    end = file.seek(0, io.SEEK_END)
    file.seek(here)
    return end


def _column_of(row: list[str], column: str | int | None) -> tuple[int, bool]:
    """The index of the column to read, and whether row is a header."""
    names = [cell.strip().lower() for cell in row]
    if isinstance(column, str):
        if column.lower() not in names:
            raise ImportRefused(
                gettext("The first line has no column named %(column)s.") % {"column": column}
            )
        return names.index(column.lower()), True
    header = any(name in HEADER_NAMES for name in names)
    if column is not None:
        return column, header
    if header:
        return next(i for i, name in enumerate(names) if name in HEADER_NAMES), True
    return 0, False


def import_csv(
    audience: Audience, file: IO[bytes], *, column: str | int | None = None
) -> ImportReport:
    """Add the users a CSV file names, one a line, to a static audience, and say what each line
    did.

    The file is read as UTF-8 (a byte order mark is skipped) and streamed, BATCH_LINES at a
    time. column names the header's column to read, or an index; by default the first column,
    or the username or email column of a header. A file that is too large
    (AUDIENCE_CSV_MAX_BYTES, AUDIENCE_CSV_MAX_LINES), not UTF-8 or not CSV is refused with
    ImportRefused, and adds nobody: the import is one transaction.
    """
    _static(audience)
    limit = settings.AUDIENCE_CSV_MAX_BYTES
    if _file_size(file) > limit:
        raise ImportRefused(
            gettext("The file is larger than %(limit)s bytes; split it.") % {"limit": limit}
        )
    max_lines = settings.AUDIENCE_CSV_MAX_LINES
    # "utf-8-sig" drops a byte order mark at the start; strict errors, so no line is guessed.
    # newline="" leaves line ends to the csv module, as it asks (a quoted field may hold one).
    text = io.TextIOWrapper(file, encoding="utf-8-sig", errors="strict", newline="")
    report = ImportReport()
    batch: list[tuple[int, str]] = []
    reader = csv.reader(text)
    index: int | None = None
    with transaction.atomic():
        try:
            for row in reader:
                number = reader.line_num
                if index is None and any(cell.strip() for cell in row):
                    index, report.header = _column_of(row, column)
                    if report.header:
                        continue
                report.lines += 1
                if report.lines > max_lines:
                    raise ImportRefused(
                        gettext("The file has more than %(limit)s lines; split it.")
                        % {"limit": max_lines}
                    )
                value = row[index].strip() if index is not None and index < len(row) else ""
                if not value:
                    report.blank += 1
                elif len(value) > LONGEST_VALUE or any(c.isspace() for c in value):
                    report.invalid += 1
                    if len(report.invalid_lines) < KEPT_LINES:
                        report.invalid_lines.append((number, value[:LONGEST_VALUE]))
                else:
                    batch.append((number, value))
                    if len(batch) >= BATCH_LINES:
                        _flush(audience, batch, report)
                        batch = []
        except UnicodeDecodeError as exc:
            raise ImportRefused(
                gettext("The file is not UTF-8 text (near line %(line)s). Save it as CSV UTF-8.")
                % {"line": reader.line_num + 1}
            ) from exc
        except csv.Error as exc:
            raise ImportRefused(
                gettext("Line %(line)s is not CSV: %(error)s")
                % {"line": reader.line_num, "error": exc}
            ) from exc
        finally:
            # The caller's file stays open: the wrapper would close it when collected.
            text.detach()
        if batch:
            _flush(audience, batch, report)
    return report
