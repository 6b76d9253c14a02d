"""Broadcasts: 100,000 recipients queued by one send_broadcast, against a loop of
send_notification, in the same run.

The recipients are a static audience with a mix (by user id, one in twenty each): 10 % turned
the account category off on email, 5 % have no email address, 5 % are inside their quiet
hours (a window around now, email held), 5 % take the category as a daily digest; the rest
have nothing stored. The message is the welcome (category account) on email and inapp; the
email channel is bench/noop.py's NoopEmailChannel (bench/broadcast_settings.py): decided as
email, sending nothing.

Each round, from empty outbox tables:

- set-based: with --drains `manage.py drain_outbox` processes running (the site's defaults:
  batches of 25, a chunk expanded after each), send_broadcast in a transaction, committed.
  The call's wall and CPU time; from the call, the seconds to the first claimable row (the
  first chunk committed) and to the last (every chunk done), polled every 10 ms; the CPU the
  queueing cost a recipient (this process's call, the drains' processes and every backend on
  the bench database, from /proc; the drains send between chunks, and those sends are in
  it; a backend that ends meanwhile, a drain reconnecting, counts as last seen); then the
  seconds until no row is claimable or being sent (held rows and digest carriers wait for
  their windows, hours away) and the CPU a recipient cost by then.
- expansion alone: the same broadcast expanded by this process calling expand_next chunk
  after chunk, no drain running, every statement timed (connection.execute_wrapper): where a
  chunk's time goes. Wall time and CPU a recipient (this process and the backends).
- loop: send_notification to --sample recipients of the same mix (not the audience's), each
  in a transaction of its own, after a warm-up, no drain running: wall and CPU a recipient
  (this process and the backends), extrapolated to --recipients.

Medians of the rounds; the expansion profile's figures are medians over all its chunks.

    .venv/bin/python bench/broadcast.py [--recipients 100000] [--sample 5000] [--rounds 3]
        [--drains 2] [--explain] [--database v10r_bench]

BROADCAST_CHUNK_SIZE in the environment sets the chunks' size (default 1,000). Runs in its own
database (v10r_bench, or --database; dropped first) on the server DATABASE_URL names, or on the
embedded one; CPU from /proc only for a server on this machine.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.arguments import positive  # noqa: E402
from bench.database import (  # noqa: E402
    BENCH_DB,
    environment,
    prepare_database,
    server_url,
    start_drain,
)
from bench.pickup_latency import started  # noqa: E402
from bench.report import print_table  # noqa: E402
from bench.single_send import backend_cpu, backends_cpu, spent  # noqa: E402

SETTINGS = "bench.broadcast_settings"
MESSAGE = "welcome"  # category account
PARAMS = {"name": "everyone"}
CHANNELS = ["email", "inapp"]
AUDIENCE_PREFIX, LOOP_PREFIX = "bc-", "loop-"
WARM_UP = 100  # loop sends before its clock starts, to recipients of their own (the same mix)

# A user's place in the mix is their row number's remainder by 20.
OPTED_OUT, NO_ADDRESS, QUIET, DIGEST = (0, 1), (2,), (3,), (4,)

USERS_SQL = """
INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email,
                       is_staff, is_active, date_joined)
SELECT '!', false, %(prefix)s || lpad(n::text, 6, '0'), '', '',
       CASE WHEN n %% 20 = ANY(%(no_address)s) THEN '' ELSE %(prefix)s || n || '@example.com' END,
       false, true, now()
FROM generate_series(0, %(count)s - 1) AS n
"""
MIXED = """
WITH mixed AS (
    SELECT id, (row_number() OVER (ORDER BY id) - 1) %% 20 AS slot
    FROM auth_user WHERE username LIKE %(prefix)s || '%%'
)
"""
OPTED_OUT_SQL = (
    MIXED
    + """
INSERT INTO notifications.channel_preferences (user_id, category, channel, enabled)
SELECT id, 'account', 'email', false FROM mixed WHERE slot = ANY(%(slots)s)
"""
)
# Quiet hours from three hours ago to three hours ahead on UTC's clock, email held too.
QUIET_SQL = (
    MIXED
    + """
INSERT INTO notifications.recipients
    (user_id, language, time_zone, quiet_start, quiet_end, quiet_email)
