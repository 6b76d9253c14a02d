"""Waking the drains when a delivery is committed, instead of letting it wait for a poll.

The enqueuing side asks for a wake-up after its transaction commits (request_wake, from
transaction.on_commit): never inside it, because NOTIFY takes a lock at commit that every
notifying transaction in the cluster queues behind.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)

# The PostgreSQL notification channel the drains LISTEN on.
CHANNEL = "v10r_outbox"


def request_wake() -> None:
    """Tell listening drains that deliveries were committed. A lost wake-up costs one poll
    interval, never a row, so a failure here is logged and swallowed."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [CHANNEL])
    except DatabaseError:
        logger.warning("could not wake the drains; they will find the rows on their next poll")
