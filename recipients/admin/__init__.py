"""The staff console for recipients: their settings and choices (preferences.py), and their
channel addresses with webhook secrets, the channels' health and Probe (addresses.py), and
audiences with their members and Import CSV (audiences.py).
Importing the package registers them with the admin site."""

from recipients.admin import addresses, audiences, preferences  # noqa: F401 - registers them
