from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class TransportsConfig(AppConfig):
    """The channels: how a message's bytes leave the site."""

    name = "transports"
    verbose_name = _("Channels")

    def ready(self) -> None:
        from transports import checks  # noqa: F401 - registers the system checks
