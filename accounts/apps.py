from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Sign up, sign in, sign out and password reset for the site's users, with Django's own
    views where it has them; their emails go through the outbox like every other
    notification."""

    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from accounts import (
            signals,  # noqa: F401 (connects the sign-out receiver)
            signup,
        )
        from notifications.signals import outbox_idle

        # Accounts nobody confirmed are deleted with the rest of the site's leftovers.
        outbox_idle.connect(signup.tidy, dispatch_uid="accounts.unconfirmed_sign_ups")
