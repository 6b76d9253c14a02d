"""The staff console for the outbox, by job: list machinery (lists.py), the read-only
notification and delivery lists (deliveries.py), Needs attention with its Retry (retry.py),
and users' channel addresses with webhook secrets (addresses.py). Importing the package
registers them all with the admin site."""

from notifications.admin import addresses, deliveries, preferences, retry  # noqa: F401 - registers them
