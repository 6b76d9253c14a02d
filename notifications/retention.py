"""Retention: deleting finished deliveries once they are old, and notifications left with none.

The deliveries table only grows otherwise: every sent row is kept forever. Two walks go
through it from the oldest row, in (created_at, id) order on the deliveries_recent index,
each with a cursor kept in the database (the outbox_retention row), so a run carries on where
the last one stopped and the rows already deleted are not walked again:

- the *sent* walk deletes sent rows, and the rows enqueue wrote as skipped (the recipient did
  not want them or could not be reached: nothing went wrong), queued more than
  OUTBOX_KEEP_SENT_DAYS ago;
- the *finished* walk, OUTBOX_KEEP_FINISHED_DAYS behind (the longer), deletes every finished
  row (sent, skipped, failed, dead, cancelled) queued before that: failed, dead and cancelled
  rows, and the rare row that was still unfinished when the sent walk passed it (a dead row a
  staff member retried later).

A pending or processing row is never deleted, however old. A notification goes with its last
delivery, in the same transaction; notifications that never had one are swept once they are
as old as the finished walk's horizon. A digest's carrier is pruned like any finished row, and
its items with it (the database cascades); a notification that is still an item of a carrier
is never deleted, so nothing drops out of a digest that may yet be sent. Last, the throttle
windows' counts are deleted a day after their window ended.

Each batch is one transaction of at most `batch` rows, locked with SKIP LOCKED, followed by a
pause, so pruning never holds many locks at once nor writes WAL in a burst. A row the finished
walk passes without deleting it (a drain held it, or it was still unfinished) is behind its
cursor; so once that walk reaches its horizon it starts again from the oldest row, where by
then only such rows are left, and deletes the ones that have finished since.

It is safe beside running drains: a row that is claimed, retried or sent meanwhile is either
locked (skipped) or re-checked under the lock, and only a finished row is deleted.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from notifications.models import FINISHED_SQL, FINISHED_STATUSES, SHOWN_SQL, ShownStatus, Status

# What the sent walk deletes: the rows kept only as a record that all went as it should.
SENT_WALK_STATUSES = (Status.SENT, Status.SKIPPED)
_KEPT_LIKE_SENT_SQL = f"({SHOWN_SQL[ShownStatus.SENT]} OR {SHOWN_SQL[ShownStatus.SKIPPED]})"

# A run that has committed no batch for this long is taken to have died (a killed process):
# the next run may start. A live run commits one at least every few seconds, however long it
# runs (a first prune of years of rows takes many minutes).
STALE_RUN = timedelta(minutes=5)

# One run at a time: the one whose TAKE_RUN_SQL finds no other running (or only a stale one)
# goes on, with the walks' cursors; its start time (last_started_at) is its token. A row, not
# a lock held across the run: pruning keeps no transaction open between batches, and works through
# PgBouncer. Every write a run makes to the row names its token, so a run that was given up
# for dead and taken over can neither move the cursors nor end the new run.
ENSURE_SQL = "INSERT INTO notifications.outbox_retention (id) VALUES (1) ON CONFLICT DO NOTHING"
TAKE_RUN_SQL = """
UPDATE notifications.outbox_retention
SET running_since = now(), last_started_at = now(), alive_at = now()
WHERE id = 1
  AND (running_since IS NULL
       OR coalesce(alive_at, running_since) < now() - make_interval(secs => %(stale)s))
RETURNING now(), sent_after_at, sent_after_id, finished_after_at, finished_after_id
""".strip()

RUNNING_SQL = "SELECT running_since FROM notifications.outbox_retention WHERE id = 1"

MOVE_SQL = {
    name: f"""
UPDATE notifications.outbox_retention
SET {name}_after_at = %(at)s, {name}_after_id = %(id)s, alive_at = now()
WHERE id = 1 AND last_started_at = %(token)s
""".strip()
    for name in ("sent", "finished")
}

ALIVE_SQL = """
UPDATE notifications.outbox_retention SET alive_at = now()
WHERE id = 1 AND last_started_at = %(token)s
""".strip()

END_RUN_SQL = """
UPDATE notifications.outbox_retention
SET running_since = NULL, alive_at = NULL, last_finished_at = now(),
    last_report = %(report)s::jsonb
