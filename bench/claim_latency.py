"""The queue's statements as the table grows: p50 and p99 of the claim, the outcome write, the
reaper and the public queue poll at 10 k, 100 k, 1 M and 10 M deliveries, and the admin pages
at the largest size; then prune_outbox removing what is due while a drain runs.

The rows: 99 % sent, spread over 120 days; the other 1 % spread over pending and due,
retrying, processing, failed and dead. Every row has a lane: 10 % high, 70 % normal, 20 % low,
so the claim walks each of the site's lanes (DELIVERY_LANES) as it does in production. The
table grows in place from one size to the next (indexes dropped while a size is filled, built
again after, then VACUUM ANALYZE), in a database of its own (v10r_bench, or --database).
Every measured statement runs in a transaction that is rolled back, so each sample sees the
same table.

    .venv/bin/python bench/claim_latency.py [--sizes 10000,100000,1000000,10000000]
        [--samples 1000] [--admin-samples 10] [--plot docs/claim-latency.png] [--no-prune]
        [--database v10r_bench]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench import database, timing  # noqa: E402
from bench.admin_pages import LISTS  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000, 10_000_000)

# One notification per delivery, as "Try it" and most callers make them.
FILL_SQL = """
WITH made AS (
    INSERT INTO notifications.notifications (id, user_id, type, message_key, message_params,
                                             action_url, created_at)
    SELECT gen_random_uuid(), %(user)s, 'bench', 'queue.demo', '{"label": "bench"}', '',
           now() - random() * interval '120 days'
    FROM generate_series(1, %(rows)s)
    RETURNING id, created_at
)
INSERT INTO notifications.notification_deliveries
    (notification_id, channel, lane, status, attempts, attempt_base, next_attempt_at,
     attempted_at, sent_at, error_code, error_message, created_at)
SELECT id, 'email',
       CASE WHEN l < 0.1 THEN 'high' WHEN l < 0.8 THEN 'normal' ELSE 'low' END,
       CASE WHEN r < 0.99 THEN 'sent' WHEN r < 0.992 THEN 'pending' WHEN r < 0.994 THEN 'pending'
            WHEN r < 0.996 THEN 'processing' WHEN r < 0.998 THEN 'failed' ELSE 'dead' END,
       CASE WHEN r < 0.99 THEN 1 WHEN r < 0.992 THEN 0 WHEN r < 0.994 THEN 2
            WHEN r < 0.996 THEN 1 WHEN r < 0.998 THEN 1 ELSE 5 END,
       0,
       CASE WHEN r >= 0.992 AND r < 0.994 THEN now() + interval '10 minutes'
            ELSE created_at END,
       CASE WHEN r < 0.99 OR r >= 0.992 THEN
            CASE WHEN r >= 0.994 AND r < 0.996 THEN now() - interval '1 minute'
                 ELSE created_at + interval '2 seconds' END END,
       CASE WHEN r < 0.99 THEN created_at + interval '2 seconds' END,
       CASE WHEN r >= 0.996 AND r < 0.998 THEN 'BAD_ADDRESS'
            WHEN r >= 0.992 AND r < 0.994 OR r >= 0.998 THEN 'UPSTREAM_503' ELSE '' END,
       '',
       created_at
