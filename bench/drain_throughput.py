"""Drain throughput: deliveries per second through the real claim, sends and fenced writes.

20,000 due deliveries on a no-op channel, drained by 1 and 2 processes at batch 25 and 100
(each process turns a Worker as drain_outbox does, holding its connection).
Beside it, in the same runs, two yardsticks:

- the plain loop: the same claim and grouped, fenced writes (outbox's own statements, with
  the parameters the drain passes them) from plain psycopg, with nothing else in the loop;
- the baseline: single-row UPDATE transactions per second from one client;
The drain runs with DATABASE_PREPARED_STATEMENTS on, as a connection straight to the server
may (psycopg prepares a statement on its fifth run, as it does in the plain loop). With
--unprepared, both run again with nothing prepared, as through PgBouncer in transaction
pooling, which keeps no prepared statement: the server plans each statement anew, and this
side shows what that costs.

Medians of 3 runs; each run drains every configuration with both the project and the plain
loop, so a noisy moment on a shared machine lands on both. Beside the rates, the CPU time a
delivery cost: the draining processes' own and their database backends' (read from /proc, so
only for a server on this machine), which moves far less than a rate with whatever else the
machine runs.

    make bench            # or: .venv/bin/python bench/drain_throughput.py
                          #     [--rows N] [--runs N] [--configs 1x25,2x100]
                          #     [--database v10r_bench] [--unprepared]
                          #     [--messages demo|chosen]

Runs in its own database (v10r_bench, or --database; dropped first) on the server DATABASE_URL
names, or on the embedded one.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench import database, workers  # noqa: E402 - after sys.path

CONFIGS = [(1, 25), (1, 100), (2, 25), (2, 100)]  # (processes, batch size)

# (processes, batch size, minimum rate, measured against)
TARGETS = [
    (2, 100, 3.0, "baseline"),
    (1, 25, 1.2, "baseline"),
    (2, 100, 0.8, "plain"),
    (1, 25, 0.6, "plain"),
]


# What the rows carry. "demo": the showcase's message, whose category nobody chooses, so a
# drain reads no recipient's choices for it. "chosen": the welcome message (category account),
# for RECIPIENTS users who each have a settings row and a stored choice, so a drain reads their
# choices again for every batch before it sends (the recipients' part of a real batch).
MESSAGES = {
    "demo": ("bench", "queue.demo", '{"label": "b"}'),
    "chosen": ("welcome", "welcome", '{"name": "b"}'),
}
RECIPIENTS = 100


def fill(url: str, rows: int, messages: str = "demo") -> None:
    kind, key, params = MESSAGES[messages]
    users = RECIPIENTS if messages == "chosen" else 1
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "TRUNCATE notifications.notification_deliveries, notifications.notifications CASCADE"
        )
        db.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, "
            "email, is_staff, is_active, date_joined) "
            "SELECT '!', false, 'bench' || n, '', '', 'bench' || n || '@example.com', false, "
            "true, now() FROM generate_series(1, %s) AS n "
            "ON CONFLICT (username) DO UPDATE SET email = excluded.email",
            [users],
        )
        ids = [
            row[0]
            for row in db.execute(
                "SELECT id FROM auth_user WHERE username = ANY(%s) ORDER BY id",
                [[f"bench{n}" for n in range(1, users + 1)]],
            )
        ]
        if messages == "chosen":
            db.execute(
                "INSERT INTO notifications.recipients (user_id, language, time_zone, quiet_email) "
                "SELECT unnest(%s::bigint[]), 'de', 'Europe/Berlin', false "
                "ON CONFLICT (user_id) DO NOTHING",
                [ids],
            )
            db.execute(
                "INSERT INTO notifications.channel_preferences (user_id, category, channel, "
                "enabled) SELECT unnest(%s::bigint[]), 'account', 'webhook', true "
                "ON CONFLICT DO NOTHING",
                [ids],
            )
        db.execute(
            """
            WITH n AS (
                INSERT INTO notifications.notifications
                    (id, user_id, type, message_key, message_params, action_url)
                SELECT gen_random_uuid(), (%s::bigint[])[1 + n %% %s], %s, %s, %s::jsonb, ''
                FROM generate_series(1, %s) AS n
                RETURNING id
            )
            INSERT INTO notifications.notification_deliveries (notification_id, channel,
                                                               next_attempt_at)
            SELECT id, 'noop', now() - interval '1 minute' FROM n
            """,
            [ids, users, kind, key, params, rows],
        )
        db.execute("VACUUM ANALYZE notifications.notification_deliveries")


class CPUClock:
    """The CPU time this process and its database backend have spent, in seconds: what a
    drain costs the machine, whatever else the machine runs meanwhile. The backend's is read
    from /proc, so only on a server on this machine (None elsewhere)."""

    def __init__(self, backend_pid: int) -> None:
        self.stat = Path(f"/proc/{backend_pid}/stat")
        self.began = self.read()

    def read(self) -> tuple[float, float | None]:
        try:
            # utime and stime, the 14th and 15th fields, after the ")" that ends the name.
            fields = self.stat.read_text().rsplit(")", 1)[1].split()
            backend = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            backend = None
        return time.process_time(), backend

    def spent(self) -> tuple[float, float | None]:
        (client0, backend0), (client1, backend1) = self.began, self.read()
        backend = None if backend0 is None or backend1 is None else backend1 - backend0
        return client1 - client0, backend

    @classmethod
    def at_start(cls, ready, start) -> CPUClock:
        """Say this worker is ready, wait for the start, and start the clock then, on this
        process and the backend of its Django connection."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            (backend_pid,) = cursor.fetchone()
        ready.release()
        start.wait()
        return cls(backend_pid)


