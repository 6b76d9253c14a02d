"""Email throughput: the outbox's drain against django-post-office, on one local SMTP server.

The same N emails (--rows) go out through each side, one process each: queued as email
deliveries and sent by `manage.py drain_outbox --batch-size 100`, or queued with
post_office's mail.send_many() and sent by `manage.py send_queued_mail` (its defaults: one
process, five sender threads, batches of 100). Every email is the catalogue's queue.demo
message in English, from DEFAULT_FROM_EMAIL to one address of its own, sent through
MAILERS["default"] to one aiosmtpd server on loopback. The server runs in a process of its
own, so it never competes for the measured process's GIL, and can hold each DATA reply back
for a while (--delays, in ms), as a slow mail server would.

A side's rate runs from the first message the server accepted to the last, on the server's
clock, so neither process's start-up (Django, system checks, the first query) counts; the
start-up is shown apart. Every message must arrive exactly once: the Message-IDs the server
received must be those of the rows marked sent, each once, or the run fails. The sides and
delays take turns run by run; the figures are medians of --runs. Beside them: the SMTP
connections each side opened, and the server's own ceiling (a bare smtplib client, no
database), which no side can pass.

    make bench     # or: .venv/bin/python bench/email_throughput.py [--rows N] [--runs N]
                   #                      [--delays 0,20] [--concurrency N]

Runs in two databases of its own, v10r_bench_email and v10r_bench_email_post_office, on the
server DATABASE_URL names or on the embedded one.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import re
import signal
import smtplib
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.types.json import Jsonb

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import environment, server_url  # noqa: E402 - after sys.path

PROJECT_DATABASE = "v10r_bench_email"
POST_OFFICE_DATABASE = "v10r_bench_email_post_office"
POST_OFFICE_SETTINGS = "bench.post_office_settings"
MESSAGE_KEY = "queue.demo"
MESSAGE_PARAMS = {"label": "bench"}
BATCH_SIZE = 100
TARGET = 2.0  # × django-post-office, at every delay
# How long a side may take beyond its sends before the run is given up: start-up, the writes
# after the last send, a SIGTERM's last batch.
GRACE_SECONDS = 60.0


class BenchmarkError(RuntimeError):
    pass


def address(number: int) -> str:
    return f"bench-{number}@example.com"


# --- The SMTP server ----------------------------------------------------------------------

# Django writes Message-ID on one line; \s also covers a header folded onto the next.
MESSAGE_ID = re.compile(rb"^Message-ID:\s*(<[^>]*>)", re.IGNORECASE | re.MULTILINE)


class Sink:
    """An aiosmtpd handler: accepts every message, noting its Message-ID, size and time.

    Only the reply to DATA (the one that says the message is taken) is delayed: the greeting,
    EHLO, MAIL, RCPT and QUIT are answered at once.
    """

    def __init__(self) -> None:
        self.delay_seconds = 0.0
        self.changed = threading.Condition()
        self.message_ids: list[bytes] = []
        self.total_bytes = 0
        self.connections = 0
        self.first = self.last = 0.0

    def connection_opened(self) -> None:
        with self.changed:
            self.connections += 1

    async def handle_DATA(self, server, session, envelope):
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)
        # The server's clock, when the message is accepted: the same for both sides.
        accepted = time.monotonic()
        content = envelope.original_content
        headers = content.split(b"\r\n\r\n", 1)[0]
        found = MESSAGE_ID.search(headers)
        with self.changed:
            if not self.message_ids:
                self.first = accepted
            self.last = accepted
            self.message_ids.append(found.group(1) if found else b"")
            self.total_bytes += len(content)
            self.changed.notify_all()
        return "250 2.0.0 Accepted"

    def reset(self, *, delay_seconds: float) -> None:
        with self.changed:
            self.delay_seconds = delay_seconds
            self.message_ids = []
            self.total_bytes = 0
            self.connections = 0
            self.first = self.last = 0.0

    def wait(self, *, count: int, seconds: float) -> int:
        """Wait until count messages have arrived, or seconds have passed; return how many."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.message_ids) >= count, timeout=seconds)
            return len(self.message_ids)

    def received(self) -> dict:
        # A dict crosses the pipe; the parent makes it a Received (a class defined in the
        # main module does not unpickle under the other process's name for that module).
        with self.changed:
            return {
                "message_ids": [m.decode(errors="replace") for m in self.message_ids],
                "total_bytes": self.total_bytes,
                "connections": self.connections,
                "first": self.first,
                "last": self.last,
            }


