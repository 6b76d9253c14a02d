from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class RecipientsConfig(AppConfig):
    """Who may receive what: recipients' settings and choices, their addresses, quiet hours,
    the catalogue of messages, unsubscribe links and push subscriptions."""

    name = "recipients"
    verbose_name = _("Recipients")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save
        from django.utils.module_loading import autodiscover_modules

        from recipients import (
            catalogue,
            checks,  # noqa: F401 - registers the catalogue's system checks
            preferences,
        )
        from recipients.models import ChannelPreference, DigestChoice, Recipient

        # Every change of what reaches a recipient, whoever saves it, bumps their choices'
        # version in the saving transaction. (A settings row is deleted only with its user.)
        post_save.connect(preferences.choices_changed, sender=Recipient, dispatch_uid="version")
        for model in (ChannelPreference, DigestChoice):
            for signal in (post_save, post_delete):
                signal.connect(preferences.choices_changed, sender=model, dispatch_uid="version")

        # Every installed app's categories and messages, from its notifications.py, in
        # INSTALLED_APPS order (docs/messages.md). A module is imported once per process, so
        # a registry populated again (a test's override of INSTALLED_APPS) registers nothing
        # twice.
        autodiscover_modules(catalogue.MODULE)