FROM (SELECT id, created_at, random() AS r, random() AS l FROM made) AS m
"""


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(run, samples: int) -> tuple[float, float]:
    """p50 and p99, in ms, of run() over samples calls after two warm-ups."""
    values = timing.milliseconds(run, samples, warmups=2)
    return statistics.median(values), percentile(values, 0.99)


def indexes(db) -> list[tuple[str, str]]:
    return db.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'notifications'"
        " AND tablename IN ('notification_deliveries', 'notifications')"
        " AND indexname NOT LIKE '%%pkey' AND indexdef NOT LIKE 'CREATE UNIQUE%%'"
    ).fetchall()


def grow(url: str, user: int, rows: int) -> float:
    """Add rows deliveries with the secondary indexes dropped; return the seconds it took."""
    began = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as db:
        saved = indexes(db)
        for name, _definition in saved:
            db.execute(f'DROP INDEX notifications."{name}"')
        step = 1_000_000
        for start in range(0, rows, step):
            db.execute(FILL_SQL, {"rows": min(step, rows - start), "user": user})
        db.execute("SET maintenance_work_mem = '512MB'")
        for _name, definition in saved:
            db.execute(definition)
        # Rows "being sent" were stamped as the fill began; a fill of minutes would leave them
        # past their lease, and the reaper would requeue thousands in every sample. A live
        # queue has a batch or two in processing, all within their lease.
        db.execute(
            "UPDATE notifications.notification_deliveries SET attempted_at = now()"
            " WHERE status = 'processing'"
        )
        db.execute("VACUUM ANALYZE notifications.notification_deliveries")
        db.execute("VACUUM ANALYZE notifications.notifications")
    return time.perf_counter() - began


def measure(samples: int) -> dict[str, tuple[float, float]]:
    from django.db import connection, transaction

    from notifications import outbox, stats
    from showcases import views

    def rolled_back(work):
        def run():
            with transaction.atomic():
                work()
                transaction.set_rollback(True)

        return run

    def claim():
        outbox.claim(batch_size=25)

    def write():
        claimed = outbox.claim(batch_size=25)
        outbox.write_outcomes(
            [outbox.Outcome.sent(d, provider_message_id=f"bench-{d.id}") for d in claimed]
        )

    def reap():
        outbox.reclaim_stale(lease=timedelta(minutes=5))

    def poll():
        stats.queue_depth(limit=views.PUBLIC_COUNT_LIMIT)

    results = {
        "claim (25)": timed(rolled_back(claim), samples),
        "claim + write (25)": timed(rolled_back(write), samples),
        "reaper": timed(rolled_back(reap), samples),
        "public queue poll": timed(poll, samples),
    }
    connection.close()
    return results


def admin_pages(samples: int) -> dict[str, tuple[float, float]]:
    client = database.admin_client()
    results = {}
    for name, path in LISTS.items():
        if client.get(path).status_code != 200:
            raise RuntimeError(f"{path} did not answer 200")
        results[name] = timed(lambda path=path: client.get(path), samples)
    return results


# The three indexes as they were before migration 0005 made them carry the columns the admin's
# counts read: the baseline the admin pages are compared with, in the same run.
PLAIN_INDEXES = {
    "deliveries_attempted": "(attempted_at)",
    "deliveries_dead": "(created_at DESC, id DESC) WHERE status = 'dead'",
    "deliveries_failed": "(created_at DESC, id DESC) WHERE status = 'failed'",
}


def admin_pages_on_plain_indexes(samples: int) -> dict[str, tuple[float, float]]:
    """admin_pages() with PLAIN_INDEXES in place of the shipped ones, in a transaction that is
    rolled back (DDL is transactional in PostgreSQL), so the table is left as it was."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
        for name, definition in PLAIN_INDEXES.items():
            cursor.execute(f'DROP INDEX notifications."{name}"')
            cursor.execute(
                f'CREATE INDEX "{name}" ON notifications.notification_deliveries {definition}'
            )
        cursor.execute("ANALYZE notifications.notification_deliveries")
        results = admin_pages(samples)
        transaction.set_rollback(True)
    return results


def prune_beside_a_drain(url: str) -> dict:
    """prune_outbox with a 30-day keep at the largest size while drain_outbox runs beside it."""
    import logging
    import subprocess

    from tests.smtp import SMTPServer

    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command
    server = SMTPServer()
    env = database.environment(url) | {
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(server.port),
        "DELIVERY_INTERVAL_SECONDS": "0.5",
    }
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "UPDATE notifications.notification_deliveries SET next_attempt_at = now()"
            " WHERE status = 'pending'"
        )
    drain = database.start_drain(env)
    try:
        began = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "manage.py", "prune_outbox", "--sent-days", "30", "--pause", "0.01"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        seconds = time.perf_counter() - began
    finally:
        drain.terminate()
        drain.wait(60)
        server.stop()
    import json

    report = json.loads(run.stdout.strip().splitlines()[-1])
    sent = sum(server.mailbox.message_ids().values())
    return {**report, "wall_seconds": round(seconds, 1), "emails_sent_meanwhile": sent}