def setup_django(url: str) -> None:
    os.environ.update(database.environment(url))
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()


def worker(url: str, batch_size: int, ready, start, results, *, prepared: bool = True) -> None:
    # This benchmark's server is reached straight, where DATABASE_PREPARED_STATEMENTS may be on
    # (v10r/settings.py); prepared=False runs the drain as it runs through PgBouncer.
    os.environ["DATABASE_PREPARED_STATEMENTS"] = "1" if prepared else "0"
    setup_django(url)
    from django.conf import settings

    settings.DELIVERY_CHANNELS = {**settings.DELIVERY_CHANNELS, "noop": "bench.noop.NoopChannel"}
    from datetime import timedelta

    from django.db import close_old_connections

    import transports as channels
    from notifications import heartbeat
    from notifications.drain import Policy
    from notifications.worker import Worker

    # The worker drain_outbox builds, turned as Worker.run turns it (the connection checked
    # only after a rest, a heartbeat at most once a second, the reaper once an interval),
    # until a turn finds nothing to claim.
    loop = Worker(
        name=heartbeat.worker_id(),
        interval=timedelta(seconds=settings.DELIVERY_INTERVAL_SECONDS),
        policy=Policy.from_settings().with_changes(batch_size=batch_size),
    )
    # drain_outbox's start-up checks build every configured channel before its loop
    # (notifications/checks.py); without them here, the first resting tick would, inside the
    # clock: 13-15 ms of imports a process, over a microsecond a delivery at 10,000 rows.
    channels.configured()
    clock = CPUClock.at_start(ready, start)
    drained = 0
    hurried = False
    while True:
        if not hurried:
            close_old_connections()
        report = loop.tick()
        drained += report.sent
        hurried = report.more_due
        if report.claimed == 0:
            break
    results.put((drained, time.perf_counter(), *clock.spent()))
    loop.close()


