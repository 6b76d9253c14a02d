"""Shared fixtures: the whole suite runs on real PostgreSQL with the real settings.

pytest-django creates the test database on whatever DATABASES points at: the machine's
PostgreSQL in CI (DATABASE_URL), the embedded server otherwise.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.fixture(scope="session", autouse=True)
def collected_static(django_db_blocker):
    """Run collectstatic once, as a deploy does: templates need the manifest with DEBUG off."""
    call_command("collectstatic", interactive=False, clear=True, verbosity=0)


@pytest.fixture(autouse=True)
def default_language():
    """Start every test in English: a request to /ru/ leaves Russian active in its thread, and
    code a later test calls outside a request would speak it."""
    from django.utils import translation

    translation.activate("en")
    yield
    translation.activate("en")


@pytest.fixture
def smtp_server():
    """An SMTP server (aiosmtpd) on a free loopback port."""
    from tests.smtp import SMTPServer

    server = SMTPServer()
    yield server
    server.stop()


@pytest.fixture
def pgbouncer(transactional_db):
    """PgBouncer (transaction pooling, 2 server connections) in front of the test database."""
    from django.db import connection

    from tests.helpers import require
    from tests.pgbouncer import PgBouncer

    require("pgbouncer", install="apt-get install pgbouncer")
    params = connection.get_connection_params()
    bouncer = PgBouncer(host=params.get("host") or "127.0.0.1", port=params.get("port"))
    yield bouncer
    bouncer.stop()
