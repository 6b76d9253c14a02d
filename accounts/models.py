from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class PendingSignUp(models.Model):
    """An account made by the sign-up form whose address nobody has confirmed yet: the user
    is inactive until then (accounts/signup.py). The row is what tells such an account from
    one staff switched off, which sign-up must never touch or prune."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="pending_sign_up",
    )
    # The last sign-up with this address, on the database's clock: pruning counts from it.
    asked_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "accounts_pending_sign_ups"

    def __str__(self) -> str:
        return self.user.get_username()
