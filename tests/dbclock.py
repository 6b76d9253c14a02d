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


# The running clock's schema, apart from the set clock's above: each block writes its own
# now(), and one must not overwrite the other's while it runs.
RUNNING_SCHEMA = "v10r_test_running_clock"
# The real instant the running clock starts from, and how many times faster it runs.
BASE_SETTING = "v10r_test.base"
SPEED_SETTING = "v10r_test.speed"


@contextmanager
def database_clock_running(speed: float, using: str = "default"):
    """Inside the block, now() runs speed times as fast as the real clock, from the instant
    the block starts (which it yields), for every connection to the database: Django's, and
    each one that opens meanwhile, from any process (a drain_outbox, a script). New
    connections take the clock from the database's own settings (ALTER DATABASE … SET), which
    the block puts back as it leaves.

    now() is still the start of the transaction, only moved: base + (real now() − base) ×
    speed. The running clock is never behind the real one, so rows a column default dated by
    the real clock (created_at, a delivery's next_attempt_at) are as due as they would be."""
    if speed < 1:
        raise ValueError("database_clock_running needs a speed of 1 or more.")
    connection = connections[using]
    base_value = f"current_setting('{BASE_SETTING}')::timestamptz"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SCHEMA IF NOT EXISTS {RUNNING_SCHEMA}")
        cursor.execute(
            f"CREATE OR REPLACE FUNCTION {RUNNING_SCHEMA}.now() RETURNS timestamptz"
            f" LANGUAGE sql STABLE AS $$ SELECT {base_value} + (pg_catalog.now() - {base_value})"
            f" * current_setting('{SPEED_SETTING}')::float8 $$"
        )
        cursor.execute(
            "SELECT current_database(), clock_timestamp(), current_setting('search_path'),"
            " current_setting(%s, true), current_setting(%s, true)",
            [BASE_SETTING, SPEED_SETTING],
        )
        database, base, path_before, base_before, speed_before = cursor.fetchone()
        path = f"{RUNNING_SCHEMA}, pg_catalog, {path_before}"
        name = connection.ops.quote_name(database)
        # ALTER DATABASE takes no parameters: the values are quoted as literals here.
        cursor.execute(f"ALTER DATABASE {name} SET search_path TO {path}")
        for setting, value in ((BASE_SETTING, base.isoformat()), (SPEED_SETTING, repr(speed))):
            cursor.execute("SELECT quote_literal(%s)", [value])
            cursor.execute(f"ALTER DATABASE {name} SET {setting} = {cursor.fetchone()[0]}")
        cursor.execute(
            "SELECT set_config('search_path', %s, false), set_config(%s, %s, false),"
            " set_config(%s, %s, false)",
            [path, BASE_SETTING, base.isoformat(), SPEED_SETTING, repr(speed)],
        )
    try:
        yield base
    finally:
        with connection.cursor() as cursor:
            for setting in ("search_path", BASE_SETTING, SPEED_SETTING):
                cursor.execute(f"ALTER DATABASE {name} RESET {setting}")
            cursor.execute(
                "SELECT set_config('search_path', %s, false), set_config(%s, %s, false),"
                " set_config(%s, %s, false)",
                [path_before, BASE_SETTING, base_before or "", SPEED_SETTING, speed_before or ""],
            )
