"""The site's sign-in, sign-up and password-reset forms: Django's own where it has one,
counted in the site's rate limiter, and their emails queued in the outbox instead of sent in
the request."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import (
    AuthenticationForm,
    PasswordChangeForm,
    PasswordResetForm,
    SetPasswordMixin,
)
from django.contrib.sites.shortcuts import get_current_site
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils import translation
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts import signup
from core import clients, ratelimit
from core.signin import THROTTLED, ThrottledSignInMixin
from notifications.enqueue import send_notification
from recipients.models import Recipient

# Reset (or sign-up) requests a client may make, and reset (or sign-up) emails an address may
# be sent, per window; each form counts in windows of its own. The address's count holds
# whoever asks, so nobody can fill an inbox with these emails; it is counted whether or not
# the address has an account, so a refusal tells nothing about that.
REQUESTS_PER_CLIENT = 5
REQUESTS_PER_ADDRESS = 3
REQUEST_WINDOW = timedelta(hours=1)

MESSAGE_KEY = "account.password_reset"


class SignInForm(ThrottledSignInMixin, AuthenticationForm):
    """Django's sign-in form; its failures count with the admin's (core/signin.py)."""

    def clean_username(self):
        # Sign-up makes the address, in lower case, the username (accounts/signup.py); the
        # address signs in however it is capitalised (a browser saves it as it was typed).
        # A username that exists as typed is left alone: staff may have made one so.
        username = self.cleaned_data["username"]
        lowered = username.lower()
        if lowered == username or "@" not in username:
            return username
        users = get_user_model()._default_manager
        return username if users.filter(username=username).exists() else lowered


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


class _LimitedByClientAndAddress:
    """Put before a form whose clean() leaves an email address in cleaned_data: each request
    it accepts counts against the client and against the address (a keyed hash of it),
    limit_name naming the windows; past either limit it refuses, retry_after_seconds then
    saying when to try again (for a Retry-After header)."""

    limit_name: str
    retry_after_seconds: int | None = None

    def __init__(self, *args, request, **kwargs):
        super().__init__(*args, **kwargs)
        self.request = request

    def refusal(self, minutes: int) -> str:
        raise NotImplementedError

    def count(self, email: str) -> None:
        client_key = f"{self.limit_name}:{clients.address(self.request)}"
        by_client = ratelimit.hit(key=client_key, limit=REQUESTS_PER_CLIENT, window=REQUEST_WINDOW)
        if not by_client.allowed:
            self._refuse([client_key], by_client.retry_after_seconds)
        # Under a keyed hash: the table need not hold every address anyone typed, accounts
        # or not, in a form anyone could check a guess against.
        digest = salted_hmac(
            f"accounts.{self.limit_name}-email", email.casefold(), algorithm="sha256"
        ).hexdigest()[:32]
        address_key = f"{self.limit_name}-email:{digest}"
        by_address = ratelimit.hit(
            key=address_key, limit=REQUESTS_PER_ADDRESS, window=REQUEST_WINDOW
        )
        if not by_address.allowed:
            # Nothing is sent, so the client's request does not count either.
            self._refuse([client_key, address_key], by_address.retry_after_seconds)

    def _refuse(self, keys: list[str], retry_after_seconds: int):
        # A refused request takes its hits back: else refusals would keep a window full.
        for key in keys:
            ratelimit.forgive(key=key)
        self.retry_after_seconds = retry_after_seconds
        raise ValidationError(self.refusal(-(-retry_after_seconds // 60)), code=THROTTLED)


class PasswordResetRequestForm(_LimitedByClientAndAddress, PasswordResetForm):
    """Django's password-reset form, rate-limited, that queues the email as a notification.

    Django's view answers the same page whether or not the address has an account; this form
    keeps that: it queues nothing for an unknown address, and says nothing of it."""

    limit_name = "reset"

    def refusal(self, minutes: int) -> str:
        return _("Too many password reset requests. Try again in %(minutes)d min.") % {
            "minutes": minutes
        }

    def clean(self):
        cleaned = super().clean()
        email = cleaned.get("email")
        if email:
            self.count(email)
        return cleaned

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


def current_language() -> str:
    """The language of this request, as the site names it ("de" for "de-at")."""
    try:
        return translation.get_supported_language_variant(
            translation.get_language() or settings.LANGUAGE_CODE
        )
    except LookupError:
        return settings.LANGUAGE_CODE


def recipient_language(user) -> str:
    """The language user's notifications are written in; for a user who has none yet, the
    language of this request, kept from now on."""
    recipient, _created = Recipient.objects.get_or_create(
        user=user, defaults={"language": current_language()}
    )
    return recipient.language


class SignUpForm(_LimitedByClientAndAddress, SetPasswordMixin, forms.Form):
    """An email address and a password, twice, held to AUTH_PASSWORD_VALIDATORS; limited as
    the reset form is. Its answers depend on what was typed only, never on whether the
    address has an account: that is for the email to say (accounts/signup.py)."""

    limit_name = "signup"

    # The address is the account's username, which holds 150 characters.
    email = forms.EmailField(
        label=gettext_lazy("Email"),
        max_length=150,
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )
    password1, password2 = SetPasswordMixin.create_password_fields()

    def refusal(self, minutes: int) -> str:
        return _("Too many sign-up requests. Try again in %(minutes)d min.") % {"minutes": minutes}

    def clean(self):
        self.validate_passwords()
        email = self.cleaned_data.get("email")
        if email:
            # The validators compare the password with the address (a password too like it
            # is refused), as they would with the account it is about to become.
            username = signup.username_for(email)
            self.validate_password_for_user(get_user_model()(username=username, email=email))
        # Counted only once everything else holds: a refusal for a typo sends nothing.
        if email and not self.errors:
            self.count(email)
        return self.cleaned_data

    def save(self) -> None:
        site = get_current_site(self.request)
        protocol = "https" if self.request.is_secure() else "http"
        signup.sign_up(
            email=self.cleaned_data["email"],
            password=self.cleaned_data["password1"],
            language=current_language(),
            site_name=site.name,
            origin=link_origin({"protocol": protocol, "domain": site.domain}),
        )


class ConfirmSignUpForm(ThrottledSignInMixin, forms.Form):
    """The emailed link's page: the password chosen at sign-up, counted as a sign-in, so the
    link alone (a mailbox someone else reads) confirms nothing, nor does a password alone."""

    password = forms.CharField(
        label=gettext_lazy("Password"),
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )

    def __init__(self, *args, user, request, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.request = request

    def clean(self):
        # The mixin counts clean_password(), not the whole form.
        return forms.Form.clean(self)

    def clean_password(self):
        password = self.cleaned_data["password"]

        def check():
            if not self.user.check_password(password):
                raise ValidationError(
                    _("That is not the password chosen when signing up with this address."),
                    code="password_incorrect",
                )
            return password

        return self.counted(self.user.get_username(), check)
