"""DATABASE_PREPARED_STATEMENTS: on a connection straight to PostgreSQL, the drain's claim is
planned once per connection and every row is still sent; the value is checked like any other."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers import database_url, make_deliveries, python

# Drains batch after batch in one process, then reads what its own session has prepared (a
# prepared statement is visible only to the session that made it).
SCRIPT = """
import json
from django.db import connection
from notifications import worker
sent = sum(worker.drain_once().sent for _ in range(10))
with connection.cursor() as cursor:
    cursor.execute("SELECT statement FROM pg_prepared_statements")
    prepared = [row[0] for row in cursor.fetchall()]
print(json.dumps({"sent": sent, "prepared": prepared}))
"""


def drain_in_a_process(smtp_server, prepared: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "EMAIL_"))}
    env.pop("DJANGO_DEBUG", None)
    env |= {
        "DATABASE_URL": database_url(),
        "DATABASE_PREPARED_STATEMENTS": prepared,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_server.port),
        "DELIVERY_BATCH_SIZE": "4",
        "DJANGO_SECRET_KEY": "x" * 50,
    }
    done = python("manage.py", "shell", "-c", SCRIPT, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("prepared", "claims_prepared"), [("1", True), ("0", False)])
def test_a_drain_with_prepared_statements_plans_its_claim_once_and_sends_every_row(
    transactional_db, django_user_model, smtp_server, prepared, claims_prepared
):
    user = django_user_model.objects.create_user("prepared", email="prepared@example.com")
    make_deliveries(user, 30, channel="email")
    result = drain_in_a_process(smtp_server, prepared)
    assert result["sent"] == 30
    assert len(smtp_server.mailbox.messages) == 30
    claims = [s for s in result["prepared"] if "FOR UPDATE SKIP LOCKED" in s]
    assert bool(claims) is claims_prepared


def test_a_value_that_is_not_a_switch_stops_start_up():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_DEBUG"}
    env |= {"DATABASE_PREPARED_STATEMENTS": "sometimes", "DJANGO_SECRET_KEY": "x" * 50}
    done = python("manage.py", "check", env=env)
    assert done.returncode != 0
    assert "DATABASE_PREPARED_STATEMENTS" in done.stderr
