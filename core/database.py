"""What every app's raw SQL and models share about the database."""

from __future__ import annotations

from django.db import models


class DatabaseNow(models.Func):
    """PostgreSQL's now(): the database clock, as the outbox's raw SQL reads it.

    Django's Now() is statement_timestamp(); the queue's statements use now() (the start of
    the transaction), and a row's defaults must agree with them, or a row enqueued and
    claimed inside one transaction would look due in the future.
    """

    template = "now()"
    output_field = models.DateTimeField()
