"""Webhook deliveries per second: one drain_outbox process posting signed webhooks to a local
receiver that answers at once, or after 20 ms (a receiver on another continent answers in
about that much more), at the default batch size and concurrency.

The receiver runs in this process (a thread per connection, keep-alive), the drain in its own,
in a database of its own (v10r_bench_webhook). The rate is counted from the receiver's first
request to its last, so the drain's start-up is not in it; each figure is the median of
--runs.

    make bench     # or: .venv/bin/python bench/webhook_throughput.py [--rows N] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import environment, prepare_database, server_url, start_drain  # noqa: E402
from bench.fill import fill_addressed  # noqa: E402

LATENCIES_MS = (0, 20)

SECRET_SQL = """
INSERT INTO notifications.webhook_secrets (address_id, secret, previous_secret)
VALUES (%(address_id)s, %(secret)s, '')
"""


class Receiver:
    """Answers every POST with 204 after latency seconds; notes when each arrived."""

    def __init__(self, latency: float) -> None:
        arrivals: list[float] = []
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if latency:
                    time.sleep(latency)
                with lock:
                    arrivals.append(time.perf_counter())
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format, *args) -> None:  # noqa: A002
                pass

        self.arrivals = arrivals
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def one_run(url: str, rows: int, latency_ms: int) -> float:
    from transports import signing

    prepare_database(url)
    receiver = Receiver(latency_ms / 1000)
    try:
        with psycopg.connect(url, autocommit=True) as db:
            secret = signing.new_secret()
            address_id = fill_addressed(db, channel="webhook", address=receiver.url, rows=rows)
            db.execute(SECRET_SQL, {"address_id": address_id, "secret": secret})
        env = environment(url) | {
            "DELIVERY_WEBHOOK_ALLOW_LOOPBACK": "1",
            "V10R_CHANNELS": "webhook,demo",
            "DELIVERY_INTERVAL_SECONDS": "0.5",
        }
        drain = start_drain(env)
        try:
            deadline = time.monotonic() + 600
            while len(receiver.arrivals) < rows and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            drain.terminate()
            drain.wait(60)
        if len(receiver.arrivals) < rows:
            raise RuntimeError(f"only {len(receiver.arrivals)} of {rows} webhooks arrived")
        with psycopg.connect(url) as db:
            (sent,) = db.execute(
                "SELECT count(*) FROM notifications.notification_deliveries WHERE status = 'sent'"
            ).fetchone()
        if sent != rows:
            raise RuntimeError(f"{sent} of {rows} rows are sent")
        span = receiver.arrivals[-1] - receiver.arrivals[0]
        return (rows - 1) / span
    finally:
        receiver.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.rows < 10 or args.runs < 1:
        parser.error("--rows at least 10, --runs at least 1")
    url = server_url("v10r_bench_webhook")
    os.environ.update(environment(url))
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()
    from django.conf import settings

    print(
        f"\nWebhook deliveries per second, {args.rows:,} per run, median of {args.runs}; "
        f"one drain_outbox, batch {settings.DELIVERY_BATCH_SIZE}, "
        f"concurrency {settings.DELIVERY_CONCURRENCY}\n"
    )
    print("| receiver latency | deliveries/s | runs |")
    print("| ---: | ---: | --- |")
    for latency in LATENCIES_MS:
        rates = [one_run(url, args.rows, latency) for _ in range(args.runs)]
        runs = ", ".join(f"{r:.0f}" for r in rates)
        print(f"| {latency} ms | {statistics.median(rates):.0f} | {runs} |")


if __name__ == "__main__":
    main()
