"""The staff console for the outbox, by job: list machinery (lists.py), the read-only
notification and delivery lists (deliveries.py), and Needs attention with its Retry
(retry.py). Importing the package registers them all with the admin site."""

from notifications.admin import deliveries, retry  # noqa: F401 - registers the ModelAdmins