def plain_worker(url: str, batch_size: int, ready, start, results, *, prepare: bool = True):
    """Claim, "send" and write with outbox's statements from plain psycopg: no reaper, no
    threads, no heartbeat, no ORM. Django is set up only to read the statements and the
    settings before the clock starts; the loop never touches it."""
    setup_django(url)

    from notifications import drain, outbox

    # The parameters drain.drain passes to outbox.claim (the statement has a lane per
    # DELIVERY_LANES, each probed; the rows here are all in the default lane).
    claim_params = {"batch_size": batch_size}
    flush_every = drain.FLUSH_EVERY

    # Plain psycopg's defaults apart from autocommit (Django's default too): server-side
    # binding, and statements prepared after a few runs, which Django's backend turns off
    # (a prepared statement lives on one server connection, which PgBouncer in transaction
    # pooling does not keep). prepare=False turns it off here too.
    threshold = {} if prepare else {"prepare_threshold": None}
    with psycopg.connect(url, autocommit=True, **threshold) as db:
        backend_pid = db.info.backend_pid
        ready.release()
        start.wait()
        clock = CPUClock(backend_pid)
        written = 0

        def write(ids: list[int], fences: list[int], provider_ids: list[str]) -> int:
            # The parameter outbox.write_outcomes builds from Outcome.sent rows.
            outcomes = json.dumps(
                [
                    {
                        "id": delivery_id,
                        "attempts": fence,
                        "status": "sent",
                        "delay_seconds": 0.0,
                        "provider_message_id": provider_id,
                        "error_code": "",
                        "error_message": "",
                        "throttled": False,
                    }
                    for delivery_id, fence, provider_id in zip(
                        ids, fences, provider_ids, strict=True
                    )
                ]
            )
            cursor = db.execute(outbox.WRITE_OUTCOMES_SQL, {"outcomes": outcomes})
            return len(cursor.fetchall())

        while True:
            cursor = db.execute(outbox.CLAIM_SQL, claim_params)
            rows = cursor.fetchall()
            if not rows:
                break
            names = [column.name for column in cursor.description]
            id_at, fence_at = names.index("id"), names.index("attempts")
            ids, fences, provider_ids = [], [], []
            # Flushed like drain's writer: at least every FLUSH_EVERY, and at the end.
            last_flush = time.monotonic()
            for row in rows:
                ids.append(row[id_at])
                fences.append(row[fence_at])
                provider_ids.append(f"noop-{row[id_at]}")  # what NoopChannel.send returns
                if time.monotonic() - last_flush >= flush_every:
                    written += write(ids, fences, provider_ids)
                    ids, fences, provider_ids = [], [], []
                    last_flush = time.monotonic()
            if ids:
                written += write(ids, fences, provider_ids)
        spent = clock.spent()
    results.put((written, time.perf_counter(), *spent))


def unprepared_drain_worker(url: str, batch_size: int, ready, start, results) -> None:
    """The drain_outbox loop with DATABASE_PREPARED_STATEMENTS off, as through PgBouncer."""
    worker(url, batch_size, ready, start, results, prepared=False)


def unprepared_worker(url: str, batch_size: int, ready, start, results) -> None:
    """The plain loop with no statement prepared, as Django's backend runs every statement."""
    plain_worker(url, batch_size, ready, start, results, prepare=False)


def timed_run(
    url: str, target, *, processes: int, batch_size: int, rows: int, messages: str = "demo"
) -> Measured:
    """Fill the queue, drain it with processes running target; return deliveries/s and the
    CPU time a delivery took."""
    fill(url, rows, messages)
    context = multiprocessing.get_context("spawn")
    ready = context.Semaphore(0)
    start = context.Event()
    results = context.Queue()
    procs = [
        context.Process(target=target, args=(url, batch_size, ready, start, results))
        for _ in range(processes)
    ]
    workers.start_all(procs, ready, what=target.__name__)
    began = time.perf_counter()
    start.set()
    finished = workers.gather(procs, results, what=target.__name__, seconds=600)
    total = sum(count for count, *_ in finished)
    if total != rows:
        raise RuntimeError(f"{target.__name__} drained {total} of {rows} deliveries")
    check_all_sent(url, rows=rows, by=target.__name__)
    elapsed = max(end for _, end, *_ in finished) - began
    client = sum(spent for *_, spent, _ in finished)
    backends = [spent for *_, spent in finished]
    backend = None if None in backends else sum(backends)
    return Measured(rows / elapsed, client / rows, None if backend is None else backend / rows)


