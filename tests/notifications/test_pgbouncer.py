"""The queue through PgBouncer in transaction pooling: nothing may be session-scoped."""

from __future__ import annotations

from django.db import connection

from notifications.models import NotificationDelivery, Status
from tests.helpers import counts, make_deliveries, poll, start_drain, stop


def test_three_drain_processes_share_two_server_connections_and_send_each_row_once(
    pgbouncer, user, smtp_server
):
    ids = make_deliveries(user, 600, channel="email")
    url = pgbouncer.url(connection.settings_dict["NAME"])
    processes = [
        start_drain("--batch-size", "20", url=url, smtp_port=smtp_server.port) for _ in range(3)
    ]
    try:
        done = poll(lambda: counts() == {Status.SENT: 600}, seconds=120, every=0.5)
    finally:
        results = [stop(p) for p in processes]
    assert done, counts()
    assert [code for code, _ in results] == [0, 0, 0], results
    assert set(NotificationDelivery.objects.values_list("attempts", flat=True)) == {1}
    received = smtp_server.mailbox.message_ids()
    assert len(received) == len(ids)
    assert set(received.values()) == {1}
