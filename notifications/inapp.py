"""The in-app channel: "sent" means the notification is in its recipient's inbox.

A send is one UPDATE that stamps inbox_at on the database clock, and only where it is still
empty: a send repeated after a drain died mid-way (the row reaped and claimed again) finds it
stamped and changes nothing, so the inbox keeps the first moment and one copy. A digest's
carrier puts its items in the inbox, each as itself, rather than a summary of them: the inbox
lists notifications, and a digest only decides when they arrive.

Nothing is rendered here: the inbox renders each notification in the language of the page
that shows it (notifications/inbox.py).
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils.translation import gettext_lazy as _

from notifications.models import INAPP
from transports.base import AddressSource, Channel, Outgoing, QuietHours, SendResult

# The notification of one delivery.
SHOW_SQL = """
UPDATE notifications.notifications SET inbox_at = now()
WHERE inbox_at IS NULL
  AND id = (SELECT notification_id FROM notifications.notification_deliveries WHERE id = %s)
"""
# The items of one digest carrier.
SHOW_ITEMS_SQL = """
UPDATE notifications.notifications SET inbox_at = now()
WHERE inbox_at IS NULL
  AND id IN (SELECT notification_id FROM notifications.digest_items WHERE carrier_id = %s)
"""


class InAppChannel(Channel):
    name = INAPP
    label = _("Inbox on this site")
    address_source = AddressSource.ACCOUNT
    # Nothing buzzes: the inbox waits to be opened.
    quiet_hours = QuietHours.NEVER
    renders = False
    # One statement on the drain's own connection, on this machine's database.
    local = True

    @property
    def worst_case(self) -> timedelta:
        # An UPDATE of one row by its key, or of a digest's items (at most a window's worth).
        return timedelta(seconds=5)

    def send(self, outgoing: Outgoing) -> SendResult:
        statement = SHOW_ITEMS_SQL if outgoing.digest else SHOW_SQL
        with connection.cursor() as cursor:
            cursor.execute(statement, [outgoing.delivery_id])
        return SendResult(provider_message_id=f"inbox-{outgoing.delivery_id}")
