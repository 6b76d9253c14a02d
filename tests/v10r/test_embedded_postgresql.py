"""With DATABASE_URL unset, the site starts its own PostgreSQL from nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psycopg
import pytest

from tests.helpers import python
from v10r import embedded_postgresql

BASE_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def pgdata(tmp_path):
    folder = tmp_path / "pgdata"
    yield folder
    embedded_postgresql.stop(folder)


def run(*args: str, pgdata: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return python(*args, env=env | {"DJANGO_DEBUG": "1", "V10R_PGDATA": str(pgdata)})


def test_migrate_starts_a_server_from_nothing_and_later_processes_share_it(pgdata):
    assert not pgdata.exists()

    migrated = run("manage.py", "migrate", "--noinput", pgdata=pgdata)
    assert migrated.returncode == 0, migrated.stderr
    socket_dir = embedded_postgresql.running_socket_dir(pgdata)
    assert socket_dir is not None

    # A second process finds the same server and the tables the first one made.
    counted = run(
        "manage.py",
        "shell",
        "-c",
        "from django.db import connection; c = connection.cursor(); "
        "c.execute('SELECT count(*) FROM django_migrations'); print(c.fetchone()[0])",
        pgdata=pgdata,
    )
    assert counted.returncode == 0, counted.stderr
    assert int(counted.stdout.split()[-1]) > 10

    with psycopg.connect(host=str(socket_dir), user="postgres", dbname="v10r") as connection:
        version = connection.execute("SHOW server_version_num").fetchone()[0]
    assert int(version) >= 150000

    stopped = run("-m", "v10r.embedded_postgresql", "stop", pgdata=pgdata)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped" in stopped.stdout
    assert embedded_postgresql.running_socket_dir(pgdata) is None


def test_a_server_that_cannot_start_says_why_and_how_to_use_database_url(tmp_path):
    # A file where the data folder should be: initdb cannot create anything inside it.
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    result = run("manage.py", "migrate", "--noinput", pgdata=blocked / "pgdata")
    assert result.returncode != 0
    assert "Could not start the embedded PostgreSQL" in result.stderr
    assert "DATABASE_URL=postgres://" in result.stderr