WHERE id = 1 AND last_started_at = %(token)s
""".strip()


class TakenOver(Exception):
    """Another run took pruning over because this one was silent for STALE_RUN."""


# One batch of a walk: the next `limit` rows after the cursor (by the deliveries_recent index)
# queued before the horizon, and of those, the ones in `statuses`, deleted. FOR UPDATE
# re-checks status on the row as it is now: a row retried since the chunk was read is pending
# and stays.
WALK_SQL = f"""
WITH chunk AS MATERIALIZED (
    SELECT id, created_at
    FROM notifications.notification_deliveries
    WHERE (created_at, id) > (%(after_at)s, %(after_id)s)
      AND created_at < %(before)s
    ORDER BY created_at, id
    LIMIT %(limit)s
),
doomed AS (
    SELECT d.id
    FROM notifications.notification_deliveries AS d
    JOIN chunk USING (id)
    WHERE d.status = ANY(%(statuses)s)
    FOR UPDATE OF d SKIP LOCKED
),
gone AS (
    DELETE FROM notifications.notification_deliveries AS d
    USING doomed
    WHERE d.id = doomed.id
    RETURNING d.notification_id, d.status
)
SELECT
    (SELECT count(*) FROM chunk) AS "scanned",
    (SELECT created_at FROM chunk ORDER BY created_at DESC, id DESC LIMIT 1) AS "last_at",
    (SELECT id FROM chunk ORDER BY created_at DESC, id DESC LIMIT 1) AS "last_id",
    (SELECT count(*) FROM gone WHERE {SHOWN_SQL[ShownStatus.SENT]}) AS "sent",
    (SELECT count(*) FROM gone WHERE {SHOWN_SQL[ShownStatus.SKIPPED]}) AS "skipped",
    (SELECT count(*) FROM gone WHERE NOT {_KEPT_LIKE_SENT_SQL}) AS "finished",
    (SELECT coalesce(array_agg(DISTINCT notification_id), '{{}}') FROM gone) AS "notifications"
""".strip()

# A notification gathered into a digest is an item of its carrier (digest_items), often with
# no delivery of its own: deleting it would take the item with it (the foreign key cascades)
# and so take it out of a digest not yet sent, or one a staff member may still retry. Such a
# notification stays while its carrier does; once the carrier is pruned (its items go with it)
# the notification has neither and is swept like any other.
#
# A notification in its recipient's inbox (delivered there, not archived) is the recipient's
# to keep: its deliveries are the outbox's log and go when the log's horizon passes, but the
# entry stays until they archive it, and is swept with the others from then on.
_SWEEPABLE_SQL = """
NOT EXISTS (
      SELECT FROM notifications.digest_items AS i WHERE i.notification_id = n.id
  )
  AND (n.inbox_at IS NULL OR n.archived_at IS NOT NULL)
""".strip()

# In the same transaction as the batch: the notifications whose last delivery it deleted.
ORPHANED_SQL = f"""
DELETE FROM notifications.notifications AS n
WHERE n.id = ANY(%(ids)s)
  AND NOT EXISTS (
      SELECT FROM notifications.notification_deliveries AS d WHERE d.notification_id = n.id
  )
  AND {_SWEEPABLE_SQL}
""".strip()

# Notifications without a delivery (queued with no channel a user could be reached on, or
# gathered into a digest that has been pruned since), oldest first, once they are older than
# the finished horizon; never one that is still an item of a carrier.
EMPTY_SQL = f"""
WITH empty AS MATERIALIZED (
    SELECT n.id
    FROM notifications.notifications AS n
    WHERE n.created_at < %(before)s
      AND NOT EXISTS (
          SELECT FROM notifications.notification_deliveries AS d WHERE d.notification_id = n.id
      )
      AND {_SWEEPABLE_SQL}
    ORDER BY n.created_at
    LIMIT %(limit)s
    FOR UPDATE OF n SKIP LOCKED
)
DELETE FROM notifications.notifications AS n USING empty WHERE n.id = empty.id
""".strip()

# For --dry-run: what the walks would delete now, counted (not estimated).
COUNT_DUE_SQL = f"""
SELECT
    count(*) FILTER (
        WHERE {SHOWN_SQL[ShownStatus.SENT]} AND created_at < %(sent_before)s
    ) AS "sent",
    count(*) FILTER (
        WHERE {SHOWN_SQL[ShownStatus.SKIPPED]} AND created_at < %(sent_before)s
    ) AS "skipped",
    count(*) FILTER (
        WHERE NOT {_KEPT_LIKE_SENT_SQL} AND created_at < %(finished_before)s
    ) AS "finished"
FROM notifications.notification_deliveries
WHERE created_at < greatest(%(sent_before)s, %(finished_before)s)
  AND {FINISHED_SQL}
""".strip()

COUNT_EMPTY_DUE_SQL = f"""
SELECT count(*)
FROM notifications.notifications AS n
WHERE n.created_at < %(before)s
  AND NOT EXISTS (
      SELECT FROM notifications.notification_deliveries AS d WHERE d.notification_id = n.id
  )
  AND {_SWEEPABLE_SQL}
