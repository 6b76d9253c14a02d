"""The inbox's read model: what its reads cost on a long inbox, and what its live updates cost
per signed-in user, a short poll of /account/inbox/state/, beside what a held stream (SSE)
would.

Reads: a reader with --rows entries (every tenth unread, one in fifty archived, four at each
instant), among --clients other users' 1,000 each, the table vacuumed and analysed. Medians
of --samples calls, in this process through notifications/inbox.py, with the plan PostgreSQL
chose (EXPLAIN ANALYZE of the statement as sent): the first page, the page at offset ~9,000
reached by its cursor (beside the same page by an OR of the cursor's two parts and by
OFFSET, for contrast), the unread count and state(); then one walk of every page from the
first.

Polling: gunicorn with deploy/gunicorn.conf.py (gthread, --workers processes of 4 threads,
no access log, as in production; straight on loopback, without nginx in front) and --clients
signed-in users, each on a keep-alive connection of its own, asking for their state every
--interval seconds for --seconds, with If-None-Match (304s), then again without (200s). The
CPU time of gunicorn's master and workers (/proc/<pid>/stat) and of their PostgreSQL backends
(a server on this machine), less what they spend idle, per poll; from it, CPU ms a second per
user and users per core.

A held stream instead: the memory of one sync worker (a stream holds a whole process), of
one more thread, and of one PostgreSQL backend (a stream that LISTENs holds a connection:
max_connections bounds the streams), measured, and set beside the poll's cost.

    .venv/bin/python bench/inbox.py [--rows 10000] [--clients 100] [--seconds 20]
        [--interval 1.5] [--samples 200] [--workers 2] [--database v10r_bench_inbox]

Runs in its own database (--database, dropped first) on the server DATABASE_URL names, or on
the embedded one. Loopback only; every loop ends at its deadline.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import prepare_database, server_url, web_environment  # noqa: E402
from bench.lane_cpu import cpu_seconds, workers_of  # noqa: E402
from bench.report import print_table  # noqa: E402
from bench.timing import milliseconds  # noqa: E402
from tests.deploy.servers import GUNICORN, Server  # noqa: E402

DATABASE = "v10r_bench_inbox"
STATE = "/account/inbox/state/"
READER = "bench-inbox-reader"
DEEP = 9000
# The polls before the clock starts: every client's first answer (a 200) and one more.
WARM_UP_SECONDS = 3.0
IDLE_SECONDS = 5.0

# users' ids × count each: four at each instant a second apart, every tenth unread, one in
# fifty archived.
ROWS_SQL = """
INSERT INTO notifications.notifications
    (id, user_id, type, message_key, message_params, action_url, inbox_at, read_at,
     archived_at)
SELECT gen_random_uuid(), u, 'queue.demo', 'queue.demo', jsonb_build_object('label', 'n' || n),
       '', now() - (n / 4) * interval '1 second',
       CASE WHEN n %% 10 <> 0 THEN now() END,
       CASE WHEN n %% 50 = 7 THEN now() END
FROM unnest(%(users)s::int[]) AS u, generate_series(1, %(count)s) AS n
"""

# The deep page's condition written out, not as a row comparison: for contrast.
OR_SQL = """
SELECT id, message_key, message_params, action_url, inbox_at, read_at
FROM notifications.notifications
WHERE user_id = %(user)s AND inbox_at IS NOT NULL AND archived_at IS NULL
  AND (inbox_at < %(at)s OR (inbox_at = %(at)s AND id < %(id)s))
