"""Digests: what joining a carrier costs an enqueue, and what a carrier of 500 items costs the
drain.

Enqueue: events per second of send_notification (one welcome on email, a transaction each)
for 50 readers, 2,000 events a run, from 1 and from 4 processes, in four ways:

- plain, no throttle (NOTIFICATION_THROTTLE_LIMIT=0): the baseline, a notification and its
  delivery;
- plain, throttle counted: a limit no reader reaches (10,000 an hour), so each event counts
  itself in its window's row and is sent alone;
- plain, the default throttle (10 an hour): with 40 events a reader, the first 10 are sent
  alone and the rest fold into the window's throttle carrier;
- hourly digest: every event joins its reader's carrier.

Each run starts from empty tables; the kinds take turns at going first from run to run, so
drift on a shared machine does not favour one. Medians of 3 runs.

Render: a carrier with 20, 500 and 5,000 items: digests.items_of (the newest 20 and the
count, one query) and digests.render (in German, on Berlin's clock), and a whole drain of the
carrier (claim, the same two, a send to a channel that renders and sends nothing, the write)
beside the drain of one plain delivery on that channel. Medians of 200 samples.

    .venv/bin/python bench/digests.py [--events N] [--readers N] [--runs N]
        [--processes 1,4] [--items 20,500,5000] [--samples N] [--database v10r_bench]

Runs in its own database (v10r_bench, or --database; dropped first) on the server DATABASE_URL
names, or on the embedded one.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import statistics
import sys
import time
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench import workers  # noqa: E402
from bench.database import BENCH_DB, environment, prepare_database, server_url  # noqa: E402
from bench.drain_throughput import CPUClock  # noqa: E402
from bench.noop import NoopChannel  # noqa: E402
from bench.report import print_table  # noqa: E402
from bench.timing import milliseconds  # noqa: E402


class RenderingNoop(NoopChannel):
    """Renders each message as a real channel would, and sends nothing."""

    name = "rendering_noop"
    renders = True


RENDERING = {RenderingNoop.name: f"bench.digests.{RenderingNoop.__qualname__}"}

# Kind → (readers' username prefix, the settings its processes run with).
KINDS = {
    "plain, no throttle": ("plain", {"NOTIFICATION_THROTTLE_LIMIT": "0"}),
    "plain, throttle counted": ("plain", {"NOTIFICATION_THROTTLE_LIMIT": "10000"}),
    "plain, default throttle (10/h)": ("plain", {}),
    # The site's defaults: a category taken as a digest is never throttled.
    "hourly digest": ("digest", {}),
}
BASELINE = "plain, no throttle"
WARM_UP = 20  # sends per process before the clock starts, to its own reader

EMPTY_SQL = (
    "TRUNCATE notifications.digest_items, notifications.throttle_counts,"
    " notifications.notification_deliveries, notifications.notifications"
)


def setup_django(url: str, extra: dict[str, str] | None = None) -> None:
    os.environ.update(environment(url))
    os.environ.update(extra or {})
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()


def make_readers(url: str, *, readers: int, processes: int) -> None:
    """The readers of each kind, with an email address, and a warm-up reader per process;
    the digest ones take the account category hourly, on UTC's clock."""
    setup_django(url)
    from django.contrib.auth import get_user_model

    from recipients.models import Cadence, DigestChoice

    users = get_user_model()
    for prefix in ("plain", "digest"):
        names = [f"{prefix}-{n:03}" for n in range(readers)]
        names += [f"warm-{prefix}-{n}" for n in range(processes)]
        made = users.objects.bulk_create(
            [users(username=name, email=f"{name}@example.com", password="!") for name in names]
        )
        if prefix == "digest":
            DigestChoice.objects.bulk_create(
                [DigestChoice(user=u, category="account", cadence=Cadence.HOURLY) for u in made]
            )


def enqueuer(url, kind, me, events, ready, start, results) -> None:
    """Send this process's share of events (every processes-th, from me) to the kind's
    readers in turn, after a warm-up; report how many, and when they began and ended."""
    prefix, extra = KINDS[kind]
    setup_django(url, extra)
    from django.contrib.auth import get_user_model

    from notifications.enqueue import send_notification

    users = get_user_model().objects
    readers = list(users.filter(username__startswith=f"{prefix}-").order_by("username"))
    warm = users.get(username=f"warm-{prefix}-{me}")

    def send(user, n: int) -> None:
        send_notification(user=user, type="welcome", params={"name": f"n{n}"}, channels=["email"])

    for n in range(WARM_UP):
        send(warm, n)
    clock = CPUClock.at_start(ready, start)
    began = time.perf_counter()
    for n in events:
        send(readers[n % len(readers)], n)
    results.put((len(events), began, time.perf_counter(), *clock.spent()))


