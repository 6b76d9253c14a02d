"""Shared fixtures: the whole suite runs on real PostgreSQL with the real settings.

pytest-django creates the test database on whatever DATABASES points at: the machine's
PostgreSQL in CI (DATABASE_URL), the embedded server otherwise.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.fixture(scope="session")
def collected_static():
    """Run collectstatic once, as a deploy does: with DEBUG off, `{% static %}` and
    staticfiles_storage.url() refuse a name the manifest lacks.

    Requested by what renders pages (the test clients below, the browser and deploy servers,
    and the tests that build their own Client or call the storage), not by every test: a
    session of pure tests has no page to render and skips the seconds it takes."""
    call_command("collectstatic", interactive=False, clear=True, verbosity=0)


@pytest.fixture(scope="session", autouse=True)
def static_before_the_first_test(request):
    """Collect at the start of any session that has a test needing it, before its first
    test, as every session did when this was autouse: a run's results do not depend on
    which of its tests asks first."""
    if any("collected_static" in item.fixturenames for item in request.session.items):
        request.getfixturevalue("collected_static")


@pytest.fixture
def client(client, collected_static):
    """pytest-django's test client, with the static manifest its pages render from."""
    return client


@pytest.fixture
def admin_client(admin_client, collected_static):
    """pytest-django's logged-in superuser client, with the static manifest."""
    return admin_client


@pytest.fixture(autouse=True)
def default_language():
    """Start every test in English: a request to /ru/ leaves Russian active in its thread, and
    code a later test calls outside a request would speak it."""
    from django.utils import translation

    translation.activate("en")
    yield
    translation.activate("en")


@pytest.fixture(autouse=True)
def quick_hashes(request, settings):
    """MD5 passwords for every test: the site's PBKDF2 costs a few hundred milliseconds a
    hash, which the admin's tests paid for each superuser they made and each sign-in, and
    none of them is about the hash (the hasher is Django's, tested by Django). A test that
    is about it says so with @pytest.mark.real_password_hasher. Processes a test starts
    (drains, gunicorn) keep the site's hashers: none of them checks a password."""
    if request.node.get_closest_marker("real_password_hasher") is None:
        settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def rebuilt_channels():
    """A function that builds the channels afresh from the settings as the test has set them
    (transports caches each one, built once, by class path): call it after changing a
    setting a channel is built from. After the test they are closed and forgotten, so the
    next test's are built from its own settings."""
    import transports

    def rebuild() -> None:
        for channel in transports.configured().values():
            channel.close()
        transports._load.cache_clear()

    rebuild()
    yield rebuild
    rebuild()


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
