"""One meaning of each state ("pending", "retrying", "due", "finished", "needs attention"),
read the same everywhere a person sees a row, and written once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection

from notifications import outbox, stats
from notifications.models import (
    DUE,
    DUE_SQL,
    FINISHED,
    FINISHED_SQL,
    OUTCOMES,
    RETRYING,
    RETRYING_SQL,
    SHOWN,
    SHOWN_SQL,
    SHOWN_STATUS_SQL,
    WAITING,
    WAITING_SQL,
    NotificationDelivery,
    ShownStatus,
    Status,
    needs_attention,
    needs_attention_sql,
)
from tests.helpers import BASE_DIR, execute, make_deliveries, mark_failed

DELIVERIES = "/admin/notifications/notificationdelivery/"


@pytest.fixture
def rows(user):
    """One row of each kind of pending, by how it got there."""
    # The claim takes the oldest first: the first three fail, the fourth is never claimed.
    waiting_out, due_again, retried, fresh = make_deliveries(user, 4)
    claims = {c.id: c for c in outbox.claim(batch_size=3)}
    for failed in (waiting_out, due_again, retried):
        mark_failed(claims[failed], code="UPSTREAM_503", message="x", retryable=True)
    # due_again's backoff has run out: it waits only for the next claim.
    execute(
        "UPDATE notifications.notification_deliveries SET next_attempt_at = now() WHERE id = %s",
        [due_again],
    )
    # retried failed a few times and died; a staff member pressed Retry.
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'dead' WHERE id = %s",
        [retried],
    )
    assert outbox.retry(delivery_id=retried)
    return {"fresh": fresh, "waiting_out": waiting_out, "due_again": due_again, "retried": retried}


EXPECTED = {
    "fresh": ShownStatus.PENDING,
    # Failed under its current budget: retrying, during its backoff and after it alike.
    "waiting_out": ShownStatus.RETRYING,
    "due_again": ShownStatus.RETRYING,
    # A staff Retry starts a fresh budget: it has not failed under this one.
    "retried": ShownStatus.PENDING,
}


def test_each_row_reads_one_state_in_the_badge_the_filter_the_tiles_and_the_dashboard(
    db, rows, admin_client, client
):
    by_state = {
        state: {rows[name] for name, s in EXPECTED.items() if s == state}
        for state in EXPECTED.values()
    }
    # The row itself (the admin badge, the page's feed).
    for name, state in EXPECTED.items():
        assert NotificationDelivery.objects.get(pk=rows[name]).shown_status == state, name
    # The queryset, and the admin's status filter through it.
    for state, ids in by_state.items():
        assert set(NotificationDelivery.objects.shown(state).values_list("pk", flat=True)) == ids
        listed = admin_client.get(f"{DELIVERIES}?status={state.value}").context["cl"].result_list
        assert {d.pk for d in listed} == ids
        assert all(d.shown_status == state for d in listed)
    # The tiles: the public page's and the admin dashboard's counts.
    for limit in (None, 1000):
        depth = stats.queue_depth(limit=limit)
        assert (depth.pending, depth.retrying) == (2, 2)
    if apps.is_installed("showcases"):  # the public page's tiles, on a site that has it
        page = client.get("/showcases/workers/queue/", HTTP_HX_REQUEST="true").content.decode()
        assert '<dd data-depth="pending">2</dd>' in page
        assert '<dd data-depth="retrying">2</dd>' in page
    # The dashboard's chart and channel health, over the last 24 hours of attempts.
    this_hour = stats.hourly()[-1]
    assert this_hour.counts[ShownStatus.RETRYING] == 2
    [health] = [h for h in stats.channel_health() if h.channel == "recording"]
    assert health.system_failures == 2


def row(
    status: str,
    attempts: int = 0,
    base: int = 0,
    *,
    due: bool = False,
    channel="recording",
    reason: str = "",
):
    return {
        "status": status,
        "attempts": attempts,
        "attempt_base": base,
        "due": due,
        "channel": channel,
        "skip_reason": reason,
    }


# Every kind of row a state could be told apart by.
EVERY_STATE = {
    "fresh": row("pending", due=True),
    "scheduled": row("pending"),
    "backing_off": row("pending", 1),
    "due_again": row("pending", 2, due=True),
    "retried": row("pending", 3, 3, due=True),
    "released": row("pending", 2, 1, due=True),
    "processing": row("processing", 1),
    "sent": row("sent", 1),
    "failed": row("failed", 1),
    "dead": row("dead", 5),
    # A channel whose dead rows need nobody (Channel.needs_attention, as a showcase's).
    "dead_unwatched": row("dead", 5, channel="unwatched"),
    "unwatched_due": row("pending", due=True, channel="unwatched"),
    # Withdrawn before a drain claimed it: fresh, or between two tries.
    "cancelled": row("cancelled", due=True),
    "cancelled_retrying": row("cancelled", 2),
    # Written at enqueue instead of a pending row: never claimed, whenever it was "due".
    "skipped": row("skipped", due=True, reason="opted_out"),
    "skipped_later": row("skipped", reason="no_address", channel="email"),
}


@pytest.fixture
def every_state(user):
    """A table with a row of every kind in EVERY_STATE; returns {name: id}."""
    ids = dict(zip(EVERY_STATE, make_deliveries(user, len(EVERY_STATE)), strict=True))
    for name, values in EVERY_STATE.items():
        execute(
            "UPDATE notifications.notification_deliveries"
            " SET status = %(status)s, attempts = %(attempts)s, attempt_base = %(attempt_base)s,"
            " channel = %(channel)s, skip_reason = %(skip_reason)s, next_attempt_at"
            " = CASE WHEN %(due)s THEN now() ELSE now() + interval '1 hour' END"
            " WHERE id = %(id)s",
            {**values, "id": ids[name]},
        )
    return ids


def selected(sql: str) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM notifications.notification_deliveries WHERE {sql}")
        return {row[0] for row in cursor.fetchall()}


def test_the_q_and_the_sql_of_each_state_select_the_same_rows(db, every_state):
    pairs = [
        (RETRYING, RETRYING_SQL),
        (WAITING, WAITING_SQL),
        (DUE, DUE_SQL),
        (FINISHED, FINISHED_SQL),
        (needs_attention(), needs_attention_sql()),
        *((SHOWN[state], SHOWN_SQL[state]) for state in ShownStatus),
    ]
    for q, sql in pairs:
        from_sql = selected(sql)
        assert from_sql == set(NotificationDelivery.objects.filter(q).values_list("pk", flat=True))
        assert from_sql, sql  # the table has rows of every state
        assert from_sql != set(every_state.values()), sql  # and rows of other states


def test_each_row_reads_the_same_state_in_python_in_the_queryset_and_in_sql(db, every_state):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, {SHOWN_STATUS_SQL} FROM notifications.notification_deliveries")
        from_sql = dict(cursor.fetchall())
    for row in NotificationDelivery.objects.all():
        assert row.shown_status == from_sql[row.pk]
        assert NotificationDelivery.objects.shown(row.shown_status).filter(pk=row.pk).exists()
    assert set(from_sql.values()) == set(ShownStatus.values)
    # The named states, as their names say.
    assert selected(DUE_SQL) == {
        every_state[n] for n in ("fresh", "due_again", "retried", "released", "unwatched_due")
    }
    assert selected(needs_attention_sql()) == {every_state["dead"]}
    assert selected(FINISHED_SQL) == {
        every_state[n]
        for n in (
            "sent",
            "failed",
            "dead",
            "dead_unwatched",
            "cancelled",
            "cancelled_retrying",
            "skipped",
            "skipped_later",
        )
    }


def test_each_send_outcome_is_named_as_the_row_it_leaves_reads(db, every_state):
    """A row a send left pending has attempts past attempt_base: it reads as retrying."""
    for status, name in OUTCOMES.items():
        rows = NotificationDelivery.objects.filter(status=status, attempts__gt=0)
        assert {r.shown_status for r in rows if r.attempts > r.attempt_base} == {name}
    # A cancelled or skipped row was never sent: no send leaves it so.
    assert set(OUTCOMES) == set(Status) - {Status.PROCESSING, Status.CANCELLED, Status.SKIPPED}


# What a module would write if it spelt a state again instead of importing it from
# notifications/models.py: the predicates, and the lists of outcome or finished names.
RESPELT = {
    "retrying or pending, by attempts": re.compile(r"attempts\s*(>|=|==|<=)\s*[\w.]*attempt_base"),
    "due, by next_attempt_at": re.compile(r"next_attempt_at\s*<=\s*now\(\)"),
    "finished, as a list": re.compile(r"""["']sent["'],\s*["']failed["'],\s*["']dead["']"""),
    "failed or dead, as a list": re.compile(r"""["']failed["'],\s*["']dead["']"""),
    "the outcomes, as a list": re.compile(r"""["']sent["'],\s*["']retrying["']"""),
}
# Where the states are defined, and the tables' history.
DEFINED_IN = {Path("notifications/models.py")}


def sources() -> list[Path]:
    folders = ("notifications", "recipients", "transports", "showcases", "core", "v10r")
    return [
        path.relative_to(BASE_DIR)
        for folder in folders
        for path in sorted((BASE_DIR / folder).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def code_of(path: Path) -> str:
    """The module's code and its strings (the SQL), without comments and docstrings, which
    may name a state in prose."""
    tree = ast.parse((BASE_DIR / path).read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(getattr(node, "body", None), list)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    strings = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]
    return "\n".join([ast.unparse(tree), *strings])


def test_no_module_spells_a_state_or_an_outcome_list_that_models_defines():
    found = [
        f"{path}: {what}"
        for path in sources()
        if path not in DEFINED_IN
        for what, pattern in RESPELT.items()
        if pattern.search(code_of(path))
    ]
    assert found == []
