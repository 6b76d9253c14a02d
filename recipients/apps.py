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

        from recipients import preferences
        from recipients.models import ChannelPreference, DigestChoice, Recipient

        # Every change of what reaches a recipient, whoever saves it, bumps their choices'
        # version in the saving transaction. (A settings row is deleted only with its user.)
        post_save.connect(preferences.choices_changed, sender=Recipient, dispatch_uid="version")
        for model in (ChannelPreference, DigestChoice):
            for signal in (post_save, post_delete):
                signal.connect(preferences.choices_changed, sender=model, dispatch_uid="version")