SELECT id, 'en', 'UTC', (now() AT TIME ZONE 'UTC' - interval '3 hours')::time,
       (now() AT TIME ZONE 'UTC' + interval '3 hours')::time, true
FROM mixed WHERE slot = ANY(%(slots)s)
"""
)
# Daily at an hour twelve hours away: no digest window ends during the run.
DIGEST_SQL = (
    MIXED
    + """
INSERT INTO notifications.digest_choices (user_id, category, cadence, hour)
SELECT id, 'account', 'daily', (extract(hour FROM now() AT TIME ZONE 'UTC')::integer + 12) %% 24
FROM mixed WHERE slot = ANY(%(slots)s)
"""
)
# Whoever stored a choice has a version of their choices, as preferences.choose leaves it.
VERSIONS_SQL = (
    MIXED
    + """
INSERT INTO notifications.choices_versions (user_id, version)
SELECT id, 1 FROM mixed WHERE slot = ANY(%(slots)s)
"""
)

EMPTY_SQL = (
    "TRUNCATE notifications.digest_items, notifications.throttle_counts,"
    " notifications.notification_deliveries, notifications.notifications,"
    " notifications.broadcast_chunks, notifications.broadcasts CASCADE"
)
CHUNKS_SQL = """
SELECT count(*) FILTER (WHERE status NOT IN ('pending', 'expanding')), count(*)
FROM notifications.broadcast_chunks WHERE broadcast_id = %s
"""
# A row a drain could claim now, or one it is sending.
BUSY_SQL = """
SELECT EXISTS (SELECT FROM notifications.notification_deliveries
               WHERE status = 'pending' AND next_attempt_at <= now())
    OR EXISTS (SELECT FROM notifications.notification_deliveries WHERE status = 'processing')
"""


def fill(url: str, *, recipients: int, sample: int) -> None:
    """The audience's users and the loop's, each with the mix."""
    with psycopg.connect(url, autocommit=True) as db:
        for prefix, count in ((AUDIENCE_PREFIX, recipients), (LOOP_PREFIX, sample + WARM_UP)):
            fields = {"prefix": prefix, "count": count, "no_address": list(NO_ADDRESS)}
            db.execute(USERS_SQL, fields)
            for statement, slots in (
                (OPTED_OUT_SQL, OPTED_OUT),
                (QUIET_SQL, QUIET),
                (DIGEST_SQL, DIGEST),
                (VERSIONS_SQL, OPTED_OUT + QUIET + DIGEST),
            ):
                db.execute(statement, {"prefix": prefix, "slots": list(slots)})
        db.execute("VACUUM ANALYZE")


def setup_django(url: str) -> None:
    os.environ.update(environment(url))
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()


def make_audience():
    """A static audience of the recipients, added in one statement."""
    from django.contrib.auth import get_user_model

    from recipients import audiences
    from recipients.models import Audience, AudienceKind

    audience = Audience.objects.create(name="Broadcast bench", kind=AudienceKind.STATIC)
    members = get_user_model().objects.filter(username__startswith=AUDIENCE_PREFIX)
    audiences.add(audience, members)
    return audience


def empty() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(EMPTY_SQL)


def broadcast_to(audience):
    from django.db import transaction

    from notifications.broadcasts import send_broadcast

    with transaction.atomic():
        return send_broadcast(audience=audience, type=MESSAGE, params=PARAMS, channels=CHANNELS)


def machine_cpu(
    watch: psycopg.Connection, pids: list[int], seen: dict[int, float] | None = None
) -> dict[int, float]:
    """CPU seconds so far of pids and of every backend on the database but watch's own; with
    seen, also each backend seen there that has ended since, at what it was last seen."""
    with watch.cursor() as cursor:
        found = backends_cpu(cursor)
    found.pop(watch.info.backend_pid, None)
    for pid in pids:
        found[pid] = backend_cpu(pid)
    if seen is not None:
        # A drain reconnects (CONN_MAX_AGE): its old backend's CPU would be lost otherwise.
        seen.update(found)
        return dict(seen)
    return found


def checked(broadcast) -> dict[str, dict[str, int]]:
    """The broadcast's rows by channel and state; fails unless every chunk was expanded."""
    from notifications import broadcasts

    progress = broadcasts.progress(broadcast)
    if progress.expanded != progress.total or progress.chunks_failed:
        raise RuntimeError(
            f"{progress.expanded} of {progress.total} recipients expanded,"
            f" {progress.chunks_failed} chunks failed"
        )
    return progress.channels


