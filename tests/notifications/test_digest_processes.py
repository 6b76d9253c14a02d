"""Digests and throttles under concurrency, as production runs them: separate enqueuing
processes, three drain_outbox processes (one of them SIGKILLed and started again, over and
over), a real SMTP server, and windows that close while events are still joining them.

The database's clock runs SPEED times as fast for every process (tests/dbclock.py), so an
hourly window lasts a few seconds and a run of half a minute closes several per user."""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from email.header import decode_header, make_header

from django.db import connection

from notifications import digests
from recipients.models import Cadence, DigestChoice, Recipient
from tests.dbclock import database_clock_running
from tests.helpers import BASE_DIR, channels_env, database_url, poll, start_drain
from tests.notifications.test_drain_processes import Output
from tests.smtp import Mailbox

ENQUEUERS = 4
# Hourly windows in zones a whole, a half and three quarters of an hour off UTC: carriers come
# due at :00, :15, :30 and :45 of every hour.
ZONES = (
    "UTC",
    "Asia/Kolkata",
    "America/St_Johns",
    "Asia/Kathmandu",
    "Australia/Adelaide",
    "Europe/Berlin",
    "America/New_York",
)
# An hour of the database's clock lasts three real seconds.
SPEED = 1200
TICK = 0.2  # the drains' interval, in real seconds
SPREAD = 9  # real seconds: three hours of the running clock
# Small batches: a killed drain's unwritten outcomes, the most it can make the others re-send,
# are at most one batch.
BATCH, CONCURRENCY = 4, 2
# The lease is counted on the database's clock: four real seconds, after which the rows a
# killed drain held are reaped by the others.
LEASE = 4 * SPEED
# How long a due carrier may wait to be claimed, in real seconds: a tick, and a lease's worth
# of slack for the bursts of carriers that fall due together on a busy two-core machine.
LATE = TICK + LEASE / SPEED

# Each enqueuer sends its share of the events to the readers in turn, one transaction each,
# spread over SPREAD seconds at least (so windows close while they come in, however fast the
# machine). Every eleventh is the last step of a longer transaction, as a caller's may be:
# begun a moment before (its now(), and so its window, may have ended by the time it joins,
# and its carrier been claimed) and committed a moment after (the carrier stays locked for the
# join until then). A thread of its own sends those, so their waits do not slow the others.
ENQUEUE = """
import os, random, sys, threading, time
import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "v10r.settings")
django.setup()
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from notifications.enqueue import send_notification

me, processes, events, spread = map(int, sys.argv[1:])
readers = list(get_user_model().objects.filter(username__startswith="reader-").order_by("pk"))
share = range(me, events, processes)
gathered, failed = [], []
began = time.monotonic()


def enqueue(numbers, *, slow):
    moments = random.Random(me)
    try:
        for place, n in enumerate(numbers):
            time.sleep(max(0, began + place * spread / len(numbers) - time.monotonic()))
            with transaction.atomic():
                if slow:
                    connection.cursor().execute("SELECT 1")
                    time.sleep(moments.uniform(0, 0.15))
                result = send_notification(
                    user=readers[n % len(readers)], type="welcome",
                    params={"name": f"event {n}"}, channels=["email"],
                )
                if slow:
                    time.sleep(moments.uniform(0, 0.03))
            gathered.append(bool(result.digested) and not result.queued)
    except BaseException as exc:
        failed.append(exc)
        raise
    finally:
        connection.close()


slow = threading.Thread(target=enqueue, args=([n for n in share if n % 11 == 0],),
                        kwargs={"slow": True})
slow.start()
enqueue([n for n in share if n % 11], slow=False)
slow.join()
if failed:
    sys.exit(f"enqueuing failed: {failed!r}")
print(f"enqueued={len(gathered)} gathered={sum(gathered)}")
"""

