"""Pages while six clients post a 6 KB image that costs the server lane far more CPU than its size.

The site runs as in production: deploy/gunicorn.conf.py (one process per CPU, here two) behind
deploy/nginx.conf with its production limits, and V10R_TRUSTED_PROXIES=1. Each of six clients
connects from an address of its own (127.0.0.2 to 127.0.0.7, bound as the source address, so
nginx sees six peers and writes six X-Forwarded-For values, as six visitors would reach it)
and posts the image to the server lane again as soon as each answer arrives (20 ms after a
refusal), for --seconds, whatever the answer (an attacker does not wait for Retry-After). A
seventh, from 127.0.0.8, fetches GET /showcases/workers/ every --interval and records how long
each took.

Two images: the 1-bit 7070 × 7070 PNG (50 megapixels in about 6 KB), and a 1-bit 6100 × 6100
one, the dearest of that kind the price lets through. Each runs against this tree and, with
--base, against another checkout (`git worktree add /tmp/lane-base c786dd2`), both serving
at once and the loads taking turns; the page's latency with no load comes first. Beside each:
the answers the posters got, and the CPU the app's processes and this benchmark used, per
second of wall time.

    .venv/bin/python bench/lane_cpu.py [--base /tmp/lane-base] [--seconds 30] [--rounds 1]
        [--interval 0.125]

Needs nginx. Runs on its own database, v10r_bench_lane_cpu, on the server DATABASE_URL names or
on the embedded one. Loopback only; every loop ends at its deadline.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import http.client
import io
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from PIL import Image, ImageDraw

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import keep_database, server_url, web_environment  # noqa: E402 - after sys.path
from bench.report import print_table  # noqa: E402
from tests.deploy.servers import GUNICORN, Nginx, Server, nginx_executable  # noqa: E402

DATABASE = "v10r_bench_lane_cpu"
PAGE = "/showcases/workers/"
ANALYSE = "/showcases/workers/analyse/"
POSTERS = [f"127.0.0.{i}" for i in range(2, 8)]
MEASURER = "127.0.0.8"
CSRF_SECRET = "c" * 32
BOUNDARY = "v10r-bench-lane-cpu"
REQUEST_TIMEOUT = 30


def one_bit_png(edge: int) -> bytes:
    """A 1-bit edge × edge PNG: white lines across black, a few KB."""
    image = Image.new("1", (edge, edge))
    draw = ImageDraw.Draw(image)
    for top in range(0, edge, edge // 10):
        draw.line((0, top, edge - 1, top), fill=1, width=3)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def multipart(
    data: bytes, *, filename: str = "image.png", content_type: str = "image/png"
) -> bytes:
    """data as the "image" field of a form, the body request() posts."""
    return (
        (
            f"--{BOUNDARY}\r\n"
            f'Content-Disposition: form-data; name="image"; filename="{filename}"\r\n'
            f"Content-Type: {content_type}\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


def request(
    port: int,
    method: str,
    path: str,
    *,
    source: str,
    body: bytes | None = None,
    timeout: float = REQUEST_TIMEOUT,
) -> tuple[int, float]:
    """One request on a fresh connection from source; (status, seconds to the last byte)."""
    headers = {}
    if body is not None:
        headers = {
            "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
            "Cookie": f"csrftoken={CSRF_SECRET}",
            "X-CSRFToken": CSRF_SECRET,
        }
    started = time.perf_counter()
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=timeout, source_address=(source, 0)
    )
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    finally:
        connection.close()


@dataclass
class Load:
    statuses: collections.Counter = field(default_factory=collections.Counter)
    page_seconds: list[float] = field(default_factory=list)
    page_failures: collections.Counter = field(default_factory=collections.Counter)
    app_cpu_seconds: float = 0.0
    bench_cpu_seconds: float = 0.0
    wall_seconds: float = 0.0


# A refused poster tries again this soon: still five times nginx's 10 requests a second per
# client, so the app sees all nginx lets through, but the six loops no longer take a core of
# this machine themselves (a real attacker's loop runs on the attacker's machine).
REFUSED_PAUSE = 0.02


def post_until(port: int, body: bytes, *, source: str, deadline: float, load: Load) -> None:
    while time.monotonic() < deadline:
        try:
            status, _seconds = request(port, "POST", ANALYSE, source=source, body=body)
        except OSError as exc:
            status = type(exc).__name__
        load.statuses[status] += 1
        if status != 200:
            time.sleep(REFUSED_PAUSE)


def measure_until(port: int, *, interval: float, deadline: float, load: Load) -> None:
    following = time.monotonic()
    while following < deadline:
        try:
            status, seconds = request(port, "GET", PAGE, source=MEASURER)
        except OSError as exc:
            load.page_failures[type(exc).__name__] += 1
            load.page_seconds.append(REQUEST_TIMEOUT)
        else:
            if status == 200:
                load.page_seconds.append(seconds)
            else:
                load.page_failures[status] += 1
        # After a slow answer the next fetch waits its interval rather than catching up: a
        # burst of fetches would meet nginx's per-client rate limit, not the app.
        following = max(following + interval, time.monotonic())
        time.sleep(max(0.0, following - time.monotonic()))


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of these processes, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def workers_of(master: int) -> list[int]:
    """The gunicorn master and its workers."""
    pids = [master]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rpartition(")")[2].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        if parent == master:
            pids.append(int(stat.parent.name))
    return pids


def run_load(
    server: App, port: int, body: bytes | None, *, seconds: float, interval: float
) -> Load:
    load = Load()
    clear_limits(server.env["DATABASE_URL"])
    pids = workers_of(server.process.pid)
    cpu_before, bench_before = cpu_seconds(pids), time.process_time()
    started = time.monotonic()
    deadline = started + seconds
    threads = [
        threading.Thread(
            target=measure_until,
            args=(port,),
            kwargs={"interval": interval, "deadline": deadline, "load": load},
        )
    ]
    if body is not None:
        threads += [
            threading.Thread(
                target=post_until,
                args=(port, body),
                kwargs={"source": source, "deadline": deadline, "load": load},
            )
            for source in POSTERS
        ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 2 * REQUEST_TIMEOUT)
    load.wall_seconds = time.monotonic() - started
    load.app_cpu_seconds = cpu_seconds(pids) - cpu_before
    load.bench_cpu_seconds = time.process_time() - bench_before
    return load


def clear_limits(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DELETE FROM v10r_rate_limit_windows")


class App(Server):
    """gunicorn from a given checkout, with that checkout's deploy/gunicorn.conf.py."""

    def __init__(self, tree: Path, env: dict[str, str], *, wsgi: str = "v10r.wsgi") -> None:
        super().__init__("v10r-lane-cpu-")
        self.env = env | {"GUNICORN_BIND": f"127.0.0.1:{self.port}", "WEB_CONCURRENCY": "2"}
        config = tree / "deploy" / "gunicorn.conf.py"
        # --chdir puts the checkout first on sys.path, ahead of this tree's editable install.
        args = [str(GUNICORN), "--chdir", str(tree), "-c", str(config), wsgi]
        self.start(args, env=self.env, seconds=90)