ORDER BY inbox_at DESC, id DESC LIMIT 21
"""

OFFSET_SQL = """
SELECT id, message_key, message_params, action_url, inbox_at, read_at
FROM notifications.notifications
WHERE user_id = %s AND inbox_at IS NOT NULL AND archived_at IS NULL
ORDER BY inbox_at DESC, id DESC OFFSET %s LIMIT 21
"""


# --- Setting up --------------------------------------------------------------------------------


def set_up_django(url: str, static_root: str) -> None:
    """Django in this process on url's database, its static files collected into static_root
    (the web server's pages name their scripts through the manifest)."""
    os.environ.update(web_environment(url, DJANGO_STATIC_ROOT=static_root))
    os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("collectstatic", interactive=False, verbosity=0)


def make_users(url: str, *, rows: int, clients: int):
    """The reader with rows entries and clients users with 1,000 each; their session keys."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    users = get_user_model()
    reader = users.objects.create(username=READER, password="!")
    pollers = users.objects.bulk_create(
        [users(username=f"bench-inbox-{n:04}", password="!") for n in range(clients)]
    )
    with connection.cursor() as cursor:
        cursor.execute(ROWS_SQL, {"users": [reader.pk], "count": rows})
        cursor.execute(ROWS_SQL, {"users": [p.pk for p in pollers], "count": 1000})
    connection.close()
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("VACUUM ANALYZE notifications.notifications")
    sessions = []
    for poller in pollers:
        browser = Client()
        browser.force_login(poller)
        sessions.append(browser.cookies["sessionid"].value)
    return reader, sessions


# --- The reads ---------------------------------------------------------------------------------


def nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def explained(sql: str, params=None) -> tuple[str, float]:
    """The plan's nodes (a scan with its index and the rows it read), and its execution ms."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        [[result]] = cursor.fetchall()
    top = result[0]
    parts = []
    for node in nodes(top["Plan"]):
        kind = node["Node Type"]
        if kind in {"Result", "Aggregate", "Nested Loop"}:
            continue
        if node.get("Index Name"):
            kind += f" {node['Index Name']} ({node['Actual Rows']} rows)"
        elif kind == "Seq Scan":
            kind += (
                f" ({node['Actual Rows']} rows, {node.get('Rows Removed by Filter', 0)} skipped)"
            )
        parts.append(kind)
    return " > ".join(parts), top["Execution Time"]


def statement_of(call) -> str:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        call()
    [query] = queries.captured_queries
    return query["sql"]


def reads(reader, *, samples: int) -> list[list[str]]:
    from django.db import connection

    from notifications import inbox

    with connection.cursor() as cursor:
        cursor.execute(OFFSET_SQL, [reader.pk, DEEP - 1])
        row = cursor.fetchone()
    deep = inbox.Cursor(row[4], row[0])

    cases = [
        ("first page", lambda: inbox.page(reader, language="en"), None),
        (
            f"page at {DEEP:,}, by cursor",
            lambda: inbox.page(reader, language="en", before=deep),
            None,
        ),
        (
            f"page at {DEEP:,}, by OR, SQL alone",
            None,
            (OR_SQL, {"user": reader.pk, "at": deep.inbox_at, "id": deep.id}),
        ),
        (f"page at {DEEP:,}, by OFFSET, SQL alone", None, (OFFSET_SQL, [reader.pk, DEEP])),
        ("unread count", lambda: inbox.unread_count(reader), None),
        ("state()", lambda: inbox.state(reader), (inbox.STATE_SQL, {"user": reader.pk})),
    ]
    table = []
    for label, call, raw in cases:
        if call is None:

            def call(raw=raw):
                with connection.cursor() as cursor:
                    cursor.execute(*raw)
                    cursor.fetchall()

        times = milliseconds(call, samples, warmups=5)
        sql, params = raw if raw else (statement_of(call), None)
        plan, executed = explained(sql, params)
        table.append(
            [label, f"{statistics.median(times):.3f}", f"{executed:.3f}", plan]
        )  # fmt: skip
    return table


def walk(reader) -> tuple[int, float, float]:
    """Every page from the first, once: pages, total ms, the median page's ms."""
    from notifications import inbox

    each = []
    before = None
    began = time.perf_counter()
    while True:
        started = time.perf_counter()
        page = inbox.page(reader, language="en", before=before)
        each.append((time.perf_counter() - started) * 1000)
        if page.next is None:
            break
        before = page.next
    return len(each), (time.perf_counter() - began) * 1000, statistics.median(each)


# --- The poll ----------------------------------------------------------------------------------


class Web(Server):
    """gunicorn with deploy/gunicorn.conf.py and no access log, as production runs it."""

    def __init__(self, env: dict[str, str], *, workers: int) -> None:
        super().__init__("v10r-bench-inbox-")
        self.env = env | {
            "GUNICORN_BIND": f"127.0.0.1:{self.port}",
            "WEB_CONCURRENCY": str(workers),
        }
        self.env.pop("GUNICORN_ACCESS_LOG", None)
        config = BASE_DIR / "deploy" / "gunicorn.conf.py"
        self.start([str(GUNICORN), "-c", str(config), "v10r.wsgi"], env=self.env, seconds=90)


@dataclass
class Polls:
    # (monotonic time of the answer, status, seconds it took)
    answers: list[tuple[float, int | str, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, at: float, status, seconds: float) -> None:
        with self.lock:
            self.answers.append((at, status, seconds))

    def between(self, start: float, end: float):
        return [(status, seconds) for at, status, seconds in self.answers if start <= at < end]


def poller(port: int, session: str, *, conditional: bool, interval: float, first: float,
           deadline: float, polls: Polls) -> None:  # fmt: skip
    """One signed-in browser tab: its state every interval from first until deadline, on one
    keep-alive connection, with the last ETag it was given when conditional."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    etag = None
    due = first
    try:
        while due < deadline:
            time.sleep(max(0.0, due - time.monotonic()))
            headers = {"Cookie": f"sessionid={session}"}
            if conditional and etag:
                headers["If-None-Match"] = etag
            began = time.monotonic()
            try:
                connection.request("GET", STATE, headers=headers)
                response = connection.getresponse()
                response.read()
                status = response.status
                etag = response.getheader("ETag") or etag
            except (OSError, http.client.HTTPException) as error:
                status = type(error).__name__
                connection.close()
            polls.add(time.monotonic(), status, time.monotonic() - began)
            due += interval
    finally:
        connection.close()


def backend_pids(url: str) -> list[int]:
    """The client backends on the bench database but the one asking."""
    with psycopg.connect(url, autocommit=True) as db:
        rows = db.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchall()
    return [pid for (pid,) in rows]


@dataclass
class Spent:
    """CPU seconds of the web processes and of their database backends since a moment."""

    url: str
    master: int
    began: float = 0.0
    web0: float = 0.0
    database0: dict[int, float] = field(default_factory=dict)

    def start(self) -> None:
        self.began = time.monotonic()
        self.web0 = cpu_seconds(workers_of(self.master))
        self.database0 = {pid: cpu_seconds([pid]) for pid in backend_pids(self.url)}

    def stop(self) -> tuple[float, float, float, int]:
        """(wall s, web CPU s, database CPU s, backends) since start()."""
        web = cpu_seconds(workers_of(self.master)) - self.web0
        pids = backend_pids(self.url)
        # A backend born meanwhile counts whole; one that ended is lost (CONN_MAX_AGE is 60 s).
        database = sum(cpu_seconds([pid]) - self.database0.get(pid, 0.0) for pid in pids)
        return time.monotonic() - self.began, web, database, len(pids)


@dataclass
class PollCost:
    label: str
    statuses: dict
    polls: int
    p50_ms: float
    web_ms: float  # CPU per poll, less idle
    database_ms: float
    backends: int
    bench_cpu_share: float

    @property
    def per_user_ms_per_second(self) -> float:
        return (self.web_ms + self.database_ms) / self.interval

    interval: float = 1.5


def idle_rate(url: str, master: int, seconds: float) -> tuple[float, float]:
    """CPU seconds a second of the web processes and backends with nobody polling."""
    spent = Spent(url, master)
    spent.start()
    time.sleep(seconds)
    wall, web, database, _ = spent.stop()
    return web / wall, database / wall


def poll_run(web: Web, url: str, sessions: list[str], *, conditional: bool, args,
             idle: tuple[float, float]) -> PollCost:  # fmt: skip
    polls = Polls()
    now = time.monotonic()
    measure_from = now + WARM_UP_SECONDS
    deadline = measure_from + args.seconds
    threads = [
        threading.Thread(
            target=poller,
            args=(web.port, session),
            kwargs={
                "conditional": conditional,
                "interval": args.interval,
                # Tabs opened at random moments: their polls spread over the interval.
                "first": now + random.uniform(0, args.interval),
                "deadline": deadline + args.interval,
                "polls": polls,
            },
            daemon=True,
        )
        for session in sessions
    ]
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, measure_from - time.monotonic()))
    spent = Spent(url, web.process.pid)
    spent.start()
    bench0 = time.process_time()
    time.sleep(max(0.0, deadline - time.monotonic()))
    wall, web_cpu, database_cpu, backends = spent.stop()
    bench_cpu = time.process_time() - bench0
    measured_end = spent.began + wall
    for thread in threads:
        thread.join(args.interval + 15)
    window = polls.between(spent.began, measured_end)
    statuses: dict = {}
    for status, _ in window:
        statuses[status] = statuses.get(status, 0) + 1
    count = max(1, len(window))
    web_net = max(0.0, web_cpu - idle[0] * wall)
    database_net = max(0.0, database_cpu - idle[1] * wall)
    return PollCost(
        label="304 (If-None-Match)" if conditional else "200 (no ETag sent)",
        statuses=statuses,
        polls=len(window),
        p50_ms=statistics.median(s for _, s in window) * 1000 if window else float("nan"),
        web_ms=web_net / count * 1000,
        database_ms=database_net / count * 1000,
        backends=backends,
        bench_cpu_share=bench_cpu / wall,
        interval=args.interval,
    )


# --- What a held stream would hold -------------------------------------------------------------


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS (status) and Pss, Private_Clean + Private_Dirty (smaps_rollup) of pid, in kB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            found["rss"] = int(line.split()[1])
    private = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name == "Pss":
            found["pss"] = int(rest.split()[0])
        elif name in {"Private_Clean", "Private_Dirty"}:
            private += int(rest.split()[0])
    found["private"] = private
    return found


def thread_kb(count: int = 200) -> float:
    """What one more parked thread adds to this process's RSS, in kB (count of them, averaged)."""

    def rss() -> int:
        return memory_kb(os.getpid())["rss"]

    gate = threading.Event()
    before = rss()
    parked = [threading.Thread(target=gate.wait, daemon=True) for _ in range(count)]
    for thread in parked:
        thread.start()
    after = rss()
    gate.set()
    for thread in parked:
        thread.join()
    return (after - before) / count


def max_connections(url: str) -> int:
    with psycopg.connect(url) as db:
        return int(db.execute("SHOW max_connections").fetchone()[0])


# --- The report --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000, help="the reader's entries")
    parser.add_argument("--clients", type=int, default=100, help="users polling at once")
    parser.add_argument("--seconds", type=float, default=20.0, help="each poll's measured time")
    parser.add_argument("--interval", type=float, default=1.5, help="seconds between polls")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn processes")
    parser.add_argument("--database", default=DATABASE, help="the bench database (dropped first)")
    args = parser.parse_args()
    if args.rows <= DEEP or min(args.clients, args.samples, args.workers) < 1:
        parser.error(f"--rows must be over {DEEP:,}; --clients, --samples, --workers at least 1")
    if args.seconds <= 0 or args.interval <= 0:
        parser.error("--seconds and --interval must be positive")

    load_before = os.getloadavg()
    url = server_url(args.database)
    if urlsplit(url).hostname not in {None, "", "127.0.0.1", "localhost", "::1"}:
        print("(the database is not on this machine: its backends' CPU reads as 0)")
    prepare_database(url)
    static_root = tempfile.mkdtemp(prefix="v10r-bench-inbox-static-")
    set_up_django(url, static_root)
    began = time.perf_counter()
    reader, sessions = make_users(url, rows=args.rows, clients=args.clients)
    print(
        f"{args.rows:,} entries for the reader, {args.clients * 1000:,} for {args.clients} others"
        f" ({time.perf_counter() - began:.1f} s to write and vacuum)\n"
    )

    print(f"Reads, ms: medians of {args.samples} calls through notifications/inbox.py\n")
    print_table(["read", "median", "EXPLAIN ANALYZE", "plan"], reads(reader, samples=args.samples))
    pages, total, median = walk(reader)
    print(f"\nEvery page, from the first by cursors: {pages} pages in {total:,.0f} ms,"
          f" {median:.3f} ms the median page")  # fmt: skip
    from django.db import connection

    connection.close()  # the bench's own backend is not the web's

    env = web_environment(url, DJANGO_STATIC_ROOT=static_root)
    web = Web(env, workers=args.workers)
    try:
        idle = idle_rate(url, web.process.pid, IDLE_SECONDS)
        runs = [
            poll_run(web, url, sessions, conditional=True, args=args, idle=idle),
            poll_run(web, url, sessions, conditional=False, args=args, idle=idle),
        ]
        pids = workers_of(web.process.pid)[1:]
        worker = memory_kb(pids[0])
        backends = backend_pids(url)
        backend = memory_kb(backends[0]) if backends else None
    finally:
        web.stop()
    load_after = os.getloadavg()

    print(
        f"\nPolling {STATE}: {args.clients} users every {args.interval:g} s for"
        f" {args.seconds:g} s, gunicorn gthread {args.workers} × 4 threads; CPU ms per poll"
        f" less idle (idle: web {idle[0] * 1000:.1f}, database {idle[1] * 1000:.1f} ms/s)\n"
    )
    rows = []
    for run in runs:
        per_user = run.per_user_ms_per_second
        answers = ", ".join(f"{s}: {n}" for s, n in sorted(run.statuses.items(), key=str))
        rows.append([
            run.label, answers, f"{run.p50_ms:.1f}", f"{run.web_ms:.2f}",
            f"{run.database_ms:.2f}", f"{per_user:.3f}", f"{1000 / per_user:,.0f}",
            f"{run.backends}", f"{run.bench_cpu_share:.2f}",
        ])  # fmt: skip
    print_table(
        ["answers", "count", "p50 ms", "web CPU", "database CPU", "CPU ms/s a user",
         "users a core", "backends", "clients' CPU/s"],
        rows,
    )  # fmt: skip

    thread = thread_kb()
    limit = max_connections(url)
    site_connections = args.workers * 4
    polled = runs[0]
    print(
        f"\nWhat a held stream (SSE) would hold, per connected user:\n"
        f"- a sync worker: the whole process, RSS {worker['rss'] / 1024:.0f} MB"
        f" (PSS {worker['pss'] / 1024:.0f} MB) measured in a gthread worker after the polls\n"
        f"- a gthread thread: {thread:.0f} kB more RSS a parked thread (measured here), but"
        f" GUNICORN_THREADS stops at 64 a process, and 4 in production serve every page\n"
        + (
            f"- a PostgreSQL connection to LISTEN on: {backend['private'] / 1024:.1f} MB private"
            f" (PSS {backend['pss'] / 1024:.1f} MB) a backend, and max_connections is {limit}\n"
            if backend
            else ""
        )
        + f"The poll holds none of these between polls: {polled.backends} backends served"
        f" {args.clients} users (workers × threads = {site_connections}), and a keep-alive"
        f" connection waits in gthread's poller, not in a thread."
    )
    users_per_core = 1000 / polled.per_user_ms_per_second
    streams = limit - site_connections
    print(
        f"\nConclusion: a 304 poll every {args.interval:g} s costs"
        f" {polled.per_user_ms_per_second:.3f} CPU ms a second per user (web"
        f" {polled.web_ms:.2f} + database {polled.database_ms:.2f} ms a poll), about"
        f" {users_per_core:,.0f} users per core, with {site_connections} database"
        f" connections whatever the number of users. Streams that LISTEN would stop at about"
        f" {streams} users on this server (max_connections {limit} less the site's"
        f" {site_connections}), and on sync workers at {worker['rss'] / 1024:.0f} MB each."
    )
    print(
        f"\nLoad average (1, 5, 15 min): before {', '.join(f'{x:.2f}' for x in load_before)};"
        f" after {', '.join(f'{x:.2f}' for x in load_after)}; {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
