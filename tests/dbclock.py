"""Moving the database's clock in a test, instead of waiting for it.

The queue's statements read the time as unqualified now(). PostgreSQL looks an unqualified
function up along search_path, and pg_catalog (where the real now() lives) is searched first
only when search_path does not name it; named after a schema of our own, it comes second, and
that schema's now() answers instead. Column defaults are not affected: they were bound to
pg_catalog.now() when the table was made.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime

from django.db import connections

SCHEMA = "v10r_test_clock"
# The instant the clock shows, as a custom setting of the session.
SETTING = "v10r_test.now"


@contextmanager
def database_clock_at(when: datetime, using: str = "default"):
    """Inside the block, now() on Django's connection (using) says when (an aware datetime).
    Blocks nest: leaving one puts back the clock of the block around it."""
    if when.utcoffset() is None:
        raise ValueError("database_clock_at needs an aware datetime.")
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        cursor.execute(
            f"CREATE OR REPLACE FUNCTION {SCHEMA}.now() RETURNS timestamptz LANGUAGE sql STABLE"
            f" AS $$ SELECT current_setting('{SETTING}')::timestamptz $$"
        )
        cursor.execute(
            "SELECT current_setting('search_path'), current_setting(%s, true)", [SETTING]
        )
        path_before, when_before = cursor.fetchone()
        path = (
            path_before
            if path_before.startswith(SCHEMA)
            else f"{SCHEMA}, pg_catalog, {path_before}"
        )
        cursor.execute(
            "SELECT set_config('search_path', %s, false), set_config(%s, %s, false)",
            [path, SETTING, when.isoformat()],
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('search_path', %s, false), set_config(%s, %s, false)",
                [path_before, SETTING, when_before or ""],
            )
