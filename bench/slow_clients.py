"""An ordinary GET / while slow clients hold connections: bare gunicorn against nginx + gunicorn.

Bare is the README's old production command, `gunicorn v10r.wsgi` (two sync workers here, as
the probe that found the problem ran it); the pair is deploy/nginx.conf in front of
deploy/gunicorn.conf.py. For each count of slow clients (half of them send half a request's
headers, half send whole headers of a 2 MB form post and 1 KB of its body; then all of them
fall silent) the figure is the median of --requests fetches of GET /, each on a new
connection. A fetch that gets no answer within --timeout counts as that long, and once more
than half have timed out the median is "> timeout" and the rest are not sent.

    .venv/bin/python bench/slow_clients.py [--requests N] [--timeout S] [--slow 0,2,10,50]

Needs nginx (apt-get install nginx). Runs on its own database, v10r_bench_slow_clients, on the
server DATABASE_URL names or on the embedded one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import keep_database, server_url, web_environment  # noqa: E402 - after sys.path
from bench.report import print_table  # noqa: E402
from tests.deploy import clients  # noqa: E402
from tests.deploy.servers import Gunicorn, Nginx, nginx_executable  # noqa: E402

DATABASE = "v10r_bench_slow_clients"
# Per-client limits out of the way: every slow client here comes from 127.0.0.1. The
# timeouts are production's (10 s), longer than any measurement below.
NGINX_VALUES = {
    "CONNECTIONS_PER_CLIENT": "1000",
    "REQUEST_RATE": "10000r/s",
    "REQUEST_BURST": "10000",
}


def prepare(url: str, static_root: Path) -> dict[str, str]:
    """Create and migrate the database (kept between runs), collect static files; return
    the web process's environment."""
    keep_database(url)
    env = web_environment(url, DJANGO_STATIC_ROOT=str(static_root))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=BASE_DIR,
        env=env,
        check=True,
    )
    return env


def measure(port: int, *, slow: int, requests: int, timeout: float) -> tuple[float, int, int]:
    """(median seconds, how many timed out, how many were sent) of GET / with slow clients
    held open."""
    headers = [clients.slow_header(port, f"bench-header-{i}") for i in range(slow - slow // 2)]
    bodies = [clients.slow_body(port, f"bench-body-{i}") for i in range(slow // 2)]
    held = headers + bodies
    try:
        if held:
            # Until the listener's queue is empty, some slow client may still be waiting
            # behind an ordinary request instead of in front of it.
            deadline = time.monotonic() + 5
            while clients.accept_queue(port) and time.monotonic() < deadline:
                time.sleep(0.01)
        seconds, timeouts = [], 0
        for _ in range(requests):
            try:
                response = clients.get(port, "/", timeout=timeout)
                if response.status != 200:
                    raise RuntimeError(f"GET / answered {response.status}")
                seconds.append(response.seconds)
            except TimeoutError:
                timeouts += 1
                seconds.append(timeout)
                if timeouts > requests // 2:
                    # The median is settled at "> timeout"; the rest would only take time
                    # (and outlast gunicorn's 30 s worker timeout, which ends the stall).
                    break
    finally:
        clients.close_all(held)
    return statistics.median(seconds), timeouts, len(seconds)


def recovered(port: int) -> None:
    """Wait until GET / answers again: a bare sync worker frees itself when its client goes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if clients.get(port, "/", timeout=5).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server on port {port} did not recover")


def cell(median: float, timeouts: int, sent: int, *, timeout: float) -> str:
    text = f"> {timeout * 1000:.0f} ms" if median >= timeout else f"{median * 1000:.1f} ms"
    return text + (f" ({timeouts} of {sent} timed out)" if timeouts else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20, help="fetches per measurement")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds per fetch")
    parser.add_argument("--slow", default="0,2,10,50", help="counts of slow clients")
    args = parser.parse_args()
    counts = [int(count) for count in args.slow.split(",")]
    if nginx_executable() is None:
        print("nginx is not installed (apt-get install nginx)", file=sys.stderr)
        return 1

    url = urlunsplit(urlsplit(server_url())._replace(path=f"/{DATABASE}"))
    with tempfile.TemporaryDirectory(prefix="v10r-bench-static-") as static_root:
        env = prepare(url, Path(static_root))
        bare = Gunicorn(env, config=False, workers=2)
        app = Gunicorn(env, workers=2)
        proxy = Nginx(app.port, **NGINX_VALUES)
        try:
            rows = []
            for slow in counts:
                row = [str(slow)]
                for server in (bare, proxy):
                    median, timeouts, sent = measure(
                        server.port, slow=slow, requests=args.requests, timeout=args.timeout
                    )
                    recovered(server.port)
                    row.append(cell(median, timeouts, sent, timeout=args.timeout))
                rows.append(row)
        finally:
            for server in (proxy, app, bare):
                server.stop()

    print(
        f"GET / with slow clients held open: median of {args.requests} fetches "
        f"({os.cpu_count()} CPUs)"
    )
    header = ["slow clients", "bare gunicorn (2 sync workers)", "nginx + gunicorn (deploy/)"]
    print_table(header, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
