from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TransportsConfig(AppConfig):
    """The channels: how a message's bytes leave the site."""

    name = "transports"
    verbose_name = _("Channels")

    def ready(self) -> None:
        from django.core.signals import setting_changed

        from transports import (
            checks,  # noqa: F401 - registers the system checks
            forget_built,
        )

        # A channel is built once from the settings it reads; when a test changes a setting,
        # the next use builds it again from the new ones (as Django's own caches are reset).
        setting_changed.connect(forget_built, dispatch_uid="transports")
