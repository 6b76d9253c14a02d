from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class NotificationsConfig(AppConfig):
    """The notification engine: how a row moves, from enqueue to its last outcome."""

    name = "notifications"
    verbose_name = _("Notifications")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from notifications import (
            checks,  # noqa: F401 - registers the system checks
            choices,
        )
        from recipients.models import DigestChoice, Recipient

        post_save.connect(choices.recipient_saved, sender=Recipient, dispatch_uid="held")
        post_save.connect(choices.digest_saved, sender=DigestChoice, dispatch_uid="digest")
        post_delete.connect(choices.digest_dropped, sender=DigestChoice, dispatch_uid="digest")
