"""The project's settings plus django-post-office, for bench/email_throughput.py only.

Nothing of post_office's needs changing for Django 6.1: with MAILERS defined (as
v10r/settings.py does), post_office sends through mailers["default"], the same SMTP mailer
(EMAIL_HOST, EMAIL_PORT, EMAIL_TIMEOUT) the email channel uses, so both sides of the
benchmark reach the same server by the same settings. DATABASE_URL names the database, as
for the project; the benchmark gives this side one of its own.
"""

from __future__ import annotations

from v10r import settings as project

# Every setting of the project's, by name: a copy rather than a star import, so the one
# addition below reads as what it is.
globals().update({name: value for name, value in vars(project).items() if name.isupper()})

INSTALLED_APPS = [*project.INSTALLED_APPS, "post_office"]

POST_OFFICE = {
    # A Message-ID per queued row, stored on it, so the benchmark can tell each message the
    # SMTP server received from a duplicate (the email channel's are per delivery already).
    # Everything else stays at post_office's defaults: batches of 100, 5 sender threads per
    # process, a log row per sent email.
    "MESSAGE_ID_ENABLED": True,
}