def enqueue_run(url: str, kind: str, *, processes: int, events: int) -> tuple[float, float]:
    """Empty the tables, enqueue events from processes; return events per second, from the
    first process's start to the last one's end, and the CPU time an event cost the
    enqueuing processes and their database backends (µs; the backends' only for a server on
    this machine, else the processes' alone)."""
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(EMPTY_SQL)
    context = multiprocessing.get_context("spawn")
    ready, start, results = context.Semaphore(0), context.Event(), context.Queue()
    procs = [
        context.Process(
            target=enqueuer,
            args=(url, kind, me, range(me, events, processes), ready, start, results),
        )
        for me in range(processes)
    ]
    workers.start_all(procs, ready, what=f"{kind}: an enqueuer")
    start.set()
    finished = workers.gather(procs, results, what=f"{kind}: an enqueuer")
    sent = sum(count for count, *_ in finished)
    if sent != events:
        raise RuntimeError(f"{kind}: {sent} of {events} events enqueued")
    elapsed = max(end for _, _, end, *_ in finished) - min(began for _, began, *_ in finished)
    cpu = sum(client + (backend or 0) for *_, client, backend in finished)
    return events / elapsed, cpu / events * 1e6


def against_baseline(figures, kinds, counts, cell: str) -> list[list[str]]:
    """A row a kind, a cell a process count: the median of its runs' figures and its ratio to
    the plain baseline's with as many processes, written by the format string cell."""
    rows = []
    for kind in kinds:
        cells = [kind]
        for processes in counts:
            figure = statistics.median(figures[(kind, processes)])
            base = statistics.median(figures[(BASELINE, processes)])
            cells.append(cell.format(figure=figure, ratio=figure / base))
        rows.append(cells)
    return rows


def median_ms(run, samples: int) -> float:
    return statistics.median(milliseconds(run, samples, warmups=3))


# Items for a carrier, written straight in SQL: size welcome notifications of its reader,
# a second apart, each joined to it.
ITEMS_SQL = """
WITH made AS (
    INSERT INTO notifications.notifications
        (id, user_id, type, message_key, message_params, action_url, created_at)
    SELECT gen_random_uuid(), %(user)s, 'welcome', 'welcome',
           jsonb_build_object('name', 'Gast ' || n), '', now() - n * interval '1 second'
    FROM generate_series(1, %(size)s) AS n
    RETURNING id, created_at
)
INSERT INTO notifications.digest_items (carrier_id, notification_id, joined_at)
SELECT %(carrier)s, id, created_at FROM made
"""

# The row back as it was before its drain: pending, due, never claimed.
AGAIN_SQL = """
UPDATE notifications.notification_deliveries
SET status = 'pending', attempts = 0, attempt_base = 0, next_attempt_at = now(),
    attempted_at = NULL, sent_at = NULL, provider_message_id = ''
WHERE id = %s
"""


