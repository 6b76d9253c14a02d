from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """The notification outbox and its queue worker."""

    name = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from notifications import checks  # noqa: F401 - registers the system checks
