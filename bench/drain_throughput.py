"""Drain throughput: deliveries per second through the real claim, sends and fenced writes.

20,000 due deliveries on a no-op channel, drained by 1 and 2 processes at batch 25 and 100
(each process runs drain_once in a loop, as drain_outbox does, holding its connection).
Beside it, in the same run, the baseline: single-row UPDATE transactions per second from one
client on the same database. Medians of 3 runs.

    make bench            # or: .venv/bin/python bench/drain_throughput.py [--rows N] [--runs N]

Runs in its own database (v10r_bench) on the server DATABASE_URL names, or on the embedded one.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import environment, prepare_database, server_url  # noqa: E402 - after sys.path


def fill(url: str, rows: int) -> None:
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("TRUNCATE notifications.notification_deliveries, notifications.notifications")
        user_id = db.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, "
            "email, is_staff, is_active, date_joined) VALUES ('!', false, 'bench', '', '', "
            "'bench@example.com', false, true, now()) "
            "ON CONFLICT (username) DO UPDATE SET email = excluded.email RETURNING id"
        ).fetchone()[0]
        db.execute(
            """
            WITH n AS (
                INSERT INTO notifications.notifications
                    (id, user_id, type, message_key, message_params, action_url)
                SELECT gen_random_uuid(), %s, 'bench', 'queue.demo', '{"label": "b"}', ''
                FROM generate_series(1, %s)
                RETURNING id
            )
            INSERT INTO notifications.notification_deliveries (notification_id, channel,
                                                               next_attempt_at)
            SELECT id, 'noop', now() - interval '1 minute' FROM n
            """,
            [user_id, rows],
        )
        db.execute("VACUUM ANALYZE notifications.notification_deliveries")


def worker(url: str, batch_size: int, ready, start, results) -> None:
    os.environ.update(environment(url))
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    settings.DELIVERY_CHANNELS = {**settings.DELIVERY_CHANNELS, "noop": "bench.noop.NoopChannel"}
    from notifications import worker

    connection.ensure_connection()
    ready.release()
    start.wait()
    drained = 0
    while True:
        report = worker.drain_once(batch_size=batch_size)
        drained += report.sent
        if report.claimed == 0:
            break
    results.put((drained, time.perf_counter()))


def drain_run(url: str, *, processes: int, batch_size: int, rows: int) -> float:
    fill(url, rows)
    context = multiprocessing.get_context("spawn")
    ready = context.Semaphore(0)
    start = context.Event()
    results = context.Queue()
    procs = [
        context.Process(target=worker, args=(url, batch_size, ready, start, results))
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire()
    began = time.perf_counter()
    start.set()
    finished = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    total = sum(count for count, _ in finished)
    if total != rows:
        raise RuntimeError(f"drained {total} of {rows} deliveries")
    elapsed = max(end for _, end in finished) - began
    return rows / elapsed


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.rows < 1 or args.runs < 1:
        parser.error("--rows and --runs must be at least 1")

    url = server_url()
    prepare_database(url)
    configs = [(1, 25), (1, 100), (2, 25), (2, 100)]
    measured: dict[tuple[int, int] | str, list[float]] = {c: [] for c in configs}
    measured["baseline"] = []
    # Interleave the configurations run by run, so a noisy moment on this shared machine
    # does not land on one configuration only.
    for run in range(args.runs):
        fill(url, args.rows)
        measured["baseline"].append(baseline_run(url, updates=args.rows))
        for processes, batch in configs:
            rate = drain_run(url, processes=processes, batch_size=batch, rows=args.rows)
            measured[(processes, batch)].append(rate)
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)

    base = statistics.median(measured["baseline"])
    print(f"\nDrain throughput, {args.rows:,} deliveries, no-op channel, medians of {args.runs}\n")
    print("| configuration | deliveries/s | × baseline |")
    print("| --- | ---: | ---: |")
    print(f"| baseline: single-row UPDATE transactions, 1 client | {base:,.0f} | 1.00 |")
    for processes, batch in configs:
        rate = statistics.median(measured[(processes, batch)])
        print(f"| {processes} process(es), batch {batch} | {rate:,.0f} | {rate / base:.2f} |")
    print(
        "\nTargets: 2 processes at batch 100 ≥ 3× baseline; 1 process at batch 25 ≥ 1.2× baseline."
    )


if __name__ == "__main__":
    main()
