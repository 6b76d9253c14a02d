from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class NotificationsConfig(AppConfig):
    """The notification outbox and its queue worker."""

    name = "notifications"
    verbose_name = _("Notifications")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from notifications import (
            checks,  # noqa: F401 - registers the system checks
            preferences,
        )
        from notifications.models import ChannelPreference, DigestChoice, Recipient

        post_save.connect(preferences.recipient_saved, sender=Recipient, dispatch_uid="held")
        post_save.connect(preferences.digest_saved, sender=DigestChoice, dispatch_uid="digest")
        post_delete.connect(preferences.digest_dropped, sender=DigestChoice, dispatch_uid="digest")
        for signal in (post_save, post_delete):
            signal.connect(
                preferences.choice_changed, sender=ChannelPreference, dispatch_uid="choice"
            )
