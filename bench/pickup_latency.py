"""Pickup latency: how long a committed delivery waits before a resident drain claims it.

One client commits single-row notifications (send_notification, email) at random spacing;
each row's wait is its attempted_at (stamped by the claim) minus clock_timestamp() read by the
client right after its commit, both the database's clock. Three set-ups, one drain_outbox
each at the default interval:

- listening: the drain LISTENs on its own database connection (the default);
- polling: DELIVERY_LISTEN_URL=off, the drain finds the row at its next tick;
- PgBouncer: the client and the drain's queries go through PgBouncer in transaction pooling,
  the drain listens on the direct URL (DELIVERY_LISTEN_URL).

Beside them, what the short interval costs and what the wake-up costs the enqueuing side:
an empty tick of the drain loop (its time and statements), and send_notification calls a
second with the wake-up on the waking thread, with the NOTIFY sent inline on the caller's
connection, and with none.

    .venv/bin/python bench/pickup_latency.py [--rows 200] [--spacing 20,200] [--calls 2000]
        [--setups listening,polling,pgbouncer] [--no-costs]

Runs in its own database (v10r_bench_pickup) on the server DATABASE_URL names, or on the
embedded one; PgBouncer (apt-get install pgbouncer) for the third set-up, skipped without it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import environment, prepare_database, server_url, start_drain  # noqa: E402
from bench.report import print_table  # noqa: E402

DATABASE = "v10r_bench_pickup"
# Targets: the listening drain's p50 and p99, and the polling drain's p99 over its interval.
LISTEN_P50_MS, LISTEN_P99_MS, POLL_MARGIN_MS = 20.0, 100.0, 50.0
# The enqueuing side: by how the wake-up goes, from one thread and from CLIENTS at once.
WAKE_VARIANTS = ("waking thread", "inline NOTIFY", "no wake-up")
CLIENTS = 8


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- The client (a process of its own, on the DATABASE_URL it is given) ------------------------


def set_up_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()


def bench_user():
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(
        username="bench-pickup", defaults={"email": "pickup@example.com"}
    )
    return user


def client_commits(rows: int, spacing: tuple[float, float]) -> dict[int, str]:
    """Commit rows single-row notifications; each delivery's id -> the clock after commit."""
    from django.db import connection

    from notifications import enqueue
    from notifications.models import NotificationDelivery

    user = bench_user()
    committed = {}
    for i in range(rows):
        time.sleep(random.uniform(*spacing) / 1000)
        notification = enqueue.send_notification(
            user=user, type="queue.demo", params={"label": f"p{i}"},
            channels=["email"],
        ).notification  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()::text")
            clock = cursor.fetchone()[0]
        delivery = NotificationDelivery.objects.get(notification=notification)
        committed[delivery.id] = clock
    return committed


def client_tick_cost(samples: int) -> dict:
    """An empty tick of the drain loop at rest: its time and its statements."""
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from notifications.worker import Worker

    worker = Worker(name="bench-pickup:tick", interval=timedelta(seconds=2))
    for _ in range(3):
        worker.tick()  # warm-up
    times = []
    statements = []
    for _ in range(samples):
        # The reaper's turn comes once an interval: every tick here, the dearest case.
        worker._last_reap = float("-inf")
        with CaptureQueriesContext(connection) as queries:
            began = time.perf_counter()
            worker.tick()
            times.append((time.perf_counter() - began) * 1000)
        statements.append(len(queries))
    worker.close()
    return {
        "p50_ms": percentile(times, 0.5),
        "p99_ms": percentile(times, 0.99),
        "statements": statistics.median(statements),
    }