@dataclass(frozen=True)
class Measured:
    rate: float  # deliveries per second
    client_cpu: float  # CPU seconds a delivery cost the draining processes
    backend_cpu: float | None  # and their database backends (None: not on this machine)

    @property
    def cpu(self) -> float | None:
        return None if self.backend_cpu is None else self.client_cpu + self.backend_cpu


def check_all_sent(url: str, *, rows: int, by: str) -> None:
    """Raise unless every delivery ended as the project's drain leaves a no-op send."""
    with psycopg.connect(url, autocommit=True) as db:
        done = db.execute(
            """
            SELECT count(*) FROM notifications.notification_deliveries
            WHERE status = 'sent' AND attempts = 1 AND attempted_at IS NOT NULL
              AND sent_at IS NOT NULL AND provider_message_id = 'noop-' || id
              AND error_code = '' AND error_message = ''
              AND next_attempt_at < attempted_at
            """
        ).fetchone()[0]
    if done != rows:
        raise RuntimeError(f"{by}: {done} of {rows} deliveries ended sent as the drain leaves them")


def baseline_run(url: str, *, updates: int) -> float:
    """Single-row UPDATE transactions per second, one client, autocommit."""
    with psycopg.connect(url, autocommit=True) as db:
        ids = [
            r[0]
            for r in db.execute(
                "SELECT id FROM notifications.notification_deliveries ORDER BY id LIMIT %s",
                [updates],
            )
        ]
        statement = (
            "UPDATE notifications.notification_deliveries SET attempts = attempts + 1 WHERE id = %s"
        )
        began = time.perf_counter()
        for delivery_id in ids:
            db.execute(statement, [delivery_id])
        return len(ids) / (time.perf_counter() - began)