""".strip()

# A throttle window's count is read only while the window is open (digests.THROTTLE_SQL);
# a day past its end it says nothing anyone asks about. Oldest first on the window_end index,
# a batch at a time (MATERIALIZED: the LIMIT is applied once, whatever the plan). No lock is
# taken before the delete, and none is skipped: an enqueue counts only in the window now()
# falls in (digests.THROTTLE_SQL), so no transaction holds a row a day past its window.
THROTTLES_SQL = """
WITH old AS MATERIALIZED (
    SELECT user_id, category, window_end
    FROM notifications.throttle_counts
    WHERE window_end < now() - interval '1 day'
    ORDER BY window_end
    LIMIT %(limit)s
)
DELETE FROM notifications.throttle_counts AS t
USING old
WHERE (t.user_id, t.category, t.window_end) = (old.user_id, old.category, old.window_end)
""".strip()

COUNT_THROTTLES_DUE_SQL = """
SELECT count(*) FROM notifications.throttle_counts WHERE window_end < now() - interval '1 day'
""".strip()


@dataclass(frozen=True)
class RetentionPolicy:
    """How old a finished row may get, and how pruning paces itself."""

    keep_sent: timedelta
    keep_finished: timedelta
    batch: int = 1000
    pause: float = 0.05  # seconds between batches
    max_seconds: float | None = None  # stop a run after this long (the job's time left)

    def __post_init__(self) -> None:
        if self.keep_sent <= timedelta(0) or self.keep_finished <= timedelta(0):
            raise ValueError("retention periods must be positive")
        if self.keep_finished < self.keep_sent:
            raise ValueError(
                "finished rows are kept at least as long as sent ones "
                f"({self.keep_finished.days} < {self.keep_sent.days} days)"
            )
        if not 1 <= self.batch <= 100_000:
            raise ValueError(f"batch must be between 1 and 100000, not {self.batch}")
        if self.pause < 0:
            raise ValueError("pause must not be negative")

    @classmethod
    def from_settings(cls, **changes) -> RetentionPolicy:
        values = {
            "keep_sent": timedelta(days=settings.OUTBOX_KEEP_SENT_DAYS),
            "keep_finished": timedelta(days=settings.OUTBOX_KEEP_FINISHED_DAYS),
            "batch": settings.OUTBOX_PRUNE_BATCH,
        }
        values.update({key: value for key, value in changes.items() if value is not None})
        return cls(**values)


@dataclass
class Pruned:
    """What one run deleted, how many batches it took, and whether it reached the horizon."""

    sent: int = 0
    # Deliveries written as skipped at enqueue (not "skipped" below, which is about the run).
    skipped_deliveries: int = 0
    finished: int = 0
    notifications: int = 0
    # Throttle windows' counts a day past their window (not deliveries).
    throttle_counts: int = 0
    batches: int = 0
    seconds: float = 0.0
    complete: bool = False  # both walks reached their horizon: nothing more is due now
    longest_batch_seconds: float = 0.0
    skipped: bool = False  # another run was under way: this one did nothing
    taken_over: bool = False  # this run fell silent, another took over, and this one stopped
    other_started_at: datetime | None = None

    @property
    def deliveries(self) -> int:
        return self.sent + self.skipped_deliveries + self.finished

    def as_dict(self) -> dict:
        report = {**asdict(self), "deliveries": self.deliveries}
        report.pop("other_started_at")
        return report


def due(policy: RetentionPolicy) -> dict[str, int]:
    """Count what pruning would delete now (for --dry-run): sent, skipped (kept as long as
    sent), finished (failed, dead, cancelled), empty notifications, and throttle counts."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        (now,) = cursor.fetchone()
        sent_before, finished_before = now - policy.keep_sent, now - policy.keep_finished
        cursor.execute(
            COUNT_DUE_SQL, {"sent_before": sent_before, "finished_before": finished_before}
        )
        sent, skipped, finished = cursor.fetchone()
        cursor.execute(COUNT_EMPTY_DUE_SQL, {"before": finished_before})
        (empty,) = cursor.fetchone()
        cursor.execute(COUNT_THROTTLES_DUE_SQL)
        (throttles,) = cursor.fetchone()
    return {
        "sent": sent,
        "skipped": skipped,
        "finished": finished,
        "empty_notifications": empty,
        "throttle_counts": throttles,
    }