def client_enqueue_rate(calls: int) -> dict:
    """send_notification calls a second, outside any transaction, by how the wake-up goes,
    from one thread and from CLIENTS threads at once (each with its own connection)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from notifications import enqueue, wakeup

    def inline() -> None:  # the first version: the NOTIFY on the caller's connection
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [wakeup.CHANNEL])

    user = bench_user()

    def send(count: int) -> None:
        for i in range(count):
            enqueue.send_notification(
                user=user, type="queue.demo",
                params={"label": f"e{i}"}, channels=["email"],
            )  # fmt: skip
        connection.close()

    threaded = wakeup.request_wake
    variants = dict(zip(WAKE_VARIANTS, (threaded, inline, lambda: None), strict=True))
    # What the committing thread itself spends in the wake-up, per commit.
    paid: dict[str, list[float]] = {name: [] for name in variants}

    def timed(name, wake):
        def call() -> None:
            began = time.perf_counter()
            wake()
            paid[name].append((time.perf_counter() - began) * 1_000_000)

        return call

    rates: dict[str, list[float]] = {f"{n} x{c}": [] for n in variants for c in (1, CLIENTS)}
    notifies = dict.fromkeys((1, CLIENTS), 0)
    for _ in range(3):  # interleaved, so a noisy moment lands on all of them
        for clients in (1, CLIENTS):
            for name, wake in variants.items():
                wakeup.request_wake = timed(name, wake)
                before = wakeup.waker().sent
                began = time.perf_counter()
                with ThreadPoolExecutor(clients) as pool:
                    list(pool.map(send, [calls // clients] * clients))
                rates[f"{name} x{clients}"].append(calls / (time.perf_counter() - began))
                if wake is threaded:
                    wakeup.waker().flush(timeout=10)
                    notifies[clients] += wakeup.waker().sent - before
    wakeup.request_wake = threaded
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE notifications.notifications CASCADE")
    return {
        "rates": {name: statistics.median(r) for name, r in rates.items()},
        "notifies": {str(c): n for c, n in notifies.items()},
        "paid_us": {name: percentile(us, 0.5) for name, us in paid.items()},
        "calls": calls * 3,
    }


def client(mode: str, args) -> None:
    set_up_django()
    if mode == "commits":
        lo, hi = (float(x) for x in args.spacing.split(","))
        result = client_commits(args.rows, (lo, hi))
    elif mode == "tick":
        result = client_tick_cost(args.samples)
    else:
        result = client_enqueue_rate(args.calls)
    print(json.dumps(result))


def run_client(url: str, mode: str, *options: str) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--client", mode, *options],
        cwd=BASE_DIR,
        env=environment(url) | {"V10R_CHANNELS": "email,demo"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the {mode} client failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- The runs --------------------------------------------------------------------------------


def waits(url: str, committed: dict[str, str]) -> list[float]:
    """Each row's wait for its claim, in ms (every row must have been claimed)."""
    with psycopg.connect(url) as db:
        rows = db.execute(
            "SELECT d.id, extract(epoch FROM d.attempted_at - c.at) * 1000"
            " FROM notifications.notification_deliveries d"
            " JOIN (SELECT key::bigint AS id, value::timestamptz AS at"
            "       FROM jsonb_each_text(%s::jsonb)) c ON c.id = d.id",
            [json.dumps(committed)],
        ).fetchall()
    missing = len(committed) - sum(1 for _, wait in rows if wait is not None)
    if missing:
        raise SystemExit(f"{missing} rows were never claimed")
    return [float(wait) for _, wait in rows]


def started(url: str, pid: int) -> None:
    """Wait until the drain has ticked (and, a moment later, listens)."""
    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as db:
        while time.monotonic() < deadline:
            beat = db.execute(
                "SELECT 1 FROM notifications.drain_heartbeats"
                " WHERE worker LIKE %s AND stopped_at IS NULL",
                [f"%:{pid}"],
            ).fetchone()
            if beat:
                time.sleep(0.5)
                return
            time.sleep(0.1)
    raise SystemExit("the drain did not start")


def pickup(url: str, *, drain_url: str, client_url: str, args, **settings: str) -> list[float]:
    env = environment(drain_url) | {
        "V10R_CHANNELS": "email,demo",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(args.smtp_port),
        **settings,
    }
    drain = start_drain(env)
    try:
        started(url, drain.pid)
        committed = run_client(
            client_url, "commits", "--rows", str(args.rows), "--spacing", args.spacing
        )
        time.sleep(float(args.interval) + 1)  # the last row's poll, in the polling set-up
    finally:
        drain.terminate()
        drain.wait(30)
    return waits(url, committed)