def set_based(url: str, audience, *, drains: int) -> dict[str, float]:
    """One broadcast with drains running: the figures of the module's docstring."""
    from django.db import connection

    empty()
    env = environment(url) | {"DJANGO_SETTINGS_MODULE": SETTINGS}
    procs = [start_drain(env) for _ in range(drains)]
    try:
        for proc in procs:
            started(url, proc.pid)
        pids = [proc.pid for proc in procs]
        with psycopg.connect(url, autocommit=True) as watch:
            connection.ensure_connection()  # its backend counted from before the call
            before = machine_cpu(watch, pids)
            seen = dict(before)
            began, cpu = time.perf_counter(), time.process_time()
            broadcast = broadcast_to(audience)
            call, call_cpu = time.perf_counter() - began, time.process_time() - cpu
            first, looked = None, time.perf_counter()
            while True:
                done, total = watch.execute(CHUNKS_SQL, [broadcast.pk]).fetchone()
                now = time.perf_counter() - began
                if done and first is None:
                    first = now
                if done == total:
                    last = now
                    break
                if time.perf_counter() - looked > 0.5:
                    machine_cpu(watch, pids, seen)
                    looked = time.perf_counter()
                time.sleep(0.01)
            queued = machine_cpu(watch, pids, seen)
            while watch.execute(BUSY_SQL).fetchone()[0]:
                machine_cpu(watch, pids, seen)
                time.sleep(0.05)
            drained = time.perf_counter() - began
            finished = machine_cpu(watch, pids, seen)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)
    n = broadcast.recipients
    return {
        "call": call,
        "call CPU": call_cpu,
        "first": first,
        "last": last,
        "queue CPU": (call_cpu + spent(before, queued)) / n * 1000,
        "drained": drained,
        "drained CPU": (call_cpu + spent(before, finished)) / n * 1000,
        "rows": checked(broadcast),
    }


