"""The production pair, gunicorn behind nginx, started from the files in deploy/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from tests.deploy.servers import ALLOWED_HOSTS, Gunicorn, Nginx
from tests.helpers import database_url, require

SECRET_KEY = "deploy-test-secret-key-not-for-production-0123456789-abcdefghij"

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items) -> None:
    """Mark every test in this folder `deploy`, so `-m "not deploy"` leaves them out without
    each file having to say so. The hook sees the whole session's items, hence the path."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.deploy)


def require_nginx() -> None:
    require("nginx", install="apt-get install nginx")


@pytest.fixture
def nginx_installed() -> None:
    require_nginx()


@pytest.fixture(scope="module")
def production_env(django_db_setup, collected_static) -> dict[str, str]:
    """The environment of a production web process, on the test database.

    Nothing of the test run's own DJANGO_ or GUNICORN_ settings leaks in: only what an
    operator would set."""
    inherited = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "GUNICORN_", "DELIVERY_", "EMAIL_"))
        and name not in {"WEB_CONCURRENCY", "FORWARDED_ALLOW_IPS", "PORT", "V10R_TRUSTED_PROXIES"}
    }
    return inherited | {
        "DJANGO_SECRET_KEY": SECRET_KEY,
        "DJANGO_DEBUG": "0",
        "DATABASE_URL": database_url(),
        # The tests speak plain HTTP to nginx on loopback.
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_ALLOWED_HOSTS": ALLOWED_HOSTS,
        "DJANGO_STATIC_ROOT": str(settings.STATIC_ROOT),
        # nginx is the one proxy in front of the app.
        "V10R_TRUSTED_PROXIES": "1",
    }


@pytest.fixture(scope="module")
def gunicorn(production_env):
    """gunicorn with deploy/gunicorn.conf.py; shared by a module's tests, each of which
    puts an nginx of its own in front of it."""
    require_nginx()  # every test that needs this one needs nginx too: skip before booting
    server = Gunicorn(production_env)
    yield server
    server.stop()


@pytest.fixture
def nginx(gunicorn):
    """A factory: nginx from deploy/nginx.conf in front of the gunicorn fixture, with
    placeholder values overriding the production defaults. Stopped after the test."""
    started: list[Nginx] = []

    def start(**values: str) -> Nginx:
        server = Nginx(gunicorn.port, **values)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def bare_gunicorn(production_env):
    """`gunicorn v10r.wsgi` as the README's production command ran it: two sync workers."""
    server = Gunicorn(production_env, config=False, workers=2)
    yield server
    server.stop()
