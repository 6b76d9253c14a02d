from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

import psycopg
import pytest
from django.db import connection

from notifications.models import Notification, NotificationDelivery
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


def make_deliveries(user, count: int, *, channel: str = "recording") -> list[int]:
    """Insert count due deliveries (one notification each) in two statements; return ids."""
    notifications = Notification.objects.bulk_create(
        [
            Notification(
                user=user, type="test", message_key="queue.demo", message_params={"label": f"n{i}"}
            )
            for i in range(count)
        ]
    )
    deliveries = NotificationDelivery.objects.bulk_create(
        [NotificationDelivery(notification=n, channel=channel) for n in notifications]
    )
    return [d.id for d in deliveries]


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def execute(sql: str, params=None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def database_url() -> str:
    """A DATABASE_URL for the test database, for subprocesses (drain_outbox, benchmarks)."""
    params = connection.get_connection_params()
    host = params.get("host") or "localhost"
    netloc = quote(host, safe="") if host.startswith("/") else host
    if params.get("port"):
        netloc += f":{params['port']}"
    credentials = quote(params.get("user") or "postgres", safe="")
    if params.get("password"):
        credentials += ":" + quote(params["password"], safe="")
    return f"postgres://{credentials}@{netloc}/{quote(params['dbname'], safe='')}"


@pytest.fixture
def other_connection(transactional_db):
    """A second, independent connection to the test database (psycopg, not Django's)."""
    params = connection.get_connection_params()
    conninfo = {
        k: v for k, v in params.items() if k in {"host", "port", "user", "password", "dbname"}
    }
    with psycopg.connect(**conninfo) as other:
        yield other
