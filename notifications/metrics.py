"""The queue's numbers for Prometheus: /metrics, in its text format.

Everything is read from PostgreSQL at scrape time, so every gunicorn worker and every host
answers the same numbers, and a drain process on another host counts as much as one here:

- gauges straight from the tables (queue depth, the oldest due row's wait, each running drain
  loop's heartbeat age, the deliveries table's size, the last prune, broadcasts by state and
  their chunks by status, the recent broadcasts' deliveries by status);
- counters and histograms that drain processes keep in the drain_metrics table. Each process
  adds what it did since its last flush to rows of its own (worker, metric, label), once a
  heartbeat, so a scrape sums every process that ever ran, alive or not; a process killed
  between two flushes loses at most a second of counts. Housekeeping folds the rows of
  processes gone for an hour into one set (fold_retired), so the table does not grow with
  every restart.

prometheus-client renders the text (and parses it, in the tests): the format's reference
implementation. Its own multi-process mode was not used: it shares counters through files on
one host, where these come from the database every host already shares.
"""

from __future__ import annotations

import bisect
import hmac
import ipaddress
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

import transports as channels
from notifications import heartbeat, outbox, retention, stats
from notifications.models import (
    DUE_SQL,
    SHOWN_SQL,
    SHOWN_STATUS_SQL,
    Broadcast,
    BroadcastChunk,
    BroadcastState,
    ChunkStatus,
    ShownStatus,
    Status,
)

# Upper bounds, in seconds, of the claim and write histograms' buckets (+Inf is implied).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
HISTOGRAMS = {
    "claim_seconds": "Time the claim statement took, per batch.",
    "write_seconds": "Time one fenced write of outcomes took.",
}

# Adds one process's counts to its own rows.
FLUSH_SQL = """
INSERT INTO notifications.drain_metrics AS m (worker, metric, label, value, updated_at)
SELECT %(worker)s, metric, label, value, now()
FROM unnest(%(metrics)s::text[], %(labels)s::text[], %(values)s::double precision[])
    AS d(metric, label, value)
ON CONFLICT (worker, metric, label)
DO UPDATE SET value = m.value + excluded.value, updated_at = now()
""".strip()

# Rows of processes that have stopped adding to them (an hour untouched) are added into one
# "retired" set and deleted, in one statement, so the sums a scrape reads stay the same while
# the table stays the size of the processes alive, not of every process that ever ran. A live
# process that was merely idle for an hour starts fresh rows of its own on its next flush.
RETIRED = "retired"
FOLD_SQL = """
WITH gone AS (
    DELETE FROM notifications.drain_metrics
    WHERE worker <> %(retired)s AND updated_at < now() - make_interval(secs => %(idle)s)
    RETURNING metric, label, value
)
, folded AS (
    INSERT INTO notifications.drain_metrics AS m (worker, metric, label, value, updated_at)
    SELECT %(retired)s, metric, label, sum(value), now() FROM gone GROUP BY metric, label
    ON CONFLICT (worker, metric, label)
    DO UPDATE SET value = m.value + excluded.value, updated_at = now()
)
SELECT count(*) FROM gone
""".strip()
FOLD_AFTER_SECONDS = 3600

TOTALS_SQL = """
SELECT metric, label, sum(value)
FROM notifications.drain_metrics
GROUP BY metric, label
""".strip()

# Queue depth by channel for every state but sent: pending and processing (served by the
# claim, reaper and pending-half indexes), failed and dead (index-only scans of their own
# indexes, which carry the channel). Sent is most of the table and is given as a total, an
# estimate once the table is large (stats.queue_depth); sends per channel are the counters.
DEPTH_SQL = f"""
SELECT channel, {SHOWN_STATUS_SQL}, count(*)
FROM notifications.notification_deliveries
WHERE status IN ('{Status.PENDING}', '{Status.PROCESSING}')
GROUP BY 1, 2
UNION ALL
SELECT channel, '{Status.FAILED}', count(*) FROM notifications.notification_deliveries
WHERE {SHOWN_SQL[ShownStatus.FAILED]} GROUP BY 1
UNION ALL
SELECT channel, '{Status.DEAD}', count(*) FROM notifications.notification_deliveries
WHERE {SHOWN_SQL[ShownStatus.DEAD]} GROUP BY 1
""".strip()

# The oldest due row of each lane present in the queue, found by probes of the claim index
# (lane, next_attempt_at, …) WHERE pending: the recursive part steps from one lane to the next
# (a loose index scan), so a backlog of due rows is never read row by row (a plain min() over
# them read 34 k index entries, 119 ms, at 10 M rows). Lanes come from the table, not from
# settings: rows left in a lane no longer configured show their age until the next reaper run
# moves them to the default lane (outbox.adopt_lost_lanes).
OLDEST_DUE_SQL = f"""
{outbox.PENDING_LANES_CTE}
SELECT extract(epoch FROM now() - min((
    SELECT min(next_attempt_at) FROM notifications.notification_deliveries
    WHERE {DUE_SQL} AND lane = lanes.lane
)))
FROM lanes WHERE lane IS NOT NULL
""".strip()

