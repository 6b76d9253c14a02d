"""The site's sign-in and password-reset forms: Django's own, counted in the site's rate
limiter, and the reset email queued in the outbox instead of sent in the request."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm, PasswordResetForm
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import translation
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext as _

from core import clients, ratelimit
from core.signin import THROTTLED, ThrottledSignInMixin
from notifications.enqueue import send_notification
from notifications.models import Recipient

# Reset requests a client may make, and reset emails an address may be sent, per window. The
# address's count holds whoever asks, so nobody can fill an inbox with reset emails; it is
# counted whether or not the address has an account, so a refusal tells nothing about that.
RESETS_PER_CLIENT = 5
RESETS_PER_ADDRESS = 3
RESET_WINDOW = timedelta(hours=1)

MESSAGE_KEY = "account.password_reset"


class SignInForm(ThrottledSignInMixin, AuthenticationForm):
    """Django's sign-in form; its failures count with the admin's (core/signin.py)."""


class ThrottledPasswordChangeForm(ThrottledSignInMixin, PasswordChangeForm):
    """Django's password-change form, its old password counted as a sign-in: a stolen
    session must not be a way to guess the password without limit."""

    def __init__(self, *args, request, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request

    def clean(self):
        # The mixin counts clean_old_password(), not the whole form.
        return PasswordChangeForm.clean(self)

    def clean_old_password(self):
        return self.counted(self.user.get_username(), super().clean_old_password)


class PasswordResetRequestForm(PasswordResetForm):
    """Django's password-reset form, rate-limited, that queues the email as a notification.

    Django's view answers the same page whether or not the address has an account; this form
    keeps that: it queues nothing for an unknown address, and says nothing of it."""

    retry_after_seconds: int | None = None

    def __init__(self, *args, request, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request

    def clean(self):
        cleaned = super().clean()
        email = cleaned.get("email")
        if email:
            self._count(email)
        return cleaned

    def _count(self, email: str) -> None:
        client_key = f"reset:{clients.address(self.request)}"
        by_client = ratelimit.hit(key=client_key, limit=RESETS_PER_CLIENT, window=RESET_WINDOW)
        if not by_client.allowed:
            self._refuse([client_key], by_client.retry_after_seconds)
        # Under a keyed hash: the table need not hold every address anyone typed, accounts
        # or not, in a form anyone could check a guess against.
        digest = salted_hmac(
            "accounts.reset-email", email.casefold(), algorithm="sha256"
        ).hexdigest()[:32]
        address_key = f"reset-email:{digest}"
        by_address = ratelimit.hit(key=address_key, limit=RESETS_PER_ADDRESS, window=RESET_WINDOW)
        if not by_address.allowed:
            # Nothing is sent, so the client's request does not count either.
            self._refuse([client_key, address_key], by_address.retry_after_seconds)

    def _refuse(self, keys: list[str], retry_after_seconds: int):
        # A refused request takes its hits back: else refusals would keep a window full.
        for key in keys:
            ratelimit.forgive(key=key)
        self.retry_after_seconds = retry_after_seconds
        raise ValidationError(
            _("Too many password reset requests. Try again in %(minutes)d min.")
            % {"minutes": -(-retry_after_seconds // 60)},
            code=THROTTLED,
        )

    def save(self, **options):
        # The recipient's language, if new, and its notification commit together, or neither.
        with transaction.atomic():
            super().save(**options)

    def send_mail(self, subject_template_name, email_template_name, context, *args, **kwargs):
        """Queue the reset email in the outbox (Django's form would send it here and now)."""
        user = context["user"]
        language = recipient_language(user)
        # The link in the language the email is written in.
        with translation.override(language):
            path = reverse(
                "accounts:password_reset_confirm",
                kwargs={"uidb64": context["uid"], "token": context["token"]},
            )
        send_notification(
            user=user,
            type=MESSAGE_KEY,
            params={
                "url": f"{link_origin(context)}{path}",
                "site_name": context["site_name"],
                "username": user.get_username(),
            },
            channels=["email"],
            # Someone is waiting for it: ahead of the ordinary lane.
            priority="high",
        )


def link_origin(context) -> str:
    """Where the emailed link points: SITE_ORIGIN when the site names one, else the scheme
    and host of the request (which ALLOWED_HOSTS checks, but not its port)."""
    if settings.SITE_ORIGIN:
        return settings.SITE_ORIGIN
    return f"{context['protocol']}://{context['domain']}"


def recipient_language(user) -> str:
    """The language user's notifications are written in; for a user who has none yet, the
    language of this request, kept from now on."""
    try:
        current = translation.get_supported_language_variant(
            translation.get_language() or settings.LANGUAGE_CODE
        )
    except LookupError:
        current = settings.LANGUAGE_CODE
    recipient, _created = Recipient.objects.get_or_create(user=user, defaults={"language": current})
    return recipient.language
