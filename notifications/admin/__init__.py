"""The staff console for the outbox, by job: list machinery (lists.py), the read-only
notification and delivery lists (deliveries.py), a digest's items on its page
(digest_items.py), Needs attention with its Retry (retry.py), scheduled sends' Send now and
Cancel (schedule.py), and broadcasts with their progress and Cancel (broadcasts.py).
Importing the package registers them all with the admin site. Recipients' settings and
addresses are the recipients app's (recipients/admin/)."""

from notifications.admin import broadcasts, deliveries, retry  # noqa: F401 - registers them