def parse_configs(text: str) -> list[tuple[int, int]]:
    """'1x25,2x100' → [(1, 25), (2, 100)]."""
    configs = []
    for item in text.split(","):
        processes, sep, batch = item.strip().lower().partition("x")
        if not (sep and processes.isdigit() and batch.isdigit()):
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r} is not PROCESSESxBATCH, such as 2x100"
            )
        if int(processes) < 1 or int(batch) < 1:
            raise argparse.ArgumentTypeError(f"{item.strip()!r}: both numbers must be at least 1")
        if (int(processes), int(batch)) not in configs:
            configs.append((int(processes), int(batch)))
    return configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--database", default=database.BENCH_DB, help="the bench database's name (dropped first)"
    )
    parser.add_argument(
        "--configs",
        type=parse_configs,
        default=CONFIGS,
        metavar="PxB,…",
        help="processes x batch size, comma-separated (default: 1x25,1x100,2x25,2x100)",
    )
    parser.add_argument(
        "--unprepared",
        action="store_true",
        help="also run the drain and the plain loop with no statement prepared, as through "
        "PgBouncer in transaction pooling",
    )
    parser.add_argument(
        "--messages",
        choices=sorted(MESSAGES),
        default="demo",
        help="demo: a category nobody chooses (no choices read); chosen: a category 100 "
        "recipients choose, whose choices a drain reads again for each batch",
    )
    args = parser.parse_args()
    if args.rows < 1 or args.runs < 1:
        parser.error("--rows and --runs must be at least 1")
    configs = args.configs

    url = database.server_url(args.database)
    database.prepare_database(url)
    sides = {"drain": worker, "plain": plain_worker}
    if args.unprepared:
        sides["drain, unprepared"] = unprepared_drain_worker
        sides["unprepared"] = unprepared_worker
    measured: dict[str, dict[tuple[int, int], list[Measured]]] = {
        side: {c: [] for c in configs} for side in sides
    }
    baseline: list[float] = []
    # Interleave the configurations run by run, and within each the project and the plain
    # loop, taking turns at going first, so drift on this shared machine does not favour one.
    for run in range(args.runs):
        fill(url, args.rows, args.messages)
        baseline.append(baseline_run(url, updates=args.rows))
        for processes, batch in configs:
            order = list(sides.items())
            for side, target in order if run % 2 == 0 else reversed(order):
                result = timed_run(
                    url,
                    target,
                    processes=processes,
                    batch_size=batch,
                    rows=args.rows,
                    messages=args.messages,
                )
                measured[side][(processes, batch)].append(result)
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)

    def rate(side: str, c) -> float:
        return statistics.median(m.rate for m in measured[side][c])

    def paired(side: str, c, of=lambda m: m.rate) -> list[float]:
        # The ratio to a yardstick pairs each run's drains, which ran back to back.
        return [of(a) / of(b) for a, b in zip(measured["drain"][c], measured[side][c], strict=True)]

    def cpu_cell(runs: list[Measured]) -> str:
        client = statistics.median(m.client_cpu for m in runs) * 1e6
        backend = statistics.median(m.backend_cpu for m in runs) * 1e6
        return f"{client:.1f} + {backend:.1f}"

    def spread(ratios: list[float]) -> str:
        return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"

    base = statistics.median(baseline)
    ratios = {c: paired("plain", c) for c in configs}
    print(
        f"\nDrain throughput, {args.rows:,} deliveries ({args.messages} messages), no-op channel,"
        f" medians of {args.runs}"
    )
    print("(drain / plain: the median of each run's ratio, and their range)\n")
    print(
        "| configuration | drain_outbox loop /s | plain loop /s | drain / plain "
        "| drain × baseline | plain × baseline |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(f"| baseline: single-row UPDATE transactions, 1 client | {base:,.0f} | | | 1.00 | |")
    for c in configs:
        drained, looped = rate("drain", c), rate("plain", c)
        print(
            f"| {c[0]} process(es), batch {c[1]} | {drained:,.0f} | {looped:,.0f} "
            f"| {spread(ratios[c])} | {drained / base:.2f} | {looped / base:.2f} |"
        )
    if args.unprepared:
        print("\nBoth with no statement prepared (DATABASE_PREPARED_STATEMENTS off, as through")
        print("PgBouncer in transaction pooling):\n")
        print("| configuration | drain, unprepared /s | plain, unprepared /s | drain / plain |")
        print("| --- | ---: | ---: | ---: |")
        for c in configs:
            pairs = [
                a.rate / b.rate
                for a, b in zip(
                    measured["drain, unprepared"][c], measured["unprepared"][c], strict=True
                )
            ]
            print(
                f"| {c[0]} process(es), batch {c[1]} | {rate('drain, unprepared', c):,.0f} "
                f"| {rate('unprepared', c):,.0f} | {spread(pairs)} |"
            )
    # What a delivery cost in CPU time, the drain's processes and their database backends
    # together: unlike a rate, this hardly moves with what else the machine runs.
    if all(m.cpu is not None for side in measured.values() for runs in side.values() for m in runs):
        print("\nCPU time per delivery, µs, the draining processes + their database backends")
        print("(plain / drain: the median of each run's ratio, and their range)\n")
        header = " | ".join(f"{side}" for side in sides)
        print(f"| configuration | {header} | plain / drain |")
        print("| --- | " + "---: | " * len(sides) + "---: |")
        for c in configs:
            cells = " | ".join(cpu_cell(measured[side][c]) for side in sides)
            cost = [1 / r for r in paired("plain", c, of=lambda m: m.cpu)]
            print(f"| {c[0]} process(es), batch {c[1]} | {cells} | {spread(cost)} |")
    rates = {c: (rate("drain", c), rate("plain", c)) for c in configs}
    print("\nTargets (the drain_outbox loop):")
    for processes, batch, minimum, against in TARGETS:
        goal = f"{processes} × {batch} ≥ {minimum}× {against}"
        if (processes, batch) not in rates:
            print(f"- {goal}: not measured in this run")
            continue
        if against == "baseline":
            ratio = rates[(processes, batch)][0] / base
        else:
            ratio = statistics.median(ratios[(processes, batch)])
        print(f"- {goal}: {ratio:.2f}× — {'met' if ratio >= minimum else 'not met'}")


if __name__ == "__main__":
    main()
