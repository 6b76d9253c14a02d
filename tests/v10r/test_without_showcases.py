"""A site without the showcase (V10R_SHOWCASES=0, which leaves `showcases` out of
INSTALLED_APPS, and its channel and lane out of the settings): the queue's core names no demo,
so such a site passes `manage.py check`, migrates a fresh database of its own, and queues and
drains a welcome email, each in a process of its own, as an operator would run them."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.helpers import database_url, python

SEND_WELCOME = """
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from notifications.enqueue import send_notification
from recipients import catalogue

assert not apps.is_installed("showcases")
assert "queue.demo" not in catalogue.MESSAGES and "demo" not in catalogue.CATEGORIES
ada = get_user_model().objects.create_user("ada", email="ada@example.com")
with transaction.atomic():
    send_notification(user=ada, type="welcome", params={"name": "Ada"}, channels=["email"])
client = Client(HTTP_HOST="localhost")
home, showcase = client.get("/").status_code, client.get("/showcases/workers/").status_code
print("home", home, "showcase", showcase)
"""


@pytest.fixture
def fresh_database(db):
    """An empty database beside the test database, on the same server, dropped afterwards."""
    url = urlsplit(database_url())
    name = f"{url.path.lstrip('/')}_without_showcases"
    admin = psycopg.connect(urlunsplit(url._replace(path="/postgres")), autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(url._replace(path=f"/{name}"))
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_a_site_without_the_showcase_checks_migrates_and_drains(fresh_database, smtp_server):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "EMAIL_"))}
    env.pop("V10R_CHANNELS", None)
    env |= {
        # The site's own settings, not the suite's (which add the tests' app).
        "DJANGO_SETTINGS_MODULE": "v10r.settings",
        "V10R_SHOWCASES": "0",
        "DATABASE_URL": fresh_database,
        "DJANGO_DEBUG": "1",  # pages render without a collected static manifest
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_server.port),
        "EMAIL_TIMEOUT": "5",
    }

    checked = python("manage.py", "check", env=env)
    assert checked.returncode == 0, checked.stderr
    assert "showcases" not in checked.stdout + checked.stderr

    migrated = python("manage.py", "migrate", "--noinput", env=env)
    assert migrated.returncode == 0, migrated.stderr
    with psycopg.connect(fresh_database) as conn:
        indexes = {
            name
            for (name,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'notifications'"
            )
        }
    # The engine's own indexes are there; the showcase's is not: nothing made it.
    assert "deliveries_claim" in indexes, sorted(indexes)
    assert "deliveries_demo" not in indexes

    sent = python("manage.py", "shell", "-c", SEND_WELCOME, env=env)
    assert sent.returncode == 0, sent.stderr
    assert "home 200 showcase 404" in sent.stdout

    drained = python("manage.py", "drain_outbox", "--once", env=env)
    assert drained.returncode == 0, drained.stderr
    [message] = smtp_server.mailbox.messages
    assert message["To"] == "ada@example.com"
    assert message["Subject"] == "Welcome to v10r, Ada"