def prune(policy: RetentionPolicy) -> Pruned:
    """Walk both cursors toward their horizons, batch by batch, until done or out of time."""
    started = time.monotonic()
    result = Pruned()
    with connection.cursor() as cursor:
        cursor.execute(ENSURE_SQL)
        cursor.execute(TAKE_RUN_SQL, {"stale": STALE_RUN.total_seconds()})
        row = cursor.fetchone()
        if row is None:
            cursor.execute(RUNNING_SQL)
            return Pruned(skipped=True, other_started_at=cursor.fetchone()[0])
    token, sent_at, sent_id, finished_at, finished_id = row
    walks = [
        Walk("sent", token - policy.keep_sent, SENT_WALK_STATUSES, sent_at, sent_id),
        Walk("finished", token - policy.keep_finished, FINISHED_STATUSES, finished_at, finished_id),
    ]
    out_of_time = False
    try:
        for walk in walks:
            while not out_of_time:
                scanned = _batch(walk, policy, result, token)
                out_of_time = _out_of_time(policy, started)
                if scanned < policy.batch:
                    break  # the walk reached its horizon
                if not out_of_time and policy.pause:
                    time.sleep(policy.pause)
            if out_of_time:
                break
        if walks[1].reached_horizon:
            # What the finished walk passed without deleting is behind its cursor: start it
            # again from the oldest row, where only such rows are left.
            _move(walks[1], token, _BEFORE_ANY_ROW, 0)
        swept_all = False
        while not out_of_time:
            swept = _sweep(EMPTY_SQL, {"before": walks[1].before}, policy, token)
            result.notifications += swept
            out_of_time = _out_of_time(policy, started)
            if swept < policy.batch:
                swept_all = True
                break
        while swept_all and not out_of_time:
            swept = _sweep(THROTTLES_SQL, {}, policy, token)
            result.throttle_counts += swept
            out_of_time = _out_of_time(policy, started)
            if swept < policy.batch:
                result.complete = True
                break
    except TakenOver:
        result.taken_over = True
    finally:
        result.seconds = round(time.monotonic() - started, 3)
        if not result.taken_over:
            with connection.cursor() as cursor:
                cursor.execute(
                    END_RUN_SQL, {"report": json.dumps(result.as_dict()), "token": token}
                )
    return result


_BEFORE_ANY_ROW = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Walk:
    """One walk: what it deletes, up to where, and the (created_at, id) it has passed."""

    name: str
    before: datetime
    statuses: tuple[str, ...]
    after_at: datetime
    after_id: int
    reached_horizon: bool = False


def _move(walk: Walk, token: datetime, at: datetime, id_: int) -> None:
    """Move walk's cursor, as the run holding token; raise TakenOver if it no longer does."""
    with connection.cursor() as cursor:
        cursor.execute(MOVE_SQL[walk.name], {"at": at, "id": id_, "token": token})
        if cursor.rowcount != 1:
            raise TakenOver
    walk.after_at, walk.after_id = at, id_


def _batch(walk: Walk, policy: RetentionPolicy, result: Pruned, token: datetime) -> int:
    began = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            WALK_SQL,
            {
                "after_at": walk.after_at,
                "after_id": walk.after_id,
                "before": walk.before,
                "limit": policy.batch,
                "statuses": [str(s) for s in walk.statuses],
            },
        )
        scanned, last_at, last_id, sent, skipped, finished, notification_ids = cursor.fetchone()
        if notification_ids:
            cursor.execute(ORPHANED_SQL, {"ids": notification_ids})
            orphans = cursor.rowcount
        else:
            orphans = 0
        if scanned:
            # In the batch's transaction: the cursor moves exactly when the deletes commit, and
            # a run that was taken over rolls its batch back.
            _move(walk, token, last_at, last_id)
    result.notifications += orphans
    result.sent += sent
    result.skipped_deliveries += skipped
    result.finished += finished
    result.batches += 1
    result.longest_batch_seconds = max(
        result.longest_batch_seconds, round(time.monotonic() - began, 4)
    )
    walk.reached_horizon = scanned < policy.batch
    return scanned


def _sweep(sql: str, params: dict, policy: RetentionPolicy, token: datetime) -> int:
    """Delete one batch (empty notifications, or old throttle counts); return how many."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, {**params, "limit": policy.batch})
        swept = cursor.rowcount
        cursor.execute(ALIVE_SQL, {"token": token})
        if cursor.rowcount != 1:
            raise TakenOver
    return swept


def _out_of_time(policy: RetentionPolicy, started: float) -> bool:
    return policy.max_seconds is not None and time.monotonic() - started >= policy.max_seconds


@dataclass(frozen=True)
class LastRun:
    """What the dashboard shows of pruning: when it last ran, and what it deleted."""

    started_at: datetime | None
    finished_at: datetime | None
    running_since: datetime | None
    report: dict


def last_run() -> LastRun | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT last_started_at, last_finished_at, running_since, last_report"
            " FROM notifications.outbox_retention WHERE id = 1"
        )
        row = cursor.fetchone()
    if row is None:
        return None
    started_at, finished_at, running_since, report = row
    # Django has psycopg hand jsonb over as text (its JSONField decodes it).
    report = json.loads(report) if isinstance(report, str) else report
    return LastRun(started_at, finished_at, running_since, report)