def render_costs(url: str, *, sizes: list[int], samples: int) -> list[list[str]]:
    """Per carrier size: items_of, render, and a whole drain of it, in ms; and the drain of
    one plain delivery as the last row."""
    setup_django(url, {"NOTIFICATION_THROTTLE_LIMIT": "0"})
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    settings.DELIVERY_CHANNELS = {**settings.DELIVERY_CHANNELS, **RENDERING}
    from notifications import digests, worker
    from notifications.enqueue import send_notification
    from notifications.models import NotificationDelivery
    from recipients.models import Cadence, DigestChoice, Recipient

    with connection.cursor() as cursor:
        cursor.execute(EMPTY_SQL)
    users = get_user_model().objects

    def drain_of(delivery_id: int) -> float:
        def run() -> None:
            with connection.cursor() as cursor:
                cursor.execute(AGAIN_SQL, [delivery_id])
            report = worker.drain_once(batch_size=1)
            if report.sent != 1:
                raise RuntimeError(f"delivery {delivery_id}: the drain sent {report.sent}")

        return median_ms(run, samples)

    table = []
    for size in sizes:
        reader = users.create(username=f"render-{size}", email=f"render-{size}@example.com")
        Recipient.objects.create(user=reader, language="de", time_zone="Europe/Berlin")
        DigestChoice.objects.create(user=reader, category="account", cadence=Cadence.HOURLY)
        first = send_notification(
            user=reader, type="welcome", params={"name": "Gast 0"}, channels=[RenderingNoop.name]
        )
        carrier = first.digested[RenderingNoop.name]
        with connection.cursor() as cursor:
            cursor.execute(ITEMS_SQL, {"user": reader.pk, "size": size - 1, "carrier": carrier})
        params = NotificationDelivery.objects.get(pk=carrier).notification.message_params
        items = digests.items_of([carrier])[carrier]
        if items.total != size:
            raise RuntimeError(f"the carrier holds {items.total} items, not {size}")
        listed = median_ms(lambda carrier=carrier: digests.items_of([carrier]), samples)
        rendered = median_ms(
            lambda params=params, items=items: digests.render(
                params=params, items=items, language="de", time_zone="Europe/Berlin"
            ),
            samples,
        )
        whole = drain_of(carrier)
        table.append([f"carrier of {size:,}", f"{listed:.2f}", f"{rendered:.2f}", f"{whole:.2f}"])
    plain = users.create(username="render-plain", email="render-plain@example.com")
    alone = send_notification(
        user=plain, type="welcome", params={"name": "Gast"}, channels=[RenderingNoop.name]
    )
    [delivery] = alone.notification.deliveries.all()
    table.append(["one plain delivery", "", "", f"{drain_of(delivery.pk):.2f}"])
    return table


def number_list(text: str) -> list[int]:
    try:
        numbers = [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of numbers, as 1,4") from None
    if not numbers or min(numbers) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every number must be at least 1")
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--processes", type=number_list, default=[1, 4])
    parser.add_argument("--items", type=number_list, default=[20, 500, 5000])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument(
        "--database", default=BENCH_DB, help="the bench database's name (dropped first)"
    )
    args = parser.parse_args()
    if min(args.events, args.readers, args.runs, args.samples) < 1:
        parser.error("--events, --readers, --runs and --samples must be at least 1")

    url = server_url(args.database)
    prepare_database(url)
    context = multiprocessing.get_context("spawn")
    made = context.Process(
        target=make_readers,
        args=(url,),
        kwargs={"readers": args.readers, "processes": max(args.processes)},
    )
    made.start()
    made.join()
    if made.exitcode != 0:
        raise SystemExit("could not make the readers; see the traceback above")

    rates: dict[tuple[str, int], list[float]] = {}
    costs: dict[tuple[str, int], list[float]] = {}
    kinds = list(KINDS)
    for run in range(args.runs):
        for processes in args.processes:
            for kind in kinds if run % 2 == 0 else reversed(kinds):
                rate, cpu = enqueue_run(url, kind, processes=processes, events=args.events)
                rates.setdefault((kind, processes), []).append(rate)
                costs.setdefault((kind, processes), []).append(cpu)
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr)

    print(
        f"\nEnqueue, {args.events:,} welcome events on email for {args.readers} readers,"
        f" events per second, medians of {args.runs} (× the plain baseline of the same"
        " processes)\n"
    )
    header = ["kind"] + [f"{p} process{'es' if p > 1 else ''}" for p in args.processes]
    print_table(
        header,
        against_baseline(rates, kinds, args.processes, "{figure:,.0f}/s ({ratio:.2f}×)"),
    )
    # What an event cost in CPU time moves far less with whatever else the machine runs.
    print(
        "\nCPU time an event cost, µs, the enqueuing processes and their database backends"
        " (× the plain baseline)\n"
    )
    print_table(
        header, against_baseline(costs, kinds, args.processes, "{figure:,.0f} ({ratio:.2f}×)")
    )

    # In a process of its own: Django is set up for it with the rendering channel added.
    results = context.Queue()
    costs = context.Process(
        target=_render_into,
        args=(url, results),
        kwargs={"sizes": args.items, "samples": args.samples},
    )
    costs.start()
    while True:
        try:
            table = results.get(timeout=1)
            break
        except queue.Empty:
            if costs.exitcode not in (None, 0):
                raise SystemExit("the render benchmark failed; see the traceback above") from None
    costs.join()
    print(f"\nA carrier's cost to the drain, ms, medians of {args.samples}\n")
    print_table(["", "items_of", "render", "drain_once (claim to write)"], table)


def _render_into(url: str, results, **options) -> None:
    results.put(render_costs(url, **options))


if __name__ == "__main__":
    main()