# Every loop that has not stopped cleanly, for an hour after its last tick: a loop that stalls
# shows an age that grows, rather than vanishing; one killed outright drops out after the hour
# (its replacement has a name of its own). `fresh` says whether it ticked on time. Not the
# one-shot drains' rows (the cron trigger's, drain_outbox --once's): they are no loops, and
# between two runs they are meant to be quiet.
HEARTBEATS_SQL = """
SELECT worker, extract(epoch FROM now() - ticked_at),
       ticked_at > now() - make_interval(
           secs => interval_seconds * %(stale)s + %(batch_seconds)s
       ) AS fresh
FROM notifications.drain_heartbeats
WHERE stopped_at IS NULL AND ticked_at > now() - interval '1 hour'
  AND worker <> ALL(%(one_shot)s)
""".strip()


# The deliveries of the broadcasts due in the last day (or later: a scheduled one counts from
# when it is due), by status. Its cost is not the broadcasts table's but their deliveries': one
# probe of the notifications' (broadcast, user) index per recipient and one of the deliveries'
# (notification, channel) index per row, so a day that broadcast to a million recipients on two
# channels has each scrape read some three million index entries. The bound keeps it to the
# broadcasts still being delivered; the counters (v10r_outbox_sends) cover the rest.
BROADCAST_DELIVERIES_SQL = """
SELECT d.status, count(*)
FROM notifications.broadcasts AS b
JOIN notifications.notifications AS n ON n.broadcast_id = b.id
JOIN notifications.notification_deliveries AS d ON d.notification_id = n.id
WHERE coalesce(b.send_at, b.created_at) > now() - make_interval(secs => %(seconds)s)
GROUP BY 1
""".strip()
BROADCAST_DELIVERIES_WINDOW = timedelta(days=1)


class Tally:
    """What one process did since its last flush: counter increments and histogram samples."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], float] = {}

    def add(self, metric: str, label: str, value: float = 1.0) -> None:
        key = (metric, label)
        self.values[key] = self.values.get(key, 0.0) + value

    def observe(self, metric: str, seconds: float) -> None:
        index = bisect.bisect_left(BUCKETS, seconds)
        self.add(f"{metric}_bucket", str(BUCKETS[index]) if index < len(BUCKETS) else "+Inf")
        # In whole microseconds: integers add up exactly in a double, in any order, so the sum
        # a scrape reads over many rows never moves backwards by a rounding (Prometheus would
        # take that for a counter reset).
        self.add(f"{metric}_sum_us", "", round(seconds * 1_000_000))
        self.add(f"{metric}_count", "")

    def count_report(self, report) -> None:
        """Take one drain's Report into the tally."""
        for channel, outcomes in report.by_channel.items():
            for outcome, count in outcomes.items():
                self.add("sends", f"{channel}|{outcome}", count)
        self.add("reaped", "", report.reaped)
        self.add("fenced_off", "", report.fenced_off)
        for seconds in report.claim_seconds:
            self.observe("claim_seconds", seconds)
        for seconds in report.write_seconds:
            self.observe("write_seconds", seconds)

    def flush(self, *, worker: str) -> None:
        """Add the tally to this worker's rows, and start again from zero."""
        items = [(key, value) for key, value in self.values.items() if value]
        if items:
            with connection.cursor() as cursor:
                cursor.execute(
                    FLUSH_SQL,
                    {
                        "worker": worker,
                        "metrics": [metric for (metric, _label), _value in items],
                        "labels": [label for (_metric, label), _value in items],
                        "values": [value for _key, value in items],
                    },
                )
        self.values.clear()


