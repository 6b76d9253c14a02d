"""Broadcasts expanded by drain_outbox processes, as production runs them: two drains that are
SIGKILLed mid-chunk and started again, and a cancel that lands while they expand.

Each recipient gets two rows: one on the noop channel (bench/noop.py, sent at once and
nothing else) and one on telegram, skipped because nobody here has a Telegram address. A
broadcast's cost is then its expansion and the claim, not a channel."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter

from django.db import connection

from notifications import broadcasts
from notifications.models import Broadcast
from tests.helpers import channels_env, database_url, poll, start_drain
from tests.notifications.test_drain_processes import Output

CHANNELS = ["noop", "telegram"]
NOOP = "bench.noop.NoopChannel"
# drain_outbox refuses a lease that a full batch of its slowest channel could outlast, with
# 5 s to spare (notifications/checks.py): a batch of 16 at a concurrency of 16 is one round,
# and the slowest channel configured is the showcase's demo (1.8 s) or telegram (its HTTP
# timeout, 0.5 s here, and a second more). 7 s is the shortest lease it takes so.
LEASE_SECONDS = 7


def drain_env(**more: str) -> dict[str, str]:
    """The drains' environment: the noop channel, telegram, and the showcase's demo channel
    when it is installed (its check asks for it), with a one-round batch."""
    return {
        "DJANGO_SETTINGS_MODULE": "tests.notifications.noop_settings",
        "V10R_CHANNELS": channels_env("telegram"),
        "DELIVERY_BATCH_SIZE": "16",
        "DELIVERY_CONCURRENCY": "16",
        "DELIVERY_HTTP_CONNECT_TIMEOUT": "0.5",
        "DELIVERY_HTTP_TOTAL_TIMEOUT": "0.5",
        # Unpaced: a paced channel adds the pacing horizon to the lease's floor.
        "DELIVERY_RATE_TELEGRAM": "0",
        **more,
    }


# Inside a chunk's expansion: from BROADCAST_SQL's FOR SHARE to the commit, the drain's
# connection holds a row-share lock on the broadcasts table (nothing else it does takes one).
EXPANDING_SQL = """
SELECT EXISTS (
    SELECT FROM pg_locks AS l
    JOIN pg_stat_activity AS a ON a.pid = l.pid
    WHERE a.application_name = %s
      AND l.relation = 'notifications.broadcasts'::regclass
      AND l.mode = 'RowShareLock'
)
"""

CHUNKS_SQL = """
SELECT status, count(*), coalesce(sum(cardinality(user_ids)), 0),
       count(*) FILTER (WHERE attempts > 1), max(attempts)
FROM notifications.broadcast_chunks
WHERE broadcast_id = %s
GROUP BY status
"""

# Per channel and status, the broadcast's deliveries, and how many notifications have them.
DELIVERIES_SQL = """
SELECT d.channel, d.status, d.skip_reason, count(*), count(DISTINCT d.notification_id)
FROM notifications.notification_deliveries AS d
JOIN notifications.notifications AS n ON n.id = d.notification_id
WHERE n.broadcast_id = %s
GROUP BY 1, 2, 3
"""

OPEN_SQL = """
SELECT
    (SELECT count(*) FROM notifications.broadcast_chunks
     WHERE broadcast_id = %(b)s AND status IN ('pending', 'expanding')),
    (SELECT count(*) FROM notifications.notification_deliveries AS d
     JOIN notifications.notifications AS n ON n.id = d.notification_id
     WHERE n.broadcast_id = %(b)s AND d.status IN ('pending', 'processing'))
