"""Another user's pages while fifty addresses poll one account's inbox state as fast as they
can, through nginx and gunicorn (deploy/) on loopback.

The attacker has one account's session cookie and fifty addresses (127.0.2.1 to 127.0.2.50,
each a client of its own to nginx), each a keep-alive connection asking for
/account/inbox/state/ without pause, from a process of their own at nice 19. Meanwhile
another user, from an address of their own, loads pages one after the other (their inbox,
their notification settings, the home page), each on a new connection, 0.2 s apart. The
figures are that user's page times (median, p99 by nearest rank, worst) and what the
attackers' polls were answered ("429 app" for the app's refusals, "429" for nginx's): with no
attack, with the limits out of the way (nginx's cap on the state's connections at 1000 and its
polls per session at 10,000 a second, INBOX_STATE_POLLS_PER_MINUTE at its maximum), then as
deploy/ and the settings ship them. nginx's per-client limits are production's throughout.

    .venv/bin/python bench/inbox_flood.py [--attackers 50] [--seconds 30]

Needs nginx (apt-get install nginx). Runs on its own database, v10r_bench_inbox_flood, on the
server DATABASE_URL names or on the embedded one.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

import psycopg  # noqa: E402

from bench.database import keep_database, server_url, web_environment  # noqa: E402 - after sys.path
from bench.report import print_table  # noqa: E402
from tests.deploy import clients  # noqa: E402
from tests.deploy.servers import Gunicorn, Nginx, nginx_executable  # noqa: E402

DATABASE = "v10r_bench_inbox_flood"
STATE = "/account/inbox/state/"
PAGES = ["/account/inbox/", "/account/notifications/", "/"]
VICTIM_ADDRESS = "127.0.3.1"
BETWEEN_PAGES = 0.2  # seconds
# (label, nginx's values, the app's environment)
SETUPS = [
    ("no attack (for reference)", {}, {}),
    (
        "limits out of the way",
        {"INBOX_STATE_CONNECTIONS": "1000", "INBOX_STATE_SESSION_RATE": "10000r/s"},
        {"INBOX_STATE_POLLS_PER_MINUTE": "10000"},
    ),
    ("as deploy/ ships them", {}, {}),
]


def prepare(url: str, static_root: Path) -> tuple[dict[str, str], str, str]:
    """Migrate, collect static files, make the two users; return the web environment and the
    attacked account's and the other user's session keys."""
    keep_database(url)
    env = web_environment(url, DJANGO_STATIC_ROOT=str(static_root))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=BASE_DIR,
        env=env,
        check=True,
    )
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    sessions = []
    for name in ("bench-flooded", "bench-bystander"):
        user, _ = get_user_model().objects.get_or_create(username=name)
        browser = Client()
        browser.force_login(user)
        sessions.append(browser.cookies["sessionid"].value)
    from django.db import connection

    connection.close()
    return env, sessions[0], sessions[1]


def clear_limits(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DELETE FROM v10r_rate_limit_windows")


def attacker(
    port: int, source: str, session: str, stop: threading.Event, seen: collections.Counter
):
    connection = None
    headers = {"Cookie": f"sessionid={session}"}
    while not stop.is_set():
        try:
            if connection is None:
                connection = http.client.HTTPConnection(
                    clients.HOST, port, timeout=10, source_address=(source, 0)
                )
            connection.request("GET", STATE, headers=headers)
            response = connection.getresponse()
            response.read()
            # nginx's 429 is text, the app's JSON.
            by_app = response.status == 429 and "json" in (response.getheader("Content-Type") or "")
            seen[f"{response.status}{' app' if by_app else ''}"] += 1
        except (OSError, http.client.HTTPException):
            seen["error"] += 1
            if connection is not None:
                connection.close()
            connection = None
    if connection is not None:
        connection.close()


def attack(port: int, *, attackers: int, seconds: float, session: str) -> None:
    """The attackers' process: poll for seconds, then print what the polls were answered."""
    os.nice(19)
    stop = threading.Event()
    seen: collections.Counter = collections.Counter()
    threads = [
        threading.Thread(
            target=attacker, args=(port, f"127.0.2.{n + 1}", session, stop, seen), daemon=True
        )
        for n in range(attackers)
    ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(15)
    print(json.dumps(dict(seen)))


def run(port: int, *, attackers: int, seconds: float, flooded: str, bystander: str):
    """The bystander's page times, and what the attackers' polls were answered."""
    # The attackers in a process of their own at the lowest priority: on a real site their
    # CPU is their own machines', not the server's, and here they share its two cores.
    flood = None
    if attackers:
        command = [sys.executable, __file__, "--attack", str(port), "--session", flooded]
        command += ["--attackers", str(attackers), "--seconds", str(seconds + 2)]
        flood = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        time.sleep(2)  # the flood under way before the first page
    times = []
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        path = PAGES[n % len(PAGES)]
        n += 1
        response = clients.get(
            port,
            path,
            timeout=30,
            headers={"Cookie": f"sessionid={bystander}"},
            source=VICTIM_ADDRESS,
        )
        if response.status != 200:
            raise RuntimeError(f"the bystander's GET {path} answered {response.status}")
        times.append(response.seconds)
        # Within nginx's ten requests a second per client, as a person's clicks are.
        time.sleep(BETWEEN_PAGES)
    if flood is None:
        return times, {}
    output, _ = flood.communicate(timeout=60)
    return times, json.loads(output)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attackers", type=int, default=50, help="addresses polling")
    parser.add_argument("--seconds", type=float, default=30, help="per setup")
    parser.add_argument("--attack", type=int, help=argparse.SUPPRESS)  # the attackers' process
    parser.add_argument("--session", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.attack:
        attack(args.attack, attackers=args.attackers, seconds=args.seconds, session=args.session)
        return 0
    if nginx_executable() is None:
        print("nginx is not installed (apt-get install nginx)", file=sys.stderr)
        return 1
    url = urlunsplit(urlsplit(server_url())._replace(path=f"/{DATABASE}"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="v10r-bench-static-") as static_root:
        env, flooded, bystander = prepare(url, Path(static_root))
        for label, nginx_values, app_env in SETUPS:
            clear_limits(url)
            app = Gunicorn(env | app_env, workers=2)
            proxy = Nginx(app.port, **nginx_values)
            try:
                times, seen = run(
                    proxy.port,
                    attackers=0 if label.startswith("no attack") else args.attackers,
                    seconds=args.seconds,
                    flooded=flooded,
                    bystander=bystander,
                )
            finally:
                proxy.stop()
                app.stop()
            polls = sum(seen.values())
            answered = ", ".join(f"{status}: {count}" for status, count in sorted(seen.items()))
            ranked = sorted(times)
            rows.append(
                [
                    label,
                    str(len(times)),
                    f"{statistics.median(times) * 1000:.0f} ms",
                    # Nearest rank: the time 99 % of the pages took no longer than.
                    f"{ranked[math.ceil(0.99 * len(ranked)) - 1] * 1000:.0f} ms",
                    f"{ranked[-1] * 1000:.0f} ms",
                    f"{polls / (args.seconds + 2):.0f}/s ({answered})" if polls else "none",
                ]
            )
    print(
        f"Another user's pages while {args.attackers} addresses poll one account's "
        f"{STATE}, {args.seconds:g} s each, nginx + gunicorn (2 processes of 4 threads; "
        f"{os.cpu_count()} CPUs)"
    )
    print_table(["limits", "pages", "median", "p99", "worst", "attackers' polls"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
