"""Where a drain's time goes: one process, no-op channel, 20,000 rows, at batch 100 and 25.

For each batch size, two drains of a full queue:

- timed: each step of drain.drain wrapped with a clock (and every SQL statement timed through
  Django's execute_wrapper), reported per batch;
- profiled: cProfile over the same drain, top functions by cumulative and by own time.

--loop drain_once (the default) calls worker.drain_once as bench/drain_throughput.py does;
--loop tick runs what drain_outbox's loop runs each turn (and bench/drain_throughput.py's
drains): close_old_connections() unless the last batch came back full, then Worker.tick()
(its heartbeat included).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/v10r \\
        .venv/bin/python bench/profile_drain.py [--rows N] [--batch-sizes 100,25]
                                                [--loop drain_once|tick] [--top N]

cProfile sees every thread but inflates Python-heavy code (psycopg's client-side quoting most
of all). For a sampling view of the sender threads and the GIL, run the timed drain alone
under py-spy (pip install py-spy, in a virtualenv of its own):

    py-spy record --threads --gil -f raw -o drain.txt -- \\
        .venv/bin/python bench/profile_drain.py --batch-sizes 25 --no-cprofile

Drops and recreates the benchmarks' database, v10r_bench, like drain_throughput.py.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import os
import pstats
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench import database  # noqa: E402 - after sys.path
from bench.drain_throughput import fill  # noqa: E402


def drain_all(loop) -> tuple[int, int]:
    """Run loop() until the queue is empty; return (batches, rows sent)."""
    batches = sent = 0
    while True:
        report = loop()
        batches += 1
        sent += report.sent
        if report.claimed == 0:
            return batches, sent


def timed(totals: dict[str, float], counts: dict[str, int], name: str, function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        began = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            totals[name] += time.perf_counter() - began
            counts[name] += 1

    return wrapper


def timed_generator(totals: dict[str, float], name: str, function):
    """Time only what runs inside the generator (waiting on senders, hand-offs), not the
    caller's work between items (writer.add, flushes)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        items = function(*args, **kwargs)
        while True:
            began = time.perf_counter()
            try:
                item = next(items)
            except StopIteration:
                totals[name] += time.perf_counter() - began
                return
            totals[name] += time.perf_counter() - began
            yield item

    return wrapper


def phase_times(loop, *, rows: int, url: str) -> None:
    from django.db import connection

    from notifications import drain, heartbeat, outbox, worker

    totals: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    statements = {
        outbox.CLAIM_SQL: "claim",
        outbox.WRITE_OUTCOMES_SQL: "write_outcomes",
        outbox.RECLAIM_STALE_SQL: "reclaim_stale",
    }

    def sql_clock(execute, sql, params, many, context):
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            totals[f"SQL execute: {statements.get(sql, 'other')}"] += time.perf_counter() - began

    patches = [
        (
            outbox,
            "reclaim_stale",
            timed(totals, counts, "outbox.reclaim_stale", outbox.reclaim_stale),
        ),
        (outbox, "claim", timed(totals, counts, "outbox.claim", outbox.claim)),
        (drain, "_prepare", timed(totals, counts, "drain._prepare", drain._prepare)),
        (drain, "_send_all", timed_generator(totals, "drain._send_all (inside)", drain._send_all)),
        (
            outbox,
            "write_outcomes",
            timed(totals, counts, "outbox.write_outcomes", outbox.write_outcomes),
        ),
        (drain, "drain", timed(totals, counts, "drain.drain", drain.drain)),
        (heartbeat, "beat", timed(totals, counts, "heartbeat.beat", heartbeat.beat)),
        (
            connection,
            "close_if_health_check_failed",
            timed(totals, counts, "health check", connection.close_if_health_check_failed),
        ),
        (
            worker,
            "close_old_connections",
            timed(totals, counts, "close_old_connections", worker.close_old_connections),
        ),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    fill(url, rows)
    began = time.perf_counter()
    try:
        for owner, name, replacement in patches:
            setattr(owner, name, replacement)
        with connection.execute_wrapper(sql_clock):
            batches, sent = drain_all(loop)
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
    elapsed = time.perf_counter() - began
    if sent != rows:
        raise RuntimeError(f"sent {sent} of {rows} deliveries")
    print(f"timed: {batches} batches, {rows / elapsed:,.0f} deliveries/s\n")
    print("| step | ms per batch | share | calls |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| whole loop | {elapsed / batches * 1000:.3f} | 100% | {batches} |")
    for name, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        share = seconds / elapsed
        print(f"| {name} | {seconds / batches * 1000:.3f} | {share:.0%} | {counts.get(name, '')} |")


def profile(loop, *, rows: int, url: str, top: int) -> None:
    fill(url, rows)
    profiler = cProfile.Profile()
    profiler.enable()
    batches, sent = drain_all(loop)
    profiler.disable()
    if sent != rows:
        raise RuntimeError(f"sent {sent} of {rows} deliveries")
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats(order)
        stats.print_stats(top)
        body = out.getvalue()
        print(f"cProfile, {batches} batches, by {order}:")
        print(body[body.index("   ncalls") :])


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of whole numbers") from None
    if any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError("batch sizes must be at least 1")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch-sizes", type=parse_sizes, default=[100, 25], metavar="N,…")
    parser.add_argument("--loop", choices=["drain_once", "tick"], default="drain_once")
    parser.add_argument(
        "--database", default=database.BENCH_DB, help="the bench database's name (dropped first)"
    )
    parser.add_argument("--top", type=int, default=25, help="functions shown per ordering")
    parser.add_argument(
        "--cprofile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also drain under cProfile (--no-cprofile: the timed drain only, for py-spy)",
    )
    args = parser.parse_args()
    if args.rows < 1 or args.top < 1:
        parser.error("--rows and --top must be at least 1")

    url = database.server_url(args.database)
    database.prepare_database(url)
    os.environ.update(database.environment(url))
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()
    from django.conf import settings

    settings.DELIVERY_CHANNELS = {**settings.DELIVERY_CHANNELS, "noop": "bench.noop.NoopChannel"}
    from notifications import heartbeat, worker
    from notifications.drain import Policy

    for batch_size in args.batch_sizes:
        if args.loop == "drain_once":
            loop = functools.partial(worker.drain_once, batch_size=batch_size)
        else:
            ticker = worker.Worker(
                name=heartbeat.worker_id(),
                interval=timedelta(seconds=settings.DELIVERY_INTERVAL_SECONDS),
                policy=Policy.from_settings().with_changes(batch_size=batch_size),
            )

            last = {"more_due": False}

            def loop(ticker=ticker, last=last):
                # As Worker._loop: the connection checked only when the last batch did not
                # come back full; through worker's own name for it, so phase_times can clock it.
                if not last["more_due"]:
                    worker.close_old_connections()
                report = ticker.tick()
                last["more_due"] = report.more_due
                return report

        print(f"\n## {args.loop} loop, batch {batch_size}, {args.rows:,} rows\n")
        phase_times(loop, rows=args.rows, url=url)
        if args.cprofile:
            print()
            profile(loop, rows=args.rows, url=url, top=args.top)


if __name__ == "__main__":
    main()