class StatementClock:
    """A connection.execute_wrapper: the time of each statement, by what it is, for the chunk
    under way."""

    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.chunk: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()

    def __call__(self, execute, sql, params, many, context):
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            label = self.labels.get(sql, "other statements (the digest joins)")
            self.chunk[label] += time.perf_counter() - began
            self.counts[label] += 1

    def timed(self, function, label: str):
        """function, with its whole time (Python too) added to the chunk's under label."""

        @functools.wraps(function)
        def run(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.chunk[label] += time.perf_counter() - began

        return run


def expansion_alone(url: str, audience) -> tuple[dict[str, float], dict[str, list[float]]]:
    """The broadcast expanded chunk after chunk by this process, no drain running: the wall
    time and CPU a recipient and the statements of each label a chunk ran; and each label's
    time in every chunk (ms)."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from notifications import broadcasts, drain

    empty()
    broadcast = broadcast_to(audience)
    table = connection.ops.quote_name(get_user_model()._meta.db_table)
    labels = {
        broadcasts.CLAIM_CHUNK_SQL: "CLAIM_CHUNK_SQL",
        broadcasts.BROADCAST_SQL: "BROADCAST_SQL (FOR SHARE)",
        broadcasts.DECIDE_SQL.format(users=table): "DECIDE_SQL",
        broadcasts.THROTTLE_EACH_SQL: "THROTTLE_EACH_SQL",
        broadcasts.NOTIFY_EACH_SQL: "NOTIFY_EACH_SQL",
        broadcasts.DELIVER_EACH_SQL: "DELIVER_EACH_SQL",
        broadcasts.FINISH_CHUNK_SQL: "FINISH_CHUNK_SQL",
    }
    clock = StatementClock(labels)
    # Wrapped here only, to split each function's Python from its statements.
    wrapped = {name: getattr(broadcasts, name) for name in ("_decide", "_throttled", "_gather")}
    for name, function in wrapped.items():
        setattr(broadcasts, name, clock.timed(function, f"{name}() whole"))
    chunks: dict[str, list[float]] = {}
    try:
        with psycopg.connect(url, autocommit=True) as watch:
            connection.ensure_connection()
            before = machine_cpu(watch, [])
            began, cpu = time.perf_counter(), time.process_time()
            with connection.execute_wrapper(clock):
                while True:
                    clock.chunk.clear()
                    start = time.perf_counter()
                    expanded = broadcasts.expand_next(lanes=drain.LANE_NAMES)
                    if expanded is None:
                        break
                    clock.chunk["expand_next() whole"] = time.perf_counter() - start
                    for label, seconds in clock.chunk.items():
                        chunks.setdefault(label, []).append(seconds * 1000)
            wall, cpu = time.perf_counter() - began, time.process_time() - cpu
            backend = spent(before, machine_cpu(watch, []))
    finally:
        for name, function in wrapped.items():
            setattr(broadcasts, name, function)
    checked(broadcast)
    n, made = broadcast.recipients, len(chunks["expand_next() whole"])
    # The last claim found nothing; it is no chunk's.
    clock.counts["CLAIM_CHUNK_SQL"] -= 1
    figures = {"wall": wall, "CPU": (cpu + backend) / n * 1000}
    figures |= {f"{label}: statements a chunk": c / made for label, c in clock.counts.items()}
    return figures, chunks


def explain_decide(audience) -> str:
    """EXPLAIN ANALYZE of DECIDE_SQL on the first chunk's users, as _decide runs it, and its
    execution time with jit off."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from notifications import broadcasts
    from recipients import audiences, catalogue

    users = list(audiences.members(audience).order_by("pk").values_list("pk", flat=True))
    users = users[: broadcasts.settings.BROADCAST_CHUNK_SIZE]
    category = catalogue.CATEGORIES[catalogue.MESSAGES[MESSAGE].category]
    offered, fallback = broadcasts._offered(CHANNELS, category)
    table = connection.ops.quote_name(get_user_model()._meta.db_table)
    params = {
        "users": users,
        "channels": offered,
        "named": True,
        "fallback": fallback,
        "category": catalogue.MESSAGES[MESSAGE].category,
        "required": category.required,
        "when": None,
        "zones": broadcasts._zones(),
    }
    statement = "EXPLAIN (ANALYZE, BUFFERS) " + broadcasts.DECIDE_SQL.format(users=table)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        plan = [line for (line,) in cursor.fetchall()]
        # The same without JIT compilation, for the cost of compiling it each chunk.
        with transaction.atomic():
            cursor.execute("SET LOCAL jit = off")
            cursor.execute(statement, params)
            unjitted = [line for (line,) in cursor.fetchall() if line.startswith("Execution")]
    return "\n".join([*plan, "", "With jit off:", *unjitted])


def loop(url: str, *, sample: int) -> dict[str, float]:
    """send_notification to sample recipients of the mix, a transaction each, no drain
    running: wall and CPU a recipient (ms)."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from notifications.enqueue import send_notification

    empty()
    users = list(get_user_model().objects.filter(username__startswith=LOOP_PREFIX).order_by("pk"))

    def send(user) -> None:
        with transaction.atomic():
            send_notification(user=user, type=MESSAGE, params=PARAMS, channels=CHANNELS)

    for user in users[:WARM_UP]:
        send(user)
    with psycopg.connect(url, autocommit=True) as watch:
        before = machine_cpu(watch, [])
        began, cpu = time.perf_counter(), time.process_time()
        for user in users[WARM_UP : WARM_UP + sample]:
            send(user)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        backend = spent(before, machine_cpu(watch, []))
    connection.close()
    return {"wall": wall / sample * 1000, "CPU": (cpu + backend) / sample * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipients", type=positive, default=100_000)
    parser.add_argument("--sample", type=positive, default=5000, help="the loop's recipients")
    parser.add_argument("--rounds", type=positive, default=3)
    parser.add_argument("--drains", type=positive, default=2)
    parser.add_argument("--explain", action="store_true", help="print DECIDE_SQL's plan")
    parser.add_argument(
        "--database", default=BENCH_DB, help="the bench database's name (dropped first)"
    )
    args = parser.parse_args()

    url = server_url(args.database)
    prepare_database(url)
    fill(url, recipients=args.recipients, sample=args.sample)
    setup_django(url)
    audience = make_audience()
    if args.explain:
        print(explain_decide(audience), file=sys.stderr)

    rounds: list[tuple[dict, dict, dict]] = []
    profiles: dict[str, list[float]] = {}
    for turn in range(args.rounds):
        together = set_based(url, audience, drains=args.drains)
        alone, chunks = expansion_alone(url, audience)
        for label, values in chunks.items():
            profiles.setdefault(label, []).extend(values)
        one_by_one = loop(url, sample=args.sample)
        rounds.append((together, alone, one_by_one))
        print(
            f"round {turn + 1} of {args.rounds}: queued in {together['last']:.2f} s,"
            f" {together['queue CPU']:.3f} ms CPU a recipient; drained in"
            f" {together['drained']:.1f} s; alone {alone['wall']:.2f} s;"
            f" loop {one_by_one['wall']:.3f} ms a recipient",
            file=sys.stderr,
        )

    def median(part: int, key: str) -> float:
        return statistics.median(r[part][key] for r in rounds)

    n = args.recipients
    loop_wall, loop_cpu = median(2, "wall"), median(2, "CPU")
    loop_seconds = loop_wall * n / 1000
    queued, queue_cpu = median(0, "last"), median(0, "queue CPU")
    alone_wall, alone_cpu = median(1, "wall"), median(1, "CPU")
    print(
        f"\n{n:,} recipients, welcome on email (sends nothing) and inapp,"
        f" {args.drains} drains, medians of {args.rounds} rounds; the loop measured on"
        f" {args.sample:,} recipients of the same mix and extrapolated\n"
    )
    na = "–"
    print_table(
        ["", "set-based", "loop (extrapolated)", "loop ÷ set-based"],
        [
            [
                "queued, s (set-based: to the last claimable row)",
                f"{queued:.2f}",
                f"{loop_seconds:.1f}",
                f"{loop_seconds / queued:.1f}×",
            ],
            [
                "CPU a recipient to queue, ms (drains' sends meanwhile included)",
                f"{queue_cpu:.3f}",
                f"{loop_cpu:.3f}",
                f"{loop_cpu / queue_cpu:.1f}×",
            ],
            [
                "expansion alone, one process: s / CPU ms a recipient",
                f"{alone_wall:.2f} / {alone_cpu:.3f}",
                f"{loop_seconds:.1f} / {loop_cpu:.3f}",
                f"{loop_seconds / alone_wall:.1f}× / {loop_cpu / alone_cpu:.1f}×",
            ],
            [
                "send_broadcast's call: s / CPU s",
                f"{median(0, 'call'):.3f} / {median(0, 'call CPU'):.3f}",
                na,
                na,
            ],
            [
                "first claimable row, s from the call",
                f"{median(0, 'first'):.3f}",
                f"{loop_wall / 1000:.4f}",
                na,
            ],
            ["last claimable row, s from the call", f"{queued:.2f}", f"{loop_seconds:.1f}", na],
            [
                "drained (nothing claimable or sending), s from the call",
                f"{median(0, 'drained'):.1f}",
                na,
                na,
            ],
            [
                "CPU a recipient to drained, ms",
                f"{median(0, 'drained CPU'):.3f}",
                na,
                na,
            ],
        ],
    )
    print("\nThe last round's rows, by channel and state")
    rows = rounds[-1][0]["rows"]
    print_table(
        ["channel", "states"],
        [[name, ", ".join(f"{k} {v:,}" for k, v in sorted(s.items()))] for name, s in rows.items()],
    )
    chunk_count = len(profiles["expand_next() whole"])
    print(f"\nOne chunk's expansion, alone, ms: medians and p90 over {chunk_count} chunks")
    order = sorted(profiles, key=lambda label: -statistics.median(profiles[label]))
    print_table(
        ["", "median", "p90"],
        [
            [
                label,
                f"{statistics.median(profiles[label]):.2f}",
                f"{statistics.quantiles(profiles[label], n=10)[-1]:.2f}"
                if len(profiles[label]) > 1
                else "",
            ]
            for label in order
        ],
    )
    counts = {k.split(": ")[0]: v for k, v in rounds[-1][1].items() if ": statements" in k}
    print("\nStatements a chunk ran, by what they are")
    print_table(["", "a chunk"], [[k, f"{v:.1f}"] for k, v in sorted(counts.items())])


if __name__ == "__main__":
    main()