class QueueCollector(Collector):
    """Reads every number from the database each time it is collected."""

    def collect(self) -> Iterable:
        with connection.cursor() as cursor:
            cursor.execute(TOTALS_SQL)
            totals = cursor.fetchall()
            cursor.execute(DEPTH_SQL)
            depth_rows = cursor.fetchall()
            cursor.execute(OLDEST_DUE_SQL)
            (oldest_due,) = cursor.fetchone()
            cursor.execute(
                HEARTBEATS_SQL,
                {
                    "stale": heartbeat.STALE_AFTER_INTERVALS,
                    # heartbeat.stale_after(): the intervals, and the longest batch.
                    "batch_seconds": (heartbeat.stale_after(timedelta(0)).total_seconds()),
                    "one_shot": list(heartbeat.ONE_SHOT_WORKERS),
                },
            )
            beats = cursor.fetchall()
            cursor.execute(
                BROADCAST_DELIVERIES_SQL,
                {"seconds": BROADCAST_DELIVERIES_WINDOW.total_seconds()},
            )
            broadcast_rows = cursor.fetchall()
        depth = stats.queue_depth()
        skipped = stats.skipped()
        yield from _depth(depth_rows, depth, skipped)
        oldest = GaugeMetricFamily(
            "v10r_outbox_oldest_due_seconds",
            "How long the longest-waiting due delivery has been due (0 when none is).",
        )
        oldest.add_metric([], float(oldest_due or 0))
        yield oldest
        yield from _counters(totals)
        beat = GaugeMetricFamily(
            "v10r_drain_heartbeat_age_seconds",
            "Seconds since each drain loop that has not stopped last ticked (kept for an hour).",
            labels=["worker"],
        )
        for worker, age, _fresh in beats:
            beat.add_metric([worker], float(age))
        yield beat
        loops = GaugeMetricFamily("v10r_drain_loops_running", "Drain loops ticking on time.")
        loops.add_metric([], sum(1 for *_, fresh in beats if fresh))
        yield loops
        size = GaugeMetricFamily(
            "v10r_outbox_table_bytes", "The deliveries table's size, indexes included."
        )
        size.add_metric([], float(stats.table_bytes()))
        yield size
        yield from _prune(retention.last_run())
        yield from _broadcasts(broadcast_rows)


# The states DEPTH_SQL counts per channel.
UNFINISHED = tuple(
    str(s)
    for s in (
        ShownStatus.PENDING,
        ShownStatus.RETRYING,
        ShownStatus.PROCESSING,
        ShownStatus.FAILED,
        ShownStatus.DEAD,
    )
)


def _depth(rows, depth, skipped: dict[tuple[str, str], int]) -> Iterable:
    family = GaugeMetricFamily(
        "v10r_outbox_deliveries",
        'Deliveries per state, per channel (sent and cancelled: one total each, channel "").',
        labels=["state", "channel"],
    )
    by_channel: dict[str, int] = {}
    for (channel, _reason), count in skipped.items():
        by_channel[channel] = by_channel.get(channel, 0) + count
    counts = {(channel, state): count for channel, state, count in rows}
    counts |= {(channel, str(Status.SKIPPED)): n for channel, n in by_channel.items()}
    # Every configured channel has each unfinished state's series, 0 when it has no rows: a
    # channel just added (a site's own) is there to graph and alert on before its first row.
    for channel in channels.configured():
        for state in UNFINISHED:
            counts.setdefault((channel, state), 0)
    for (channel, state), count in sorted(counts.items()):
        family.add_metric([state, channel], count)
    family.add_metric(["sent", ""], depth.sent)
    # Finished like sent, and counted the same way: a total from the state's own index.
    family.add_metric(["cancelled", ""], depth.cancelled)
    yield family
    estimated = GaugeMetricFamily(
        "v10r_outbox_sent_is_estimate",
        "1 when the sent count is PostgreSQL's estimate rather than a count.",
    )
    estimated.add_metric([], 1 if depth.sent_is_estimate else 0)
    yield estimated
    reasons = GaugeMetricFamily(
        "v10r_outbox_skipped_deliveries",
        "Deliveries written as skipped at enqueue (never sent), per channel and reason "
        "(opted_out, no_address, channel_off), until retention prunes them.",
        labels=["channel", "reason"],
    )
    for (channel, reason), count in sorted(skipped.items()):
        reasons.add_metric([channel, reason], count)
    yield reasons


def _counters(totals) -> Iterable:
    by_name: dict[str, dict[str, float]] = {}
    for metric, label, value in totals:
        by_name.setdefault(metric, {})[label] = float(value)
    sends = CounterMetricFamily(
        "v10r_outbox_sends",
        "Sends finished by drain processes, per channel and outcome "
        "(retrying: failed, will be tried again; unwanted: skipped when its turn came, as "
        "the recipient's choices no longer wanted it).",
        labels=["channel", "outcome"],
    )
    for label, value in sorted(by_name.get("sends", {}).items()):
        channel, _, outcome = label.partition("|")
        sends.add_metric([channel, outcome], value)
    yield sends
    for name, text in (
        ("reaped", "Deliveries the reaper put back after their lease ran out."),
        ("fenced_off", "Outcomes discarded because another claim had taken the row."),
        (
            "wakeups_heard",
            "Times a resident drain was woken by an enqueue's notification before its poll.",
        ),
        (
            "polls_found_work",
            "Polls (a resident drain's interval ran out, no wake-up) that claimed rows: with "
            "a listener that hears, few; rising with wakeups_heard flat, a deaf listener.",
        ),
        (
            "wakeup_probes_unheard",
            "Listening connections that did not hear their own test notification (deaf: a "
            "transaction pooler between them and the server).",
        ),
    ):
        family = CounterMetricFamily(f"v10r_outbox_{name}", text)
        family.add_metric([], by_name.get(name, {}).get("", 0.0))
        yield family
    for name, text in HISTOGRAMS.items():
        counts = by_name.get(f"{name}_bucket", {})
        cumulative, buckets = 0.0, []
        for bound in [*map(str, BUCKETS), "+Inf"]:
            cumulative += counts.get(bound, 0.0)
            buckets.append((bound, cumulative))
        family = HistogramMetricFamily(f"v10r_outbox_{name}", text)
        sum_us = by_name.get(f"{name}_sum_us", {}).get("", 0.0)
        family.add_metric([], buckets, sum_value=sum_us / 1_000_000)
        yield family


