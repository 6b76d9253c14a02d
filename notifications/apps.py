from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """The notification outbox and its queue worker."""

    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"