def start_app(
    tree: Path, env: dict[str, str], *, cleanup: contextlib.ExitStack, prefix: str
) -> App:
    """Collect tree's static files into a folder of their own and serve the tree; the folder
    and the server go when cleanup closes."""
    static_root = cleanup.enter_context(tempfile.TemporaryDirectory(prefix=prefix))
    tree_env = env | {"DJANGO_STATIC_ROOT": static_root}
    collect_static(tree, tree_env)
    app = App(tree, tree_env)
    cleanup.callback(app.stop)
    return app


def prepare(url: str) -> dict[str, str]:
    keep_database(url)
    return web_environment(url)


def collect_static(tree: Path, env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=tree,
        env=env,
        check=True,
    )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def row(label: str, tree: str, load: Load) -> list[str]:
    pages = load.page_seconds
    answers = ", ".join(
        f"{status}: {count}" for status, count in sorted(load.statuses.items(), key=str)
    )
    failures = sum(load.page_failures.values())
    return [
        label,
        tree,
        f"{statistics.median(pages) * 1000:.0f}",
        f"{percentile(pages, 0.99) * 1000:.0f}",
        f"{max(pages) * 1000:.0f}",
        f"{len(pages)}"
        + (f" ({failures} not 200: {dict(load.page_failures)})" if failures else ""),
        f"{load.app_cpu_seconds / load.wall_seconds:.2f}",
        f"{load.bench_cpu_seconds / load.wall_seconds:.2f}",
        answers or "-",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, help="another checkout to measure beside this one")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each load")
    parser.add_argument("--interval", type=float, default=0.125, help="between page fetches")
    parser.add_argument("--rounds", type=int, default=1, help="each load on each tree, in turn")
    args = parser.parse_args()
    if nginx_executable() is None:
        print("nginx is not installed (apt-get install nginx)", file=sys.stderr)
        return 1
    trees = [("this tree", BASE_DIR)]
    if args.base:
        trees.insert(0, (f"{args.base}", args.base.resolve()))
    images = [
        ("1-bit 7070 × 7070 PNG", one_bit_png(7070)),
        ("1-bit 6100 × 6100 PNG", one_bit_png(6100)),
    ]

    load_average = os.getloadavg()[0]
    url = urlunsplit(urlsplit(server_url())._replace(path=f"/{DATABASE}"))
    env = prepare(url)
    rows = []
    stacks = []
    with contextlib.ExitStack() as cleanup:
        # Both trees serve at once, and the loads take turns: whatever else this machine is
        # doing falls on both alike.
        for name, tree in trees:
            app = start_app(tree, env, cleanup=cleanup, prefix="v10r-lane-cpu-static-")
            proxy = Nginx(app.port)  # production's per-client limits
            cleanup.callback(proxy.stop)
            stacks.append((name, app, proxy))
        for name, app, proxy in stacks:
            idle = run_load(app, proxy.port, None, seconds=5, interval=args.interval)
            rows.append(row("no load (5 s)", name, idle))
        for _round in range(args.rounds):
            for label, data in images:
                for name, app, proxy in stacks:
                    load = run_load(
                        app,
                        proxy.port,
                        multipart(data),
                        seconds=args.seconds,
                        interval=args.interval,
                    )
                    rows.append(row(f"{label} ({len(data) / 1024:.1f} KB)", name, load))

    print(
        f"GET {PAGE} through nginx while six clients post to the server lane for "
        f"{args.seconds:.0f} s ({os.cpu_count()} CPUs, load average before: "
        f"{load_average:.1f})"
    )
    header = ["load", "tree", "p50 ms", "p99 ms", "max ms", "pages", "app CPU/s", "bench CPU/s"]
    header.append("answers")
    print_table(header, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
