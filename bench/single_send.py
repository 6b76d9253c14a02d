"""One send_notification against the two INSERTs it writes, side by side in one run.

Per send, in turns within each round (a bare loop, then the sends to recipients without
stored choices, then the sends to recipients with some), each in its own transaction:

- bare: two INSERTs through Django's cursor, a notification and its email delivery;
- plain: send_notification(user=…, type="welcome", params=…, channels=["email"]) to a
  recipient with an email address and no stored preferences, with the site's throttle off
  (NOTIFICATION_THROTTLE_LIMIT=0), so it writes the same two rows;
- with choices: the same to a recipient with a settings row and stored choices.

Each prints wall time, this process's CPU (time.process_time, its wake-up thread's
included) and its database backends' (utime + stime from /proc of every backend on the
bench database, pg_stat_activity's pids: the worker's own connection and its wake-up
thread's; a server on this machine), per send, and the ratio of a send's total CPU to the
bare loop's in the same round. Medians over the rounds.

--against PATH runs the same turns on a second checkout's code (the tree before a change)
in the same rounds, the two trees alternating which goes first, both on the same database:

    .venv/bin/python bench/single_send.py [--sends N] [--rounds N] [--against PATH]
        [--database v10r_bench]

Runs in its own database (v10r_bench, or --database; dropped first) on the server
DATABASE_URL names, or on the embedded one. Each round runs in a fresh process per tree.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
if __name__ == "__main__":
    sys.path.insert(0, str(BASE_DIR))

WARM_UP = 50  # sends of each kind before a round's clock starts
READERS = 50  # recipients of each kind, taken in turn
KINDS = ("bare", "plain", "with choices")

# The same two rows send_notification writes for a welcome on email, and nothing else.
BARE_NOTIFICATION_SQL = """
INSERT INTO notifications.notifications
    (id, user_id, type, message_key, message_params, action_url, cancel_key, created_at)
VALUES (gen_random_uuid(), %(user)s, 'welcome', 'welcome', %(params)s::jsonb, '', '', now())
RETURNING id
"""
BARE_DELIVERY_SQL = """
INSERT INTO notifications.notification_deliveries
    (notification_id, channel, lane, status, skip_reason, next_attempt_at, decided_version)
