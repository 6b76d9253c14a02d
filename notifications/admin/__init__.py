"""The staff console for the outbox, by job: list machinery (lists.py), the read-only
notification and delivery lists (deliveries.py), a digest's items on its page
(digest_items.py), Needs attention with its Retry (retry.py), scheduled sends' Send now and
Cancel (schedule.py), recipients' settings (preferences.py), and users' channel addresses
with webhook secrets (addresses.py). Importing the package
registers them all with the admin site."""

from notifications.admin import addresses, deliveries, preferences, retry  # noqa: F401 - registers them
