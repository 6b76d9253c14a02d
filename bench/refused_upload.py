"""A 19 MB photo refused by the server lane's rate limit, against the same body sent to a URL
that reads nothing, in production's shape.

The site runs as in production: deploy/gunicorn.conf.py (two processes) behind deploy/nginx.conf,
V10R_TRUSTED_PROXIES=1. One client (127.0.0.9), whose analyses for the minute are spent, posts
the 19 MB multipart body in turns to:

- the server lane, /showcases/workers/analyse/, which refuses it with 429 before reading the
  body and leaves the body to gunicorn, which closes the connection (core/middleware.py);
- /zz/showcases/workers/analyse/, inside the same nginx location (so nginx takes 20 MB there
  too) but no page of the app's (zz is no language of the site's): Django answers 404 and
  never reads the body;
- the same path on bench/carry_wsgi.py, an application of a few lines under the same gunicorn
  configuration that reads the whole body and drops it: what carrying the bytes costs, the
  floor under any answer after which the connection carries the next request.

Each post is on a fresh connection to nginx, as a browser's upload would be, with a CSRF
cookie and header, as the page sends them. For each: the median, over --requests posts, of
the CPU the gunicorn processes and nginx's spent on it (the sum of their threads' run time in
/proc/<pid>/task/*/schedstat, read before and after) and of its wall time, from the first byte
sent to the last byte of the answer. Then the refusal's cost against reading nothing: the
median, over the rounds, of each round's ratio (the two posts of a round are sent one after
the other, so whatever else the machine does weighs on both). With --base, the refused post
is also sent to another checkout (`git worktree add /tmp/door-base c786dd2`), where the
limit was counted in the view, after the CSRF check had parsed the body.

    .venv/bin/python bench/refused_upload.py [--base /tmp/door-base] [--requests 15]

Needs nginx. Runs on the database bench/lane_cpu.py uses, v10r_bench_lane_cpu, on the server
DATABASE_URL names or on the embedded one. Loopback only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench import lane_cpu  # noqa: E402
from bench.database import server_url  # noqa: E402 - after sys.path
from bench.lane_cpu import DATABASE, App, prepare, start_app, workers_of  # noqa: E402
from bench.report import print_table  # noqa: E402
from tests.deploy.servers import Nginx, nginx_executable  # noqa: E402

ANALYSE = "/showcases/workers/analyse/"
NOWHERE = "/zz/showcases/workers/analyse/"
CLIENT = "127.0.0.9"
PHOTO_BYTES = 19 * 2**20
CARRY = "bench/carry_wsgi.py"


def body() -> bytes:
    return lane_cpu.multipart(
        os.urandom(PHOTO_BYTES), filename="photo.jpg", content_type="image/jpeg"
    )


def spend_analyses(url: str) -> None:
    """Put CLIENT far over the analyses' limit for the next minute."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO v10r_rate_limit_windows (key, window_start, hits)"
            " VALUES (%s, now(), 1000000)"
            " ON CONFLICT (key) DO UPDATE SET window_start = now(), hits = 1000000",
            [f"analyse:{CLIENT}"],
        )


def run_seconds(pids: list[int]) -> float:
    """The CPU time every thread of these processes has run, from /proc, in seconds."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += int(task.read_text().split()[0])
    return total / 1e9


def settled(pids: list[int]) -> None:
    """Wait until these processes have stopped running (the last answer's aftermath, a
    heartbeat), so the next reading starts from rest: at most a second."""
    deadline = time.monotonic() + 1.0
    before = run_seconds(pids)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = run_seconds(pids)
        if now - before < 0.0005:
            return
        before = now


def measure(stack: tuple, path: str, data: bytes, url: str) -> dict:
    app, proxy = stack
    apps, proxies = workers_of(app.process.pid), workers_of(proxy.process.pid)
    spend_analyses(url)
    settled(apps + proxies)
    app_before, proxy_before = run_seconds(apps), run_seconds(proxies)
    status, wall = lane_cpu.request(proxy.port, "POST", path, source=CLIENT, body=data, timeout=60)
    return {
        "status": status,
        "wall": wall,
        "app": run_seconds(apps) - app_before,
        "nginx": run_seconds(proxies) - proxy_before,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, help="another checkout, for its refused post")
    parser.add_argument("--requests", type=int, default=15, help="posts of each kind")
    args = parser.parse_args()
    if nginx_executable() is None:
        print("nginx is not installed (apt-get install nginx)", file=sys.stderr)
        return 1
    url = urlunsplit(urlsplit(server_url())._replace(path=f"/{DATABASE}"))
    env = prepare(url)
    data = body()
    cases = [
        ("refused (429)", "this tree", ANALYSE),
        ("reads nothing (404)", "this tree", NOWHERE),
        ("carries the body (404)", CARRY, ANALYSE),
    ]
    trees = {"this tree": BASE_DIR, CARRY: BASE_DIR}
    if args.base:
        trees[str(args.base)] = args.base.resolve()
        cases.append(("refused (429)", str(args.base), ANALYSE))
    load_average = os.getloadavg()[0]
    results: dict[tuple[str, str], list[dict]] = {(label, tree): [] for label, tree, _ in cases}
    with contextlib.ExitStack() as cleanup:
        stacks = {}
        for name, tree in trees.items():
            if name == CARRY:
                app = App(tree, env, wsgi="bench.carry_wsgi:application")
                cleanup.callback(app.stop)
            else:
                app = start_app(tree, env, cleanup=cleanup, prefix="v10r-refused-upload-static-")
            # One nginx process, so the CPU read is that of the one that served.
            proxy = Nginx(
                app.port,
                WORKER_PROCESSES="1",
                REQUEST_RATE="100r/s",
                REQUEST_BURST="100",
                CONNECTIONS_PER_CLIENT="100",
            )
            cleanup.callback(proxy.stop)
            stacks[name] = (app, proxy)
        # One of each in turn, so whatever else the machine does falls on all alike; the first
        # round warms the connections and is left out.
        for round_ in range(args.requests + 1):
            for label, tree, path in cases:
                result = measure(stacks[tree], path, data, url)
                if round_:
                    results[label, tree].append(result)

    print(
        f"A {PHOTO_BYTES / 2**20:.0f} MB upload through nginx to gunicorn, median of "
        f"{args.requests} ({os.cpu_count()} CPUs, load average before: {load_average:.1f})"
    )
    header = ["post", "tree", "answers", "gunicorn CPU ms", "nginx CPU ms", "wall ms"]
    rows = []
    for (label, tree), measured in results.items():
        statuses = sorted({str(result["status"]) for result in measured})
        rows.append(
            [
                label,
                tree,
                ", ".join(statuses),
                f"{statistics.median(r['app'] for r in measured) * 1000:.1f}",
                f"{statistics.median(r['nginx'] for r in measured) * 1000:.1f}",
                f"{statistics.median(r['wall'] for r in measured) * 1000:.0f}",
            ]
        )
    print_table(header, rows)
    refused, nothing = (
        results["refused (429)", "this tree"],
        results["reads nothing (404)", "this tree"],
    )
    for kind, name in (("app", "gunicorn CPU"), ("wall", "wall time")):
        ratio = statistics.median(r[kind] / n[kind] for r, n in zip(refused, nothing, strict=True))
        print(f"refused / reads nothing, {name}: {ratio:.2f}x (median of {len(refused)} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