"""


def rows(sql: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def open_work(broadcast: Broadcast) -> tuple[int, int]:
    """Chunks still to expand, and deliveries still to send."""
    [(chunks, deliveries)] = rows(OPEN_SQL, {"b": broadcast.pk})
    return chunks, deliveries


def chunks_by_status(broadcast: Broadcast) -> dict[str, tuple[int, int, int, int]]:
    """Per status: chunks, their recipients, chunks claimed more than once, most claims."""
    return {status: rest for status, *rest in [tuple(r) for r in rows(CHUNKS_SQL, [broadcast.pk])]}


def deliveries_by_state(broadcast: Broadcast) -> dict[tuple[str, str, str], tuple[int, int]]:
    return {
        (channel, status, reason): (count, notifications)
        for channel, status, reason, count, notifications in rows(DELIVERIES_SQL, [broadcast.pk])
    }


def make_recipients(django_user_model, count: int) -> list[int]:
    """count active users with an email address each, in a few statements; their ids."""
    django_user_model.objects.bulk_create(
        [
            django_user_model(
                username=f"recipient-{n:05}", email=f"recipient-{n:05}@example.com", password="!"
            )
            for n in range(count)
        ],
        batch_size=5000,
    )
    return list(django_user_model.objects.values_list("pk", flat=True))


def broadcast_to(settings, recipients: list[int], *, chunk_size: int) -> Broadcast:
    """A test note to every recipient on CHANNELS, in chunks of chunk_size (read by
    send_broadcast, in this process: the drains expand the chunks as they were written)."""
    settings.DELIVERY_CHANNELS = {**settings.DELIVERY_CHANNELS, "noop": NOOP}
    settings.BROADCAST_CHUNK_SIZE = chunk_size
    return broadcasts.send_broadcast(
        audience=recipients, type="test.note", params={"label": "all"}, channels=CHANNELS
    )


class Drains:
    """Two drain_outbox processes on the test database, each with a name of its own for
    pg_stat_activity (PGAPPNAME), so a test can see when one is inside an expansion."""

    def __init__(self, *, env: dict[str, str]) -> None:
        self.env = env
        self.processes: list[subprocess.Popen] = []  # every one started
        self.outputs: list[Output] = []
        self.running: list[int] = []  # the index in processes of each slot's current one
        for slot in range(2):
            self.running.append(self._start(slot))
        self.kills = 0
        self.landed = 0  # kills seen inside an expansion the moment before SIGKILL

    def _start(self, slot: int) -> int:
        process = start_drain(
            url=database_url(),
            smtp_port=1,  # no email channel is configured: nothing connects to it
            extra_env={**self.env, "PGAPPNAME": f"broadcast-drain-{slot}"},
        )
        self.processes.append(process)
        self.outputs.append(Output(process))
        return len(self.processes) - 1

    def ready(self, slot: int, *, seconds: float = 60) -> bool:
        """Whether the slot's drain came as far as its loop (it logs its policy first)."""
        process, output = self.processes[self.running[slot]], self.outputs[self.running[slot]]
        poll(
            lambda: output.says("drain_outbox ") or process.poll() is not None,
            seconds=seconds,
            every=0.05,
        )
        return output.says("drain_outbox ")

    def kill_mid_expansion(self, slot: int, *, within: float) -> None:
        """SIGKILL the slot's drain as soon as it is inside a chunk's expansion, or once
        within seconds have passed; start another in its place."""
        assert self.ready(slot), self.outputs[self.running[slot]].text()
        inside = poll(
            lambda: rows(EXPANDING_SQL, [f"broadcast-drain-{slot}"])[0][0],
            seconds=within,
            every=0.005,
        )
        process = self.processes[self.running[slot]]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        self.kills += 1
        self.landed += inside
        self.running[slot] = self._start(slot)

    def stop(self) -> list[tuple[int, str]]:
        """SIGTERM the running ones once they have come as far as their signal handlers;
        their exit codes and output."""
        for slot in range(2):
            self.ready(slot)
        current = [self.processes[i] for i in self.running]
        for process in current:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes = [process.wait(timeout=30) for process in current]
        return [(code, self.outputs[i].text()) for code, i in zip(codes, self.running, strict=True)]

    def kill_all(self) -> None:
        """After a failure: leave no process behind."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


RECIPIENTS = 20_000
CHUNK = 500
KILL_EVERY = 2  # seconds
EXPAND_SECONDS = 90


def test_drains_killed_mid_chunk_every_two_seconds_give_every_recipient_each_row_once(
    transactional_db, django_user_model, settings
):
    recipients = make_recipients(django_user_model, RECIPIENTS)
    broadcast = broadcast_to(settings, recipients, chunk_size=CHUNK)
    assert broadcast.recipients == RECIPIENTS
    # The default budget of attempts: a chunk killed mid-expansion more often than that is
    # still put back, never left failed (only an expansion that fails counts against it).
    env = drain_env(DELIVERY_LEASE_SECONDS=str(LEASE_SECONDS))
    began = time.monotonic()
    drains = Drains(env=env)
    try:
        # One drain or the other, alternately, every KILL_EVERY seconds from the first (so
        # each lives about twice that), killed the moment it is inside an expansion, or a
        # second later if none comes; until every chunk is expanded, for at most
        # EXPAND_SECONDS. The first is killed as soon as it expands, while most chunks wait.
        slot, due = 0, began
        while open_work(broadcast)[0] and time.monotonic() - began < EXPAND_SECONDS:
            if time.monotonic() < due:
                time.sleep(0.05)
                continue
            drains.kill_mid_expansion(slot, within=1)
            slot, due = 1 - slot, max(due + KILL_EVERY, time.monotonic())
        expanded = poll(lambda: not open_work(broadcast)[0], seconds=5, every=0.1)
        expand_seconds = time.monotonic() - began
        settled = poll(lambda: open_work(broadcast) == (0, 0), seconds=60, every=0.1)
        results = drains.stop()
    except BaseException:
        drains.kill_all()
        raise
    seconds = time.monotonic() - began

    chunks = chunks_by_status(broadcast)
    assert expanded, (chunks, drains.kills)
    assert settled, (open_work(broadcast), deliveries_by_state(broadcast))
    assert [code for code, _ in results] == [0, 0], results

    # Every chunk done, none failed, and they hold every recipient.
    assert set(chunks) == {"done"}, chunks
    done_chunks, done_recipients, reclaimed, most_claims = chunks["done"]
    assert (done_chunks, done_recipients) == (RECIPIENTS // CHUNK, RECIPIENTS)

    # One notification of the broadcast for every recipient, and nobody else.
    users = Counter(
        user_id
        for (user_id,) in rows(
            "SELECT user_id FROM notifications.notifications WHERE broadcast_id = %s",
            [broadcast.pk],
        )
    )
    assert set(users) == set(recipients)
    assert set(users.values()) == {1}

    # Each of them has one delivery per channel: the noop row sent, the telegram row skipped
    # (no address); none lost, none left pending or in flight.
    assert deliveries_by_state(broadcast) == {
        ("noop", "sent", ""): (RECIPIENTS, RECIPIENTS),
        ("telegram", "skipped", "no_address"): (RECIPIENTS, RECIPIENTS),
    }

    # The kills happened and some landed inside an expansion: those chunks were claimed
    # again once the lease ran out, and expanded then.
    counted = {
        "seconds": round(seconds, 1),
        "expanding, s": round(expand_seconds, 1),
        "kills": drains.kills,
        "inside an expansion": drains.landed,
        "chunks claimed again": reclaimed,
        "most claims of a chunk": most_claims,
    }
    print(f"\n{counted}")
    assert drains.kills > 0, counted
    assert drains.landed > 0, counted
    assert reclaimed > 0, counted


def test_a_broadcast_cancelled_half_way_through_its_expansion_claims_nothing_after(
    transactional_db, django_user_model, settings
):
    recipients = make_recipients(django_user_model, RECIPIENTS)
    # Small chunks: their expansion lasts long enough (seconds) for the cancel to land in it.
    broadcast = broadcast_to(settings, recipients, chunk_size=100)
    total_chunks = RECIPIENTS // 100
    drains = Drains(env=drain_env())
    try:
        # Half-way: a third of the chunks expanded, or more.
        halfway = poll(
            lambda: chunks_by_status(broadcast).get("done", (0,))[0] >= total_chunks // 3,
            seconds=90,
            every=0.01,
        )
        assert halfway, chunks_by_status(broadcast)
        counts = broadcasts.cancel_broadcast(broadcast)
        # After the cancel's commit: the clock as it reads now, not a transaction's start.
        [(cancelled_at,)] = rows("SELECT clock_timestamp()")
        settled = poll(lambda: open_work(broadcast) == (0, 0), seconds=60, every=0.1)
        results = drains.stop()
    except BaseException:
        drains.kill_all()
        raise
    assert settled, (open_work(broadcast), chunks_by_status(broadcast))
    assert [code for code, _ in results] == [0, 0], results

    # No chunk was claimed after the cancel, and those expanded were expanded before it; the
    # rest were cancelled.
    chunks = chunks_by_status(broadcast)
    assert set(chunks) == {"done", "cancelled"}, chunks
    [(last_claim, last_expansion)] = rows(
        "SELECT max(claimed_at), max(expanded_at) FILTER (WHERE status = 'done')"
        " FROM notifications.broadcast_chunks WHERE broadcast_id = %s",
        [broadcast.pk],
    )
    assert last_claim < cancelled_at, (last_claim, cancelled_at)
    assert last_expansion < cancelled_at, (last_expansion, cancelled_at)

    # Recipients of the expanded chunks got their notification; nobody else did.
    done_recipients = chunks["done"][1]
    [(notifications,)] = rows(
        "SELECT count(*) FROM notifications.notifications WHERE broadcast_id = %s",
        [broadcast.pk],
    )
    assert notifications == done_recipients < len(recipients)

    # No delivery of it was claimed after the cancel, and every one ended sent (claimed before
    # it), cancelled or skipped: none pending.
    [(last_attempt,)] = rows(
        "SELECT max(d.attempted_at) FROM notifications.notification_deliveries AS d"
        " JOIN notifications.notifications AS n ON n.id = d.notification_id"
        " WHERE n.broadcast_id = %s",
        [broadcast.pk],
    )
    assert last_attempt < cancelled_at, (last_attempt, cancelled_at)
    states = deliveries_by_state(broadcast)
    assert set(states) <= {
        ("noop", "sent", ""),
        ("noop", "cancelled", ""),
        ("telegram", "skipped", "no_address"),
    }, states
    assert states[("telegram", "skipped", "no_address")][0] == notifications
    sent = states.get(("noop", "sent", ""), (0, 0))[0]
    cancelled = states.get(("noop", "cancelled", ""), (0, 0))[0]
    assert sent + cancelled == notifications, states
    # What cancel_broadcast said it cancelled is what was cancelled.
    assert counts.cancelled == cancelled, (counts, states)
    print(
        f"\n{{'chunks done': {chunks['done'][0]}, 'chunks cancelled': {chunks['cancelled'][0]},"
        f" 'sent': {sent}, 'cancelled': {cancelled}, 'in flight at the cancel': "
        f"{counts.in_flight}}}"
    )
