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


@pytest.fixture
def smtp_server():
    """An SMTP server (aiosmtpd) on a free loopback port."""
    from tests.smtp import SMTPServer

    server = SMTPServer()
    yield server
    server.stop()