VALUES (%(notification)s, 'email', 'normal', 'pending', '', now(), 0)
"""

EMPTY_SQL = "TRUNCATE notifications.notification_deliveries, notifications.notifications CASCADE"


def checkout(text: str) -> Path:
    path = Path(text).resolve()
    if not (path / "notifications" / "enqueue.py").is_file():
        raise argparse.ArgumentTypeError(f"{path} is not a v10r checkout (no notifications/)")
    return path


def setup_django(url: str, tree: Path) -> None:
    from bench.database import environment

    os.environ.update(environment(url))
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    # No throttle: the same two rows as the bare loop, not a third counting the send.
    os.environ["NOTIFICATION_THROTTLE_LIMIT"] = "0"
    # The tree's own packages, not this one's: its enqueue is the one measured.
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    import django

    django.setup()


def make_readers(url: str) -> None:
    """READERS plain recipients (an email, nothing stored) and READERS with choices (a
    settings row in Berlin, the account category turned on for webhooks)."""
    setup_django(url, BASE_DIR)
    from django.contrib.auth import get_user_model

    from recipients import preferences
    from recipients.models import Recipient

    users = get_user_model()
    for prefix in ("plain", "choices"):
        made = users.objects.bulk_create(
            [
                users(username=f"{prefix}-{n:03}", email=f"{prefix}{n}@example.com", password="!")
                for n in range(READERS)
            ]
        )
        if prefix == "choices":
            for user in made:
                Recipient.objects.create(user=user, time_zone="Europe/Berlin")
                # Not the category's default (webhook off), so it is a stored choice.
                preferences.choose(user, choices={("account", "webhook"): True})


def backend_cpu(pid: int) -> float:
    # utime and stime, the 14th and 15th fields, after the ")" that ends the name.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# Every backend on the bench database: the worker's own and the one its wake-up thread
# (notifications/wakeup.py) opens to NOTIFY the drains after each commit, a cost of a send the
# bare loop does not have.
BACKENDS_SQL = "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"


def backends_cpu(cursor) -> dict[int, float]:
    cursor.execute(BACKENDS_SQL)
    found = {}
    for (pid,) in cursor.fetchall():
        try:
            found[pid] = backend_cpu(pid)
        except OSError:
            continue  # gone since
    return found


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    # A backend that started meanwhile counts from its start.
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def worker(url: str, tree: Path, sends: int) -> dict[str, list[float]]:
    """In this process, on tree's code: the three kinds in turn, sends each after a warm-up;
    per kind, (wall, process CPU, backend CPU) per send in ms."""
    setup_django(url, tree)
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from notifications.enqueue import send_notification

    users = get_user_model().objects
    plain = list(users.filter(username__startswith="plain-").order_by("username"))
    chose = list(users.filter(username__startswith="choices-").order_by("username"))
    with connection.cursor() as cursor:
        cursor.execute(EMPTY_SQL)

    def bare(n: int) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            params = json.dumps({"name": f"n{n}"})
            cursor.execute(BARE_NOTIFICATION_SQL, {"user": plain[n % READERS].pk, "params": params})
            (notification,) = cursor.fetchone()
            cursor.execute(BARE_DELIVERY_SQL, {"notification": notification})

    def sender(readers):
        def send(n: int) -> None:
            with transaction.atomic():
                send_notification(
                    user=readers[n % READERS],
                    type="welcome",
                    params={"name": f"n{n}"},
                    channels=["email"],
                )

        return send

    runs = {"bare": bare, "plain": sender(plain), "with choices": sender(chose)}
    for run in runs.values():
        for n in range(WARM_UP):
            run(n)
    figures = {}
    for kind, run in runs.items():
        with connection.cursor() as cursor:
            backends = backends_cpu(cursor)
        wall, cpu = time.perf_counter(), time.process_time()
        for n in range(sends):
            run(n)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        with connection.cursor() as cursor:
            backend = spent(backends, backends_cpu(cursor))
        figures[kind] = [wall / sends * 1000, cpu / sends * 1000, backend / sends * 1000]
    return figures


def round_on(url: str, tree: Path, sends: int) -> dict[str, list[float]]:
    """One round on tree's code, in a fresh process."""
    command = [sys.executable, __file__, "--worker", str(tree), "--sends", str(sends)]
    done = subprocess.run(
        command, cwd=BASE_DIR, env=os.environ | {"BENCH_URL": url}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"a round on {tree} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    from bench.arguments import positive

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=positive, default=2000, help="sends of each kind a round")
    parser.add_argument("--rounds", type=positive, default=5, help="rounds (medians over them)")
    parser.add_argument("--against", type=checkout, help="a second checkout to measure beside")
    parser.add_argument("--database", default=None, help="the bench database's name")
    parser.add_argument("--worker", type=checkout, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(os.environ["BENCH_URL"], args.worker, args.sends)))
        return

    from bench.database import BENCH_DB, prepare_database, server_url
    from bench.report import print_table

    url = server_url(args.database or BENCH_DB)
    prepare_database(url)
    readers = [sys.executable, __file__, "--readers"]
    subprocess.run(readers, env=os.environ | {"BENCH_URL": url}, check=True)
    trees = {"this tree": BASE_DIR}
    if args.against is not None:
        trees = {f"before ({args.against.name})": args.against, **trees}
    figures: dict[tuple[str, str], list[list[float]]] = {}
    for turn in range(args.rounds):
        order = list(trees.items())
        if turn % 2:
            order.reverse()
        for name, tree in order:
            for kind, values in round_on(url, tree, args.sends).items():
                figures.setdefault((name, kind), []).append(values)
        print(f"round {turn + 1} of {args.rounds} done", file=sys.stderr)

    print(f"\n{args.sends} sends of each kind a round, medians of {args.rounds} rounds, ms a send")
    rows = []
    for name in trees:
        bare = [sum(v[1:]) for v in figures[(name, "bare")]]
        for kind in KINDS:
            runs = figures[(name, kind)]
            cells = [statistics.median(v[i] for v in runs) for i in range(3)]
            ratios = [sum(v[1:]) / b for v, b in zip(runs, bare, strict=True)]
            rows.append(
                [
                    name,
                    kind,
                    f"{cells[0]:.3f}",
                    f"{cells[1]:.3f}",
                    f"{cells[2]:.3f}",
                    f"{cells[1] + cells[2]:.3f}",
                    f"{statistics.median(ratios):.2f}× ({min(ratios):.2f} – {max(ratios):.2f})",
                ]
            )
    header = ["tree", "kind", "wall", "process CPU", "backend CPU", "CPU", "CPU / bare"]
    print_table(header, rows)


if __name__ == "__main__":
    if sys.argv[1:] == ["--readers"]:
        make_readers(os.environ["BENCH_URL"])
    else:
        main()