# Every delivery: a carrier (with its window's end and its items) or an event's own.
DELIVERIES_SQL = f"""
SELECT d.id, n.user_id, n.type = '{digests.DIGEST}', d.status, d.attempts,
       d.provider_message_id,
       extract(epoch FROM d.attempted_at - (n.message_params->>'until')::timestamptz),
       (SELECT count(*) FROM notifications.digest_items AS i WHERE i.carrier_id = d.id)
FROM notifications.notification_deliveries AS d
JOIN notifications.notifications AS n ON n.id = d.notification_id
"""

# Per event: the carriers it joined, how many of them were sent, and its own sent deliveries.
EVENTS_SQL = """
SELECT n.id,
       count(i.carrier_id),
       count(*) FILTER (WHERE c.status = 'sent'),
       (SELECT count(*) FROM notifications.notification_deliveries AS own
        WHERE own.notification_id = n.id AND own.status = 'sent')
FROM notifications.notifications AS n
LEFT JOIN notifications.digest_items AS i ON i.notification_id = n.id
LEFT JOIN notifications.notification_deliveries AS c ON c.id = i.carrier_id
WHERE n.type = 'welcome'
GROUP BY n.id
"""

# The instant an event's transaction began, on the running clock: created_at is the real
# clock's (the column default is pg_catalog.now(), the same instant on the real clock).
BEGAN = "%(base)s::timestamptz + (n.created_at - %(base)s::timestamptz) * %(speed)s"

# Per event in a carrier, the carrier's window against the instant the event's transaction
# began: whether that instant was in the window, before it (the carrier of its own window had
# been claimed, and it joined the next), or anywhere else.
WINDOWS_SQL = f"""
SELECT count(*) FILTER (WHERE since <= began AND began < until),
       count(*) FILTER (WHERE began < since AND since - began <= until - since),
       count(*)
FROM (
    SELECT {BEGAN} AS began,
           (carrier.message_params->>'since')::timestamptz AS since,
           (carrier.message_params->>'until')::timestamptz AS until
    FROM notifications.digest_items AS i
    JOIN notifications.notifications AS n ON n.id = i.notification_id
    JOIN notifications.notification_deliveries AS d ON d.id = i.carrier_id
    JOIN notifications.notifications AS carrier ON carrier.id = d.notification_id
) AS joined
"""

# The most events one reader got on their own in one throttle window of %(seconds)s.
ALONE_SQL = f"""
SELECT max(alone) FROM (
    SELECT count(*) AS alone
    FROM notifications.notifications AS n
    JOIN notifications.notification_deliveries AS d ON d.notification_id = n.id
    WHERE n.type = 'welcome'
    GROUP BY n.user_id, floor(extract(epoch FROM {BEGAN}) / %(seconds)s)
) AS windows
"""

# Carriers due longer ago than the bound and still pending: what a drain should have claimed.
OVERDUE_SQL = f"""
SELECT count(*), max(extract(epoch FROM now() - d.next_attempt_at))
FROM notifications.notification_deliveries AS d
JOIN notifications.notifications AS n ON n.id = d.notification_id
WHERE n.type = '{digests.DIGEST}' AND d.status = 'pending'
  AND d.next_attempt_at < now() - %s * interval '1 second'
"""

# The readers who had a carrier sent so far.
SENT_TO_SQL = f"""
SELECT count(DISTINCT n.user_id)
FROM notifications.notification_deliveries AS d
JOIN notifications.notifications AS n ON n.id = d.notification_id
WHERE n.type = '{digests.DIGEST}' AND d.status = 'sent'
"""

UNSENT_SQL = "SELECT 1 FROM notifications.notification_deliveries WHERE status <> 'sent' LIMIT 1"


