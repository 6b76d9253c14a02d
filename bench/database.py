"""The benchmarks' own database, v10r_bench, on DATABASE_URL's server or the embedded one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent

BENCH_DB = "v10r_bench"


def server_url(name: str = BENCH_DB) -> str:
    """Return a URL of the server to benchmark on, with the bench database's name."""
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        from v10r import embedded_postgresql

        socket_dir = embedded_postgresql.ensure_running(
            embedded_postgresql.pgdata_from_environment()
        )
        url = f"postgres://postgres@{quote(str(socket_dir), safe='')}/postgres"
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def prepare_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/") or BENCH_DB
    with psycopg.connect(url, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    migrate(url)


def migrate(url: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=BASE_DIR,
        env=environment(url),
        check=True,
    )


def environment(url: str) -> dict[str, str]:
    env = os.environ.copy()
    env["DATABASE_URL"] = url
    env.setdefault("DJANGO_SECRET_KEY", "benchmark-only-secret-key-0123456789-abcdefghij")
    env.pop("DJANGO_DEBUG", None)  # DEBUG would record every query and slow the loop
    return env