def pgbouncer_in_front(url: str):
    if not (shutil.which("pgbouncer") or os.path.exists("/usr/sbin/pgbouncer")):
        return None
    from tests.pgbouncer import PgBouncer

    params = conninfo_to_dict(url)
    # A server connection each for the client, its waking thread and the drain.
    return PgBouncer(host=params.get("host") or "127.0.0.1", port=params.get("port"), pool_size=4)


def costs(url: str, args) -> None:
    tick = run_client(url, "tick", "--samples", str(args.samples))
    print(f"An empty tick at rest (claim, reaper, heartbeat): p50 {tick['p50_ms']:.2f} ms, "
          f"p99 {tick['p99_ms']:.2f} ms, {tick['statements']:g} statements")  # fmt: skip

    rate = run_client(url, "enqueue", "--calls", str(args.calls))
    print(
        f"\nsend_notification calls a second ({args.calls} calls x 3, by 1 and {CLIENTS} threads):"
    )
    rows = []
    for clients in (1, CLIENTS):
        cells = [f"{rate['rates'][f'{name} x{clients}']:,.0f}" for name in WAKE_VARIANTS]
        notifies = rate["notifies"][str(clients)]
        rows.append([f"{clients}", *cells, f"{notifies:,} for {rate['calls']:,}"])
    print_table(["threads", *WAKE_VARIANTS, "the waking thread's NOTIFYs"], rows)
    paid = ", ".join(f"{name} {us:,.1f}" for name, us in rate["paid_us"].items())
    print(f"The committing thread's own time in the wake-up, p50 µs: {paid}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--spacing", default="20,200", help="ms between commits, low,high")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument(
        "--setups", default="listening,polling,pgbouncer", help="which set-ups to time"
    )
    parser.add_argument("--no-costs", action="store_true", help="skip the tick and enqueue")
    parser.add_argument("--client", choices=["commits", "tick", "enqueue"])
    args = parser.parse_args()
    if args.client:
        client(args.client, args)
        return

    from tests.smtp import SMTPServer

    url = server_url(DATABASE)
    prepare_database(url)
    env = environment(url)
    env["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    args.interval = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; import django; "
         "django.setup(); print(settings.DELIVERY_INTERVAL_SECONDS)"],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    interval_ms = float(args.interval) * 1000

    if not args.no_costs:
        costs(url, args)

    smtp = SMTPServer()
    args.smtp_port = smtp.port
    chosen = args.setups.split(",")
    setups = []
    if "listening" in chosen:
        setups.append(("listening", url, url, {}))
    if "polling" in chosen:
        setups.append(("polling", url, url, {"DELIVERY_LISTEN_URL": "off"}))
    bouncer = pgbouncer_in_front(url) if "pgbouncer" in chosen else None
    if bouncer is not None:
        through = bouncer.url(DATABASE)
        setups.append(
            ("PgBouncer, listening direct", through, through, {"DELIVERY_LISTEN_URL": url})
        )
    rows = []
    failed = []
    try:
        for name, drain_url, client_url, settings in setups:
            found = pickup(url, drain_url=drain_url, client_url=client_url, args=args, **settings)
            p50, p99 = percentile(found, 0.5), percentile(found, 0.99)
            rows.append([name, f"{len(found)}", f"{p50:.1f}", f"{p99:.1f}", f"{max(found):.1f}"])
            if name == "polling":
                if p99 > interval_ms + POLL_MARGIN_MS:
                    failed.append(f"{name}: p99 {p99:.0f} ms > interval + {POLL_MARGIN_MS:g} ms")
            elif p50 > LISTEN_P50_MS or p99 > LISTEN_P99_MS:
                failed.append(f"{name}: p50 {p50:.1f} / p99 {p99:.1f} ms over target")
    finally:
        smtp.stop()
        if bouncer is not None:
            bouncer.stop()
    print(f"\nCommit -> claim, ms ({args.rows} single-row commits {args.spacing} ms apart, "
          f"interval {float(args.interval):g} s):")  # fmt: skip
    print_table(["set-up", "rows", "p50", "p99", "max"], rows)
    if bouncer is None and "pgbouncer" in chosen:
        print("(PgBouncer is not installed: its set-up was skipped)")
    if failed:
        raise SystemExit("Targets missed: " + "; ".join(failed))


if __name__ == "__main__":
    main()
