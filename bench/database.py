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
SECRET_KEY = "benchmark-only-secret-key-0123456789-abcdefghij"


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
    env.setdefault("DJANGO_SECRET_KEY", SECRET_KEY)
    env.pop("DJANGO_DEBUG", None)  # DEBUG would record every query and slow the loop
    return env


def keep_database(url: str) -> None:
    """Create url's database if it is missing (it is kept between runs), and migrate it."""
    name = urlsplit(url).path.lstrip("/") or BENCH_DB
    with psycopg.connect(url, dbname="postgres", autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if exists.fetchone() is None:
            admin.execute(f'CREATE DATABASE "{name}"')
    migrate(url)


def web_environment(url: str, **settings: str) -> dict[str, str]:
    """The environment of a web process serving on loopback without TLS, with settings."""
    env = {k: v for k, v in environment(url).items() if not k.startswith("GUNICORN_")}
    return env | {
        "DJANGO_DEBUG": "0",
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "V10R_TRUSTED_PROXIES": "1",
        **settings,
    }


def set_up_django_settings() -> None:
    """Set Django up in this process with the project's settings and no database: for work
    that reads settings and runs no query."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "v10r.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", SECRET_KEY)
    import django

    django.setup()


def set_up_django(url: str) -> None:
    """Set Django up in this process on url's database for its test client (host testserver,
    no TLS redirect), with the static files collected: pages name their scripts through the
    static manifest, as in production."""
    os.environ.update(environment(url))
    os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver"
    os.environ["DJANGO_SECURE_SSL_REDIRECT"] = "0"
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("collectstatic", interactive=False, verbosity=0)


def admin_client():
    """A Django test client logged in as bench-admin, a superuser made on first use. Call it
    once Django is set up."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    admin, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(admin)
    return client


def start_drain(env: dict[str, str], *options: str) -> subprocess.Popen:
    """Start `manage.py drain_outbox` with options under env, its output discarded."""
    command = [sys.executable, "manage.py", "drain_outbox", *options]
    quiet = subprocess.DEVNULL
    return subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=quiet, stderr=quiet)