def rows(sql: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def make_readers(django_user_model, count: int, *, digest: bool) -> None:
    for n in range(count):
        user = django_user_model.objects.create_user(
            f"reader-{n:02}", email=f"reader-{n:02}@example.com"
        )
        Recipient.objects.create(user=user, time_zone=ZONES[n % len(ZONES)])
        if digest:
            DigestChoice.objects.create(user=user, category="account", cadence=Cadence.HOURLY)


def confirm_late(mailbox: Mailbox, *, seconds: float) -> None:
    """Make mailbox keep each message at once and confirm it only seconds later, as a busy
    server may: a drain killed in between has sent the message and cannot know it, so the row
    is sent again once it is reaped, with the same Message-ID."""
    keep = mailbox.handle_DATA

    async def handle_DATA(server, session, envelope):
        reply = await keep(server, session, envelope)
        await asyncio.sleep(seconds)
        return reply

    mailbox.handle_DATA = handle_DATA


def start_enqueuer(me: int, events: int, env: dict[str, str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_DEBUG"} | env
    return subprocess.Popen(
        [sys.executable, "-c", ENQUEUE, str(me), str(ENQUEUERS), str(events), str(SPREAD)],
        cwd=BASE_DIR,
        env=env | {"DATABASE_URL": database_url()},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


class Drains:
    """Three drain_outbox processes on the test database: two that run throughout, and the
    victim, killed and started again."""

    def __init__(self, smtp_port: int, *, watch) -> None:
        self.smtp_port = smtp_port
        self.watch = watch  # called every tenth of a second while it waits to kill
        self.options = (
            "--batch-size",
            str(BATCH),
            "--concurrency",
            str(CONCURRENCY),
            "--lease",
            str(LEASE),
            "--interval",
            str(TICK),
        )
        self.processes: list[subprocess.Popen] = []  # every one started, and its output
        self.outputs: list[Output] = []
        self.survivors = [self._start() for _ in range(2)]
        self.victim = self._start()
        self.kills = 0
        self.moments = random.Random(24)

    def _start(self) -> subprocess.Popen:
        process = start_drain(
            *self.options,
            url=database_url(),
            smtp_port=self.smtp_port,
            email_timeout=2.0,
            extra_env={"V10R_CHANNELS": channels_env("email")},
        )
        self.processes.append(process)
        self.outputs.append(Output(process))
        return process

    def kill_victim_holding_rows(self) -> None:
        """Once the victim has drained for a while, SIGKILL it soon after some drain claims
        rows (with three drains, often the victim itself: before its sends, during them, or
        after some were sent and not yet written), or after a second and a half; start it
        again. The while is a second or two: each start costs Django's start-up, on a
        machine of two cores the enqueuers need too."""
        output = self.outputs[-1]
        assert poll(lambda: output.says("drain_outbox "), seconds=60), output.text()
        poll(lambda: self.watch(), seconds=self.moments.uniform(1, 2), every=0.1)
        poll(
            lambda: rows(
                "SELECT 1 FROM notifications.notification_deliveries"
                " WHERE status = 'processing' LIMIT 1"
            ),
            seconds=1.5,
            every=0.01,
        )
        time.sleep(self.moments.uniform(0, 0.3))
        self.victim.send_signal(signal.SIGKILL)
        self.victim.wait(timeout=30)
        self.kills += 1
        self.victim = self._start()

    def stop(self) -> list[tuple[int, str]]:
        """SIGTERM each, once the victim last started has come as far as its signal handlers
        (before them, SIGTERM ends a process with no word); their exit codes and output. The
        output is its reader's (Output), the only one that reads the process's pipe."""
        poll(lambda: self.outputs[-1].says("drain_outbox "), seconds=60)
        running = [*self.survivors, self.victim]
        for process in running:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=30) for process in running]
        texts = [self.outputs[self.processes.index(p)].text() for p in running]
        return list(zip(codes, texts, strict=True))

    def reaped(self) -> int:
        """The rows the drains' reapers requeued, as their logs count them."""
        return sum(
            int(found) for o in self.outputs for found in re.findall(r"reaped=(\d+)", o.text())
        )


@dataclass
class Run:
    """What a run left to check: the enqueuers' exit codes and output, the drains', whether
    every delivery ended sent, and what was seen on the way."""

    enqueued: list[tuple[int, str]]
    drained: list[tuple[int, str]]
    settled: bool
    drains: Drains
    base: datetime  # where the running clock started
    seconds: float  # how long the enqueuers ran, real, to within a tenth of a second or two
    sent_to: int  # readers who had a carrier sent before the last event was in
    overdue: list[tuple[int, float]]  # carriers seen pending past the bound: how many, how late


def run_under_kills(smtp_server, *, events: int, kills: int, env: dict[str, str]) -> Run:
    """Enqueue events from ENQUEUERS processes (with env) while the drains send and the victim
    is killed, at least kills times and until the last event is in; wait until every delivery
    is sent."""
    confirm_late(smtp_server.mailbox, seconds=0.1)
    smtp_server.mailbox.step_delay = 0.01
    overdue: list[tuple[int, float]] = []
    enqueuers: list[subprocess.Popen] = []
    seen = {"sent to": 0, "seconds": 0.0}

    def watch() -> None:
        """Note carriers left pending past the bound; while events still come in, the
        readers who had one sent, and how long it has been."""
        if any(e.poll() is None for e in enqueuers):
            [(seen["sent to"],)] = rows(SENT_TO_SQL)
            seen["seconds"] = time.monotonic() - began
        [(count, most)] = rows(OVERDUE_SQL, [LATE * SPEED])
        if count:
            overdue.append((count, float(most) / SPEED))

    def settled() -> bool:
        watch()
        return not rows(UNSENT_SQL)

    with database_clock_running(SPEED) as base:
        drains = Drains(smtp_server.port, watch=watch)
        try:
            began = time.monotonic()
            enqueuers += [start_enqueuer(me, events, env) for me in range(ENQUEUERS)]
            while any(e.poll() is None for e in enqueuers) or drains.kills < kills:
                drains.kill_victim_holding_rows()
            enqueued = [(e.wait(timeout=60), e.communicate()[0]) for e in enqueuers]
            # The last window ends an hour (three seconds) after the last event at most; a
            # killed drain's rows wait out the lease.
            done = poll(settled, seconds=60, every=0.1)
        finally:
            drained = drains.stop()
    return Run(enqueued, drained, done, drains, base, seen["seconds"], seen["sent to"], overdue)


def check_sent_once(run: Run, smtp_server, *, events: int, readers: int, on_time: bool) -> dict:
    """The promises both kinds of carrier keep (see the assertions), and with on_time, the
    bounds on when carriers were claimed; return what was counted."""
    assert [code for code, _ in run.enqueued] == [0] * ENQUEUERS, run.enqueued
    assert run.settled, rows(DELIVERIES_SQL)
    assert [code for code, _ in run.drained] == [0, 0, 0], run.drained

    # Every event is in exactly one carrier, and that carrier was sent; or, in none, it had
    # its own delivery sent. None is lost, none in two.
    found = Counter((joined, sent, own) for _, joined, sent, own in rows(EVENTS_SQL))
    assert found.total() == events
    assert set(found) <= {(1, 1, 0), (0, 0, 1)}, found

    deliveries = rows(DELIVERIES_SQL)
    assert {status for _, _, _, status, *_ in deliveries} == {"sent"}
    carriers = [row for row in deliveries if row[2]]
    # Carriers of two windows or more for every reader.
    per_reader = Counter(user for _, user, *_ in carriers)
    assert len(per_reader) == readers and min(per_reader.values()) >= 2, per_reader

    # Each event in a carrier joined the window its transaction began in, or, where that
    # window's carrier had been claimed already, the one after it.
    params = {"base": run.base, "speed": SPEED}
    [(in_window, next_window, joined)] = rows(WINDOWS_SQL, params)
    assert (in_window + next_window, joined) == (found[(1, 1, 0)],) * 2
    # No carrier was claimed before its window ended. One sent at its first claim was claimed
    # within the bound after; one claimed again (a killed drain's) was pending no longer than
    # that either, as watch() saw throughout.
    lags = [lag for *_, attempts, _, lag, _ in carriers if attempts == 1]
    assert min(lag for *_, lag, _ in carriers) >= 0
    if on_time:
        assert max(lags) <= LATE * SPEED, max(lags) / SPEED
        assert not run.overdue, run.overdue
        # Windows closed while events came in: every reader had a carrier sent before the
        # last event was in.
        assert run.sent_to == readers

    # Each sent delivery's email arrived, and nothing else. A message more than once is a
    # killed drain's send whose outcome it never wrote: at most a batch per kill, and at most
    # once per claim of its row.
    received = smtp_server.mailbox.message_ids()
    assert set(received) == {provider_id for *_, provider_id, _, _ in deliveries}
    resends = sum(count - 1 for count in received.values())
    assert resends <= run.drains.kills * BATCH, (resends, run.drains.kills)
    claims = {provider_id: attempts for *_, attempts, provider_id, _, _ in deliveries}
    assert all(count <= claims[m] for m, count in received.items()), received
    # A carrier's email counts the items it holds: a re-send lists what the first send did.
    items = {provider_id: total for *_, provider_id, _, total in carriers}
    with smtp_server.mailbox.lock:
        subjects = [
            (m["Message-ID"], str(make_header(decode_header(m["Subject"]))))
            for m in smtp_server.mailbox.messages
        ]
    for message_id, subject in subjects:
        if message_id in items:
            assert re.search(rf"\b{items[message_id]} (more )?notifications?\b", subject), subject
    counted = {
        "enqueue seconds": round(run.seconds, 1),
        "carriers": len(carriers),
        "sent alone": found[(0, 0, 1)],
        "kills": run.drains.kills,
        "rows reaped": run.drains.reaped(),
        "re-sent": resends,
        "joined the next window": next_window,
        "latest claim, s": round(float(max(lags)) / SPEED, 2),
    }
    print(f"\n{counted}")
    return counted


def test_5000_events_of_50_digest_readers_each_reach_exactly_one_sent_digest_under_kills(
    transactional_db, django_user_model, smtp_server
):
    make_readers(django_user_model, 50, digest=True)
    run = run_under_kills(smtp_server, events=5000, kills=4, env={})
    counted = check_sent_once(run, smtp_server, events=5000, readers=50, on_time=True)
    # Every event joined a digest, and none was sent alone (enqueue said so too).
    assert all("gathered=1250" in output for _, output in run.enqueued), run.enqueued
    assert counted["sent alone"] == 0


def test_past_the_throttle_events_fold_into_one_sent_carrier_under_kills(
    transactional_db, django_user_model, smtp_server
):
    """Ten readers without a digest, a throttle of 3 an hour (3 s): the first three events of
    each window are sent alone, the rest in that window's carrier.

    When carriers are claimed is not checked here: the events' own deliveries are due from
    their column default, the real clock, hours behind the running one, so every drain takes
    all of them before any carrier; how late a carrier is then says how far behind the drains
    were on a busy machine, not what a drain does with a carrier."""
    make_readers(django_user_model, 10, digest=False)
    throttle = {"NOTIFICATION_THROTTLE_LIMIT": "3", "NOTIFICATION_THROTTLE_SECONDS": "3600"}
    run = run_under_kills(smtp_server, events=1000, kills=2, env=throttle)
    counted = check_sent_once(run, smtp_server, events=1000, readers=10, on_time=False)
    [(most,)] = rows(ALONE_SQL, {"base": run.base, "speed": SPEED, "seconds": 3600})
    assert most == 3
    assert counted["sent alone"] >= 10 * 3 * 2  # three in each of two windows or more
