from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Sign in, sign out and password reset for the site's users, with Django's own views;
    the reset email goes through the outbox like every other notification."""

    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from accounts import signals  # noqa: F401 (connects the sign-out receiver)
