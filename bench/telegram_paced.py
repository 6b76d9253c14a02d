"""Telegram sends through a provider that allows 30 a second: 2,000 sends from 4 drain_outbox
processes to a loopback Bot API that answers 429 past its rate (tests/ratepeer.py: a sliding
one-second window over the sends it accepted; Retry-After in whole seconds), paced by the
drains' shared slots (notifications/pacing.py) and, for comparison, unpaced.

For each: the sends accepted a second (from the peer's first accepted send to its last, so
the drains' start-up is not in it) as a share of the 30 allowed, the share of requests the
peer answered 429, the rows that ended dead, and how often a row was claimed. The peer runs
in this process, each drain in its own, in a database of their own (v10r_bench_paced). About
80 s a run.

    .venv/bin/python bench/telegram_paced.py [--rows 2000] [--drains 4] [--mode both]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import environment, prepare_database, server_url, start_drain  # noqa: E402
from bench.fill import fill_addressed  # noqa: E402
from bench.report import print_table  # noqa: E402
from tests.ratepeer import RateLimitedTelegram  # noqa: E402

TOKEN = "424242:bench-token"
RATE = 30

STATUS_SQL = """
SELECT status, count(*) FROM notifications.notification_deliveries GROUP BY status
"""
# Every claim bumps attempts: a row handed back by pacing (or by a 429) was claimed again.
CLAIMS_SQL = "SELECT avg(attempts) FROM notifications.notification_deliveries"


def one_run(url: str, *, rows: int, drains: int, paced: bool) -> list[str]:
    prepare_database(url)
    peer = RateLimitedTelegram(token=TOKEN, rate=RATE)
    try:
        with psycopg.connect(url, autocommit=True) as db:
            fill_addressed(db, channel="telegram", address="1001", rows=rows)
        env = environment(url) | {
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "TELEGRAM_API_BASE_URL": peer.base_url,
            "V10R_CHANNELS": "telegram,demo",
            "DELIVERY_INTERVAL_SECONDS": "0.5",
            "DELIVERY_RATE_TELEGRAM": str(RATE if paced else 0),
        }
        processes = [start_drain(env) for _ in range(drains)]
        began = time.monotonic()
        try:
            while time.monotonic() - began < 600:
                with psycopg.connect(url) as db:
                    statuses = dict(db.execute(STATUS_SQL).fetchall())
                if not statuses.get("pending") and not statuses.get("processing"):
                    break
                time.sleep(0.5)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(60)
        elapsed = time.monotonic() - began
        with psycopg.connect(url) as db:
            (claims,) = db.execute(CLAIMS_SQL).fetchone()
    finally:
        peer.stop()
    seen = peer.summary()
    accepted, throttled = seen["accepted"], seen["throttled"]
    per_second = (accepted - 1) / seen["span_seconds"] if seen["span_seconds"] else 0.0
    answered = accepted + throttled
    return [
        "paced" if paced else "unpaced",
        f"{accepted:,}",
        f"{per_second:.1f}",
        f"{per_second / RATE:.0%}",
        f"{throttled:,}",
        f"{throttled / answered:.1%}" if answered else "-",
        f"{statuses.get('dead', 0):,}",
        f"{seen['busiest_second']}",
        f"{claims:.1f}",
        f"{elapsed:.0f} s",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--drains", type=int, default=4)
    parser.add_argument("--mode", choices=("both", "paced", "unpaced"), default="both")
    args = parser.parse_args()
    if args.rows < 10 or not 1 <= args.drains <= 16:
        parser.error("--rows at least 10, --drains 1 to 16")
    url = server_url("v10r_bench_paced")
    os.environ.update(environment(url))
    modes = {"both": (True, False), "paced": (True,), "unpaced": (False,)}[args.mode]
    print(
        f"\n{args.rows:,} Telegram sends from {args.drains} drain_outbox processes to a peer "
        f"allowing {RATE} a second (default batch and concurrency)\n"
    )
    rows = [one_run(url, rows=args.rows, drains=args.drains, paced=p) for p in modes]
    header = [
        "pacing",
        "accepted",
        "sends/s",
        "of 30/s",
        "429s",
        "429 share",
        "dead",
        "busiest 1 s",
        "claims a row",
        "run",
    ]
    print_table(header, rows)


if __name__ == "__main__":
    main()
