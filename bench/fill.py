"""Rows for a benchmark to drain: a reader with one address on a channel, and notifications
pending for them there."""

from __future__ import annotations

import psycopg

READER_SQL = """
INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email,
                       is_staff, is_active, date_joined)
VALUES ('!', false, %(username)s, '', '', '', false, true, now())
RETURNING id
"""
ADDRESS_SQL = """
INSERT INTO notifications.channel_addresses (user_id, channel, address, is_active, created_at,
                                             deactivated_reason)
VALUES (%(user_id)s, %(channel)s, %(address)s, true, now(), '')
RETURNING id
"""
PENDING_SQL = """
WITH made AS (
    INSERT INTO notifications.notifications (id, user_id, type, message_key, message_params,
                                             action_url, created_at)
    SELECT gen_random_uuid(), %(user_id)s, 'bench', 'queue.demo', '{"label": "bench"}', '', now()
    FROM generate_series(1, %(rows)s)
    RETURNING id
)
INSERT INTO notifications.notification_deliveries (notification_id, channel)
SELECT id, %(channel)s FROM made
"""


def fill_addressed(db: psycopg.Connection, *, channel: str, address: str, rows: int) -> int:
    """A reader with one address on channel, and rows notifications pending for it there;
    returns the address's id (a webhook's secret is keyed by it)."""
    (user_id,) = db.execute(READER_SQL, {"username": f"{channel}-reader"}).fetchone()
    fields = {"user_id": user_id, "channel": channel, "address": address, "rows": rows}
    (address_id,) = db.execute(ADDRESS_SQL, fields).fetchone()
    db.execute(PENDING_SQL, fields)
    return address_id
