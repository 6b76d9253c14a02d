"""The password-reset form's answer time for an address with an account against one without,
through nginx and gunicorn (deploy/) on loopback.

Requests for known and unknown addresses alternate (known first in one pair, unknown first in
the next), each address asked for once, each request on a new connection from an address of its
own in 127.0.0.0/8 (so the form's limits per client and per address never refuse one). The
figures are the medians of each kind and their ratio; an attacker telling accounts apart by
the answer's time needs them apart. Then it waits until every known address's reset email is in
the outbox: the work the answer no longer waits for must still be done, every time.

    .venv/bin/python bench/reset_timing.py [--pairs 200] [--pause-ms 20]

Needs nginx (apt-get install nginx). Runs on its own database, v10r_bench_reset, on the server
DATABASE_URL names or on the embedded one.
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
from urllib.parse import urlencode, urlsplit, urlunsplit

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

import psycopg  # noqa: E402

from bench.database import keep_database, server_url, web_environment  # noqa: E402 - after sys.path
from bench.report import print_table  # noqa: E402
from tests.deploy import clients  # noqa: E402
from tests.deploy.servers import Gunicorn, Nginx, nginx_executable  # noqa: E402

DATABASE = "v10r_bench_reset"
PATH = "/account/password-reset/"
# Any 32 letters make a CSRF secret; sent as cookie and field, they pass Django's check.
CSRF_SECRET = "c" * 32
# nginx's own per-client limits out of the way; the app's are met with fresh addresses.
NGINX_VALUES = {
    "CONNECTIONS_PER_CLIENT": "1000",
    "REQUEST_RATE": "10000r/s",
    "REQUEST_BURST": "10000",
}
WARM_UP = 10


def prepare(url: str, static_root: Path, *, users: int) -> dict[str, str]:
    """Migrate the database, give it the known users and an empty outbox and limits; collect
    static files; return the web process's environment."""
    keep_database(url)
    env = web_environment(url, DJANGO_STATIC_ROOT=str(static_root))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=BASE_DIR,
        env=env,
        check=True,
    )
    script = f"""
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
User = get_user_model()
password = make_password("bench-password-0123")
have = set(User.objects.filter(username__startswith="known-").values_list("username", flat=True))
User.objects.bulk_create([
    User(username=f"known-{{i}}", email=f"known-{{i}}@example.com", password=password)
    for i in range({users}) if f"known-{{i}}" not in have
])
"""
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script], cwd=BASE_DIR, env=env, check=True
    )
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DELETE FROM v10r_rate_limit_windows")
        connection.execute("TRUNCATE notifications.notifications CASCADE")
    return env


def ask(port: int, email: str, *, source: str) -> float:
    body = urlencode({"email": email, "csrfmiddlewaretoken": CSRF_SECRET}).encode()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Cookie": f"csrftoken={CSRF_SECRET}",
    }
    response = clients.request(
        port, "POST", PATH, body=body, headers=headers, timeout=30, source=source
    )
    if response.status != 302:
        raise RuntimeError(f"POST {PATH} answered {response.status}: {response.body[:300]!r}")
    return response.seconds


def sources():
    """Loopback addresses, one for each request: 127.0.1.1, 127.0.1.2, ..."""
    n = 0
    while True:
        yield f"127.0.{1 + n // 250}.{1 + n % 250}"
        n += 1


def queued(url: str) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT count(*) FROM notifications.notifications WHERE type = 'account.password_reset'"
        ).fetchone()
    return row[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=200, help="known and unknown requests each")
    parser.add_argument(
        "--pause-ms", type=float, default=20, help="between two requests, as a prober would"
    )
    args = parser.parse_args()
    if nginx_executable() is None:
        print("nginx is not installed (apt-get install nginx)", file=sys.stderr)
        return 1
    url = urlunsplit(urlsplit(server_url())._replace(path=f"/{DATABASE}"))
    with tempfile.TemporaryDirectory(prefix="v10r-bench-static-") as static_root:
        env = prepare(url, Path(static_root), users=args.pairs)
        app = Gunicorn(env, workers=2)
        proxy = Nginx(app.port, **NGINX_VALUES)
        addresses = sources()
        try:
            for n in range(WARM_UP):
                ask(proxy.port, f"warm-{n}@example.net", source=next(addresses))
            seconds: dict[str, list[float]] = {"known": [], "unknown": []}
            for n in range(args.pairs):
                pair = [("known", f"known-{n}@example.com"), ("unknown", f"nobody-{n}@example.com")]
                for kind, email in pair if n % 2 == 0 else pair[::-1]:
                    seconds[kind].append(ask(proxy.port, email, source=next(addresses)))
                    time.sleep(args.pause_ms / 1000)
            deadline = time.monotonic() + 60
            while (found := queued(url)) < args.pairs and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            proxy.stop()
            app.stop()

    known, unknown = (statistics.median(seconds[kind]) for kind in ("known", "unknown"))
    print(
        f"POST {PATH} through nginx + gunicorn (2 processes), {args.pairs} known and "
        f"{args.pairs} unknown addresses interleaved, {args.pause_ms:g} ms apart "
        f"({os.cpu_count()} CPUs)"
    )
    rows = [
        [
            kind,
            f"{statistics.median(values) * 1000:.1f} ms",
            f"{statistics.quantiles(values, n=10)[0] * 1000:.1f} ms",
            f"{statistics.quantiles(values, n=10)[-1] * 1000:.1f} ms",
        ]
        for kind, values in seconds.items()
    ]
    print_table(["address", "median", "p10", "p90"], rows)
    print(f"median ratio known / unknown: {known / unknown:.3f}")
    print(f"reset emails queued: {found} of {args.pairs}")
    return 0 if found == args.pairs else 1


if __name__ == "__main__":
    raise SystemExit(main())