def plot(path: Path, table: dict[int, dict[str, tuple[float, float]]]) -> None:
    """p99 (solid) and p50 (dashed) of each statement against the table's size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    sizes = sorted(table)
    figure, axis = plt.subplots(figsize=(7, 5), dpi=120)
    for index, name in enumerate(table[sizes[0]]):
        colour = f"C{index}"
        p99 = [table[s][name][1] for s in sizes]
        p50 = [table[s][name][0] for s in sizes]
        axis.plot(sizes, p99, marker="o", color=colour, label=f"{name}, p99")
        axis.plot(sizes, p50, linestyle="--", color=colour, alpha=0.6, label=f"{name}, p50")
    axis.set_xscale("log")
    axis.xaxis.set_major_formatter(
        FuncFormatter(lambda x, _pos: f"{x / 1e6:g} M" if x >= 1e6 else f"{x / 1e3:g} k")
    )
    axis.set_xticks(sizes)
    axis.set_ylim(bottom=0)
    axis.set_xlabel("deliveries in the table")
    axis.set_ylabel("ms")
    axis.set_title("The queue's statements as the table grows")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    figure.tight_layout()
    figure.savefig(path, metadata={"Software": None})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--admin-samples", type=int, default=10)
    parser.add_argument("--plot", type=Path, default=BASE_DIR / "docs" / "claim-latency.png")
    parser.add_argument("--no-prune", action="store_true", help="skip the prune at the end")
    parser.add_argument(
        "--database", default=database.BENCH_DB, help="the bench database's name (dropped first)"
    )
    args = parser.parse_args()
    try:
        sizes = sorted({int(size) for size in args.sizes.split(",")})
    except ValueError:
        parser.error(f"--sizes wants whole numbers separated by commas, not {args.sizes!r}")
    if sizes[0] < 1000 or args.samples < 10 or not 1 <= args.admin_samples <= 50:
        parser.error("sizes start at 1000; --samples at least 10; --admin-samples 1 to 50")

    url = database.server_url(args.database)
    database.prepare_database(url)
    database.set_up_django(url)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("bench-reader", "reader@example.com").pk

    table: dict[int, dict[str, tuple[float, float]]] = {}
    have = 0
    for size in sizes:
        seconds = grow(url, user, size - have)
        have = size
        print(f"{size:>11,} rows (filled in {seconds:.0f} s)", file=sys.stderr)
        table[size] = measure(args.samples)
    admin = admin_pages(args.admin_samples)
    plain = admin_pages_on_plain_indexes(args.admin_samples)

    names = list(table[sizes[0]])
    print(f"\nThe queue's statements, p50 / p99 in ms over {args.samples} samples\n")
    print("| deliveries | " + " | ".join(names) + " |")
    print("| ---: | " + " | ".join("---:" for _ in names) + " |")
    for size in sizes:
        cells = [f"{table[size][n][0]:.2f} / {table[size][n][1]:.2f}" for n in names]
        print(f"| {size:,} | " + " | ".join(cells) + " |")
    first, last = table[sizes[0]]["claim (25)"][1], table[sizes[-1]]["claim (25)"][1]
    print(f"\nclaim p99 at {sizes[-1]:,} / at {sizes[0]:,}: {last / first:.2f}×")
    # With at most 50 samples, timed()'s p99 is the slowest of them.
    print(f"\nAdmin pages at {sizes[-1]:,} deliveries, in ms over {args.admin_samples} loads")
    print("(before: the same table with the indexes as they were before migration 0005)\n")
    print("| page | p50 | slowest | p50 before | slowest before |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (p50, p99) in admin.items():
        before50, before99 = plain[name]
        print(f"| {name} | {p50:.0f} | {p99:.0f} | {before50:.0f} | {before99:.0f} |")
    plot(args.plot, table)
    print(f"\nplot: {args.plot}")
    if not args.no_prune:
        print("\nprune_outbox (keep 30 days) beside a running drain_outbox:")
        print(prune_beside_a_drain(url))


if __name__ == "__main__":
    main()