@dataclass(frozen=True)
class Received:
    message_ids: list[str]
    total_bytes: int
    connections: int  # SMTP connections opened: fewer than messages when they are reused
    first: float  # time.monotonic() of the server's process: the same clock system-wide
    last: float


def serve(commands) -> None:
    """Run a Sink on a free loopback port and answer the parent's commands until "stop"."""
    from aiosmtpd.controller import Controller

    from tests.smtp import free_port

    sink = Sink()

    class CountingController(Controller):
        def factory(self):
            sink.connection_opened()
            return super().factory()

    # free_port() lets the port go before aiosmtpd binds it: another process may take it in
    # between, so try a few.
    for attempt in range(5):
        port = free_port()
        # A fixed name for the greeting: left unset, aiosmtpd looks up the host's name for
        # every connection, a cost a real server does not pay per message.
        controller = CountingController(
            sink, hostname="127.0.0.1", port=port, server_hostname="sink.localhost"
        )
        try:
            controller.start()
        except OSError:
            if attempt == 4:
                raise
        else:
            break
    commands.send(port)
    try:
        while True:
            command, kwargs = commands.recv()
            if command == "stop":
                return
            commands.send(getattr(sink, command)(**kwargs))
    finally:
        controller.stop()


class SinkProcess:
    """The parent's handle on the SMTP server's process."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.commands, child = context.Pipe()
        self.process = context.Process(target=serve, args=(child,), daemon=True)
        self.process.start()
        if not self.commands.poll(30):
            raise BenchmarkError("the SMTP server did not start within 30 s")
        self.port: int = self.commands.recv()

    def _call(self, command: str, **kwargs):
        self.commands.send((command, kwargs))
        return self.commands.recv()

    def reset(self, *, delay_seconds: float) -> None:
        self._call("reset", delay_seconds=delay_seconds)

    def wait(self, *, count: int, seconds: float) -> int:
        return self._call("wait", count=count, seconds=seconds)

    def received(self) -> Received:
        return Received(**self._call("received"))

    def stop(self) -> None:
        self.commands.send(("stop", {}))
        self.process.join(timeout=10)


# --- The two sides ------------------------------------------------------------------------


def database_url(name: str) -> str:
    return urlunsplit(urlsplit(server_url())._replace(path=f"/{name}"))


def side_environment(url: str, *, settings_module: str, smtp_port: int) -> dict[str, str]:
    env = environment(url)
    env["DJANGO_SETTINGS_MODULE"] = settings_module
    # The one SMTP mailer both sides send through (v10r/settings.py's MAILERS["default"]).
    env |= {
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_port),
        "EMAIL_HOST_USER": "",
        "EMAIL_HOST_PASSWORD": "",
        "EMAIL_USE_TLS": "0",
        "EMAIL_USE_SSL": "0",
    }
    return env


def create_database(url: str, env: dict[str, str]) -> None:
    """Drop and create url's database, then migrate it under env's settings."""
    name = urlsplit(url).path.lstrip("/")
    if not name.startswith("v10r_bench_email"):
        raise BenchmarkError(f"refusing to drop {name!r}: not a database of this benchmark")
    with psycopg.connect(url, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=BASE_DIR,
        env=env,
        check=True,
    )


class ProjectSide:
    name = "v10r drain"

    def __init__(self, *, smtp_port: int, rows: int, concurrency: int | None) -> None:
        self.url = database_url(PROJECT_DATABASE)
        self.env = side_environment(self.url, settings_module="v10r.settings", smtp_port=smtp_port)
        # The shortest tick drain_outbox takes; full batches follow each other without one.
        self.command = [
            *[sys.executable, "manage.py", "drain_outbox"],
            *["--batch-size", str(BATCH_SIZE), "--interval", "0.1"],
        ]
        if concurrency is not None:
            self.command += ["--concurrency", str(concurrency)]
        create_database(self.url, self.env)
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(
                "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, "
                "email, is_staff, is_active, date_joined) "
                "SELECT '!', false, 'bench-' || i, '', '', 'bench-' || i || '@example.com', "
                "false, true, now() FROM generate_series(1, %s) AS i",
                [rows],
            )

    def fill(self, rows: int) -> None:
        """Queue one due email delivery for each bench user, as enqueue would leave them."""
        with psycopg.connect(self.url, autocommit=True) as db:
            db.execute(
                "TRUNCATE notifications.notification_deliveries, notifications.notifications "
                "CASCADE"
            )
            db.execute(
                """
                WITH n AS (
                    INSERT INTO notifications.notifications
                        (id, user_id, type, message_key, message_params, action_url)
                    SELECT gen_random_uuid(), id, 'bench', %(key)s, %(params)s, ''
                    FROM auth_user WHERE username LIKE 'bench-%%'
                    RETURNING id
                )
                INSERT INTO notifications.notification_deliveries
                    (notification_id, channel, next_attempt_at)
                SELECT id, 'email', now() - interval '1 minute' FROM n
                """,
                {"key": MESSAGE_KEY, "params": Jsonb(MESSAGE_PARAMS)},
            )
            db.execute("VACUUM ANALYZE notifications.notification_deliveries")

    def sent_message_ids(self) -> list[str]:
        with psycopg.connect(self.url, autocommit=True) as db:
            rows = db.execute(
                "SELECT provider_message_id FROM notifications.notification_deliveries "
                "WHERE status = 'sent'"
            )
            return [r[0] for r in rows]

    def finish(self, process: subprocess.Popen, *, rows: int) -> None:
        """Wait until the database shows every row sent, then stop the resident loop."""
        deadline = time.monotonic() + GRACE_SECONDS
        while len(self.sent_message_ids()) < rows:
            if process.poll() is not None or time.monotonic() > deadline:
                raise BenchmarkError(f"{self.name}: the rows sent were never all marked sent")
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=GRACE_SECONDS)


def queue_post_office(env: dict[str, str], rows: int) -> None:
    """Queue rows emails through post_office, the same message the project's side sends."""
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from post_office import mail

    from recipients import catalogue

    language = settings.LANGUAGE_CODE
    message = catalogue.render(key=MESSAGE_KEY, params=MESSAGE_PARAMS, language=language)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE post_office_email CASCADE")
    mail.send_many(
        [
            {
                "recipients": [address(number)],
                "sender": settings.DEFAULT_FROM_EMAIL,
                "subject": message.subject,
                "message": message.body,
                # The email channel sends the language too.
                "headers": {"Content-Language": language},
                "priority": "medium",
            }
            for number in range(1, rows + 1)
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE post_office_email")


class PostOfficeSide:
    name = "django-post-office"

    def __init__(self, *, smtp_port: int, lockfile: Path) -> None:
        self.url = database_url(POST_OFFICE_DATABASE)
        self.env = side_environment(
            self.url, settings_module=POST_OFFICE_SETTINGS, smtp_port=smtp_port
        )
        # A lock file of its own, so no other post_office on this machine holds this one back.
        self.command = [sys.executable, "manage.py", "send_queued_mail", "-L", str(lockfile)]
        create_database(self.url, self.env)

    def fill(self, rows: int) -> None:
        process = multiprocessing.get_context("spawn").Process(
            target=queue_post_office, args=(self.env, rows)
        )
        process.start()
        process.join()
        if process.exitcode != 0:
            raise BenchmarkError(f"queueing through post_office failed ({process.exitcode})")

    def sent_message_ids(self) -> list[str]:
        with psycopg.connect(self.url, autocommit=True) as db:
            # post_office's STATUS.sent is 0.
            rows = db.execute("SELECT message_id FROM post_office_email WHERE status = 0")
            return [r[0] for r in rows]

    def finish(self, process: subprocess.Popen, *, rows: int) -> None:
        """send_queued_mail exits once the queue is empty."""
        process.wait(timeout=GRACE_SECONDS)


# --- One measurement ----------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    rate: float  # emails per second, from the first accepted message to the last
    startup_seconds: float  # from launching the process to the first accepted message
    mean_bytes: float  # the size of a message as the server received it
    connections: int  # SMTP connections the side opened


def measure(side, *, sink: SinkProcess, rows: int, delay_ms: float, logs: Path) -> Measurement:
    side.fill(rows)
    sink.reset(delay_seconds=delay_ms / 1000)
    log_path = logs / f"{side.name.replace(' ', '-')}-{delay_ms:g}ms.log"
    with log_path.open("w") as log:
        launched = time.monotonic()
        process = subprocess.Popen(
            side.command, cwd=BASE_DIR, env=side.env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            _wait_for_messages(side, process, sink=sink, rows=rows, delay_ms=delay_ms)
            side.finish(process, rows=rows)
        except (BenchmarkError, subprocess.TimeoutExpired) as exc:
            raise BenchmarkError(f"{exc}\n--- its log, last lines ---\n{_tail(log_path)}") from exc
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    if process.returncode != 0:
        raise BenchmarkError(
            f"{side.name} exited with {process.returncode}\n--- its log ---\n{_tail(log_path)}"
        )
    received = sink.received()
    _check_exactly_once(side.name, received.message_ids, side.sent_message_ids(), rows=rows)
    return Measurement(
        # rows messages accepted over the time between the first and the last: rows - 1 gaps.
        rate=(rows - 1) / (received.last - received.first),
        startup_seconds=received.first - launched,
        mean_bytes=received.total_bytes / rows,
        connections=received.connections,
    )


def _wait_for_messages(side, process, *, sink: SinkProcess, rows: int, delay_ms: float) -> None:
    # Generous: every message one after the other, each waiting out its delay, and then some.
    deadline = time.monotonic() + GRACE_SECONDS + rows * (delay_ms / 1000 + 0.01)
    while (count := sink.wait(count=rows, seconds=0.5)) < rows:
        if process.poll() is not None:
            # Its sends are over: the server noted each message before its reply went out.
            count = sink.wait(count=rows, seconds=0)
            if count < rows:
                raise BenchmarkError(
                    f"{side.name} exited ({process.returncode}) after {count} of {rows} messages"
                )
            return
        if time.monotonic() > deadline:
            raise BenchmarkError(f"{side.name}: only {count} of {rows} messages arrived in time")


def _check_exactly_once(name: str, received: list[str], sent: list[str], *, rows: int) -> None:
    counts = Counter(received)
    duplicated = {m: n for m, n in counts.items() if n > 1}
    missing = set(sent) - counts.keys()
    unexpected = counts.keys() - set(sent)
    if len(received) == len(sent) == rows and not (duplicated or missing or unexpected):
        return
    raise BenchmarkError(
        f"{name}: not every message arrived exactly once: {len(received)} received, "
        f"{len(sent)} marked sent, {rows} queued; {len(duplicated)} Message-ID(s) more than "
        f"once (e.g. {sorted(duplicated)[:3]}), {len(missing)} sent but never received, "
        f"{len(unexpected)} received but not marked sent (e.g. {sorted(unexpected)[:3]})"
    )


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# --- The server's ceiling -----------------------------------------------------------------

CEILING_MESSAGES = 1_000


def drain_concurrency(args) -> int:
    """drain_outbox's sends in flight: --concurrency, else the settings' DELIVERY_CONCURRENCY."""
    if args.concurrency:
        return args.concurrency
    os.environ.setdefault("DJANGO_SECRET_KEY", "benchmark-only-secret-key-0123456789-abcdefghij")
    from v10r import settings  # reads DELIVERY_CONCURRENCY as drain_outbox will

    return settings.DELIVERY_CONCURRENCY


def ceiling(sink: SinkProcess, *, messages: int, delay_ms: float, threads: int) -> float:
    """Messages per second a bare smtplib client gets from the server: threads connections,
    each kept for all its messages, no database. What neither side can beat."""
    sink.reset(delay_seconds=delay_ms / 1000)
    shares = [range(k, messages, threads) for k in range(min(threads, messages))]

    def send(share: range) -> None:
        with smtplib.SMTP("127.0.0.1", sink.port, timeout=GRACE_SECONDS) as smtp:
            for number in share:
                smtp.sendmail(
                    "notifications@localhost",
                    [address(number)],
                    CEILING_MESSAGE.format(number=number, to=address(number)).encode(),
                )

    senders = [threading.Thread(target=send, args=(share,)) for share in shares]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    received = sink.received()
    if len(received.message_ids) != messages or len(set(received.message_ids)) != messages:
        raise BenchmarkError(
            f"ceiling: {len(received.message_ids)} messages arrived, {messages} were sent"
        )
    return (messages - 1) / (received.last - received.first)


# About the size of the messages both sides send.
CEILING_MESSAGE = (
    'Content-Type: text/plain; charset="utf-8"\r\nContent-Transfer-Encoding: 8bit\r\n'
    "MIME-Version: 1.0\r\nSubject: A notification from the queue\r\n"
    "From: v10r <notifications@localhost>\r\nTo: {to}\r\n"
    "Date: Thu, 01 Jan 2026 00:00:00 +0000\r\nMessage-ID: <ceiling-{number}@localhost>\r\n"
    "Content-Language: en\r\n\r\n"
    "Queued as bench, claimed and delivered by the drain loop.\r\n"
)


# --- Command line -------------------------------------------------------------------------


def _whole_number(low: int, *, high: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            limit = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{text} is out of range; use {limit}")
        return value

    return parse


def _delays(text: str) -> list[float]:
    values = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item.strip()!r} is not a number of ms") from None
        if not 0 <= value <= 10_000:  # also refuses NaN
            raise argparse.ArgumentTypeError(f"{item.strip()} ms is out of range; use 0 to 10000")
        values.append(value)
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r} names a delay twice")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows",
        # A rate needs two messages: it runs from the first to the last.
        type=_whole_number(2),
        default=2_000,
        help="Emails each side sends per run (default %(default)s; at least 2).",
    )
    parser.add_argument(
        "--runs",
        type=_whole_number(1),
        default=3,
        help="Runs of every side and delay; the medians are shown (default %(default)s).",
    )
    parser.add_argument(
        "--delays",
        type=_delays,
        default=[0.0, 20.0],
        help="Comma-separated ms the server waits before each DATA reply (default 0,20).",
    )
    parser.add_argument(
        "--concurrency",
        type=_whole_number(1, high=64),
        help="drain_outbox's --concurrency (default: DELIVERY_CONCURRENCY, 4 unless set).",
    )
    args = parser.parse_args()

    sink = SinkProcess()
    try:
        with tempfile.TemporaryDirectory(prefix="v10r-bench-email-") as scratch:
            scratch_dir = Path(scratch)
            sides = [
                PostOfficeSide(smtp_port=sink.port, lockfile=scratch_dir / "post_office"),
                ProjectSide(smtp_port=sink.port, rows=args.rows, concurrency=args.concurrency),
            ]
            measured = run_all(sides, sink=sink, args=args, logs=scratch_dir)
    finally:
        sink.stop()
    report(measured, sides=sides, args=args)


def run_all(sides, *, sink: SinkProcess, args, logs: Path) -> dict:
    measured: dict = {(side.name, delay): [] for side in sides for delay in args.delays}
    measured |= {("ceiling", delay): [] for delay in args.delays}
    # The sides and delays take turns, and which side goes first alternates, so a noisy
    # moment on this shared machine does not land on one of them only.
    turn = 0
    for run in range(args.runs):
        for delay in args.delays:
            ordered = sides if turn % 2 == 0 else sides[::-1]
            turn += 1
            for side in ordered:
                result = measure(side, sink=sink, rows=args.rows, delay_ms=delay, logs=logs)
                measured[(side.name, delay)].append(result)
                print(
                    f"run {run + 1}/{args.runs}, {delay:g} ms: {side.name} "
                    f"{result.rate:,.0f} emails/s (start-up {result.startup_seconds:.2f} s, "
                    f"{result.connections} SMTP connections)",
                    file=sys.stderr,
                )
            rate = ceiling(
                sink,
                messages=min(args.rows, CEILING_MESSAGES),
                delay_ms=delay,
                threads=drain_concurrency(args),
            )
            measured[("ceiling", delay)].append(rate)
    return measured


def report(measured: dict, *, sides, args) -> None:
    post_office, project = (side.name for side in sides)

    def median(name: str, delay: float, field: str = "rate") -> float:
        return statistics.median(getattr(m, field) for m in measured[(name, delay)])

    def overall(name: str, field: str) -> float:
        return statistics.median(
            getattr(m, field) for delay in args.delays for m in measured[(name, delay)]
        )

    print(
        f"\nEmail throughput, {args.rows:,} emails per side, one process each, one aiosmtpd "
        f"server on loopback in its own process; medians of {args.runs}\n"
    )
    print(f"| delay before each DATA reply | {post_office} emails/s | {project} emails/s | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for delay in args.delays:
        theirs, ours = median(post_office, delay), median(project, delay)
        print(f"| {delay:g} ms | {theirs:,.0f} | {ours:,.0f} | {ours / theirs:.2f}× |")
    print(f"\nTarget: {project} ≥ {TARGET:.1f}× {post_office} at every delay.\n")
    option = f" --concurrency {args.concurrency}" if args.concurrency else ""
    drain = f"drain_outbox --batch-size {BATCH_SIZE} --interval 0.1{option}"
    print(
        f"- {project}: `manage.py {drain}` (concurrency {drain_concurrency(args)}); "
        f"{post_office}: `manage.py send_queued_mail` (1 process, 5 threads, batches of 100)."
    )
    print(
        "- Rates run from the first message the server accepted to the last. Start-up, "
        f"launch to first message, is left out: {overall(post_office, 'startup_seconds'):.2f} s "
        f"for {post_office}, {overall(project, 'startup_seconds'):.2f} s for {project}."
    )
    print(
        f"- Mean message size: {overall(post_office, 'mean_bytes'):,.0f} B and "
        f"{overall(project, 'mean_bytes'):,.0f} B (post_office's Message-IDs are longer); "
        f"SMTP connections opened per run: {overall(post_office, 'connections'):,.0f} and "
        f"{overall(project, 'connections'):,.0f}."
    )
    threads = drain_concurrency(args)
    ceilings = ", ".join(
        f"{statistics.median(measured[('ceiling', d)]):,.0f}/s at {d:g} ms" for d in args.delays
    )
    print(
        f"- This server's ceiling, a bare smtplib client with {threads} threads of one "
        f"connection each and no database: {ceilings}."
    )


if __name__ == "__main__":
    try:
        main()
    except BenchmarkError as exc:
        sys.exit(f"email_throughput: {exc}")