def _prune(last) -> Iterable:
    finished = GaugeMetricFamily(
        "v10r_outbox_prune_last_finished_timestamp_seconds",
        "When the last prune finished (Unix time; 0 if none has).",
    )
    finished.add_metric([], last.finished_at.timestamp() if last and last.finished_at else 0)
    yield finished
    deleted = GaugeMetricFamily(
        "v10r_outbox_prune_last_deleted",
        "What the last prune deleted.",
        labels=["kind"],
    )
    report = last.report if last else {}
    # The skipped deliveries' count is reported as skipped_deliveries: the report's "skipped"
    # says whether the run found another under way.
    kinds = {"sent": "sent", "skipped": "skipped_deliveries", "finished": "finished"}
    for kind, key in {**kinds, "notifications": "notifications"}.items():
        deleted.add_metric([kind], float(report.get(key, 0)))
    yield deleted
    seconds = GaugeMetricFamily("v10r_outbox_prune_last_seconds", "How long the last prune ran.")
    seconds.add_metric([], float(report.get("seconds", 0)))
    yield seconds


def _per_value(name: str, documentation: str, label: str, choices, counts) -> GaugeMetricFamily:
    """A gauge with one series per value of choices (a TextChoices), 0 where counts has none."""
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for choice in choices:
        family.add_metric([choice.value], counts.get(choice.value, 0))
    return family


def _broadcasts(delivery_rows) -> Iterable:
    """Broadcasts by state and their chunks by status, read from those two tables alone (as
    the admin's list reads them), and the recent broadcasts' deliveries (delivery_rows)."""
    states = dict(
        Broadcast.objects.with_state()
        .order_by()
        .values("state")
        .annotate(count=Count("pk"))
        .values_list("state", "count")
    )
    yield _per_value(
        "v10r_broadcasts",
        "Broadcasts per state: expanding (chunks wait to be expanded into deliveries), "
        "expanded, failed (a chunk failed for good; staff read its error on the broadcast's "
        "admin page), cancelled.",
        "state",
        BroadcastState,
        states,
    )
    statuses = dict(
        BroadcastChunk.objects.order_by()
        .values("status")
        .annotate(count=Count("pk"))
        .values_list("status", "count")
    )
    yield _per_value(
        "v10r_broadcast_chunks",
        "Broadcast chunks per status (pending, expanding, done, cancelled, failed).",
        "status",
        ChunkStatus,
        statuses,
    )
    yield _per_value(
        "v10r_broadcast_deliveries",
        "Deliveries of the broadcasts due in the last 24 hours (or later), per stored status.",
        "status",
        Status,
        dict(delivery_rows),
    )


def fold_retired() -> int:
    """Fold the counts of processes gone for an hour into the retired set; return the rows."""
    with connection.cursor() as cursor:
        cursor.execute(FOLD_SQL, {"retired": RETIRED, "idle": FOLD_AFTER_SECONDS})
        return cursor.fetchone()[0]


# Other apps' collectors (the jobs'), added in their AppConfig.ready(): /metrics answers for
# them without the queue importing them, as outbox_idle lets them tidy up.
_collectors: dict[str, Collector] = {}


def add_collector(name: str, collector: Collector) -> None:
    """Have /metrics collect collector too (once per name, however often ready() runs)."""
    _collectors[name] = collector


def registry() -> CollectorRegistry:
    """The queue's numbers and the added collectors' (no process metrics of the one
    answering)."""
    found = CollectorRegistry(auto_describe=False)
    found.register(QueueCollector())
    for collector in _collectors.values():
        found.register(collector)
    return found


def allowed(request, *, address: str) -> bool:
    """Whether request may read the metrics: the bearer token, or a client in the networks."""
    token = settings.METRICS_TOKEN
    if token:
        # The scheme's name is case-insensitive (RFC 9110); the token is not.
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode()):
            return True
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(client in network for network in settings.METRICS_ALLOWED_NETWORKS)


def enabled() -> bool:
    return bool(settings.METRICS_TOKEN or settings.METRICS_ALLOWED_NETWORKS)
