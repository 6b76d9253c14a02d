from __future__ import annotations

import contextlib
from datetime import timedelta

import psycopg
import pytest
from django.db import connection

import transports as channels
from notifications.worker import Worker
from tests.notifications import channels as test_channels


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("reader", email="reader@example.com")


@pytest.fixture(autouse=True)
def registered_test_channels(settings):
    """Register the test channels beside the real ones, and reset what they remember."""
    settings.DELIVERY_CHANNELS = {
        **settings.DELIVERY_CHANNELS,
        **{c.name: f"{c.__module__}.{c.__qualname__}" for c in test_channels.ALL},
    }
    for channel in test_channels.ALL:
        channel.reset()
    yield
    test_channels.GatedChannel.gate.set()
    # Channels are made once per process; a connection one test's sender kept open must not
    # be counted in the next test's.
    with contextlib.suppress(ImportError, AttributeError):  # a test configured a bad one
        for channel in channels.configured().values():
            channel.close()
    # And forgotten: these were built from this test's settings (a webhook allowed loopback,
    # say), which the next test does not share.
    channels._load.cache_clear()


@pytest.fixture
def mail_to(settings, smtp_server):
    """Email goes to the loopback SMTP server, its links to a fixed site origin."""
    settings.MAILERS = {"default": smtp_server.mailer(timeout=5)}
    settings.SITE_ORIGIN = "https://v10r.example"
    return smtp_server


@pytest.fixture
def loop_worker():
    """A worker with a loop of its own, as drain_outbox builds: it reaps at most once a
    minute, so a test's batches reap only when the test winds its clock back."""
    worker = Worker(name="test-loop", interval=timedelta(minutes=1))
    yield worker
    worker.close()


@pytest.fixture
def cron_worker():
    """A worker without a loop, as a cron job's drain is: it reaps on every drain."""
    worker = Worker(name="test-cron", interval=timedelta(0))
    yield worker
    worker.close()


@pytest.fixture
def other_connection(transactional_db):
    """A second, independent connection to the test database (psycopg, not Django's)."""
    params = connection.get_connection_params()
    conninfo = {
        k: v for k, v in params.items() if k in {"host", "port", "user", "password", "dbname"}
    }
    with psycopg.connect(**conninfo) as other:
        yield other
