"""Sign-up by email address: an account that cannot sign in until its owner confirms the
address by the emailed link, and the pruning of accounts nobody confirmed.

Every sign-up the form accepts does the same work, whatever the address: one password hash
and one security email queued in the outbox. A new address gets an inactive account and a
link to confirm it; an address that awaits confirmation gets the new password and a new link
(the earlier links stop working); an address that has an account gets, instead, an email
telling its owner that someone tried. The answer, and the time it takes, say nothing of which
it was (docs/accounts.md)."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import translation
from django.utils.crypto import constant_time_compare
from django.utils.encoding import force_bytes, force_str
from django.utils.http import base36_to_int, urlsafe_base64_decode, urlsafe_base64_encode

from accounts.models import PendingSignUp
from core import pruning
from notifications.enqueue import send_notification
from recipients.models import Recipient

# How long the emailed link works: a day, so that a sign-up finished the next morning still
# confirms. Signing up again sends a new one.
CONFIRMATION_TIMEOUT = timedelta(hours=24)
# An account nobody confirmed is deleted this long after its last sign-up: long past its
# link's day, and past the outbox's retries of the email.
UNCONFIRMED_KEPT = timedelta(days=7)

CONFIRM_MESSAGE = "account.confirm_sign_up"
TAKEN_MESSAGE = "account.sign_up_taken"


class ConfirmationTokens(PasswordResetTokenGenerator):
    """Django's reset tokens, salted apart, whose hash holds the password (a later sign-up
    replaces it) and is_active (confirming sets it): a link works once, and only the newest."""

    key_salt = "accounts.signup.ConfirmationTokens"

    def _make_hash_value(self, user, timestamp) -> str:
        return f"{user.pk}{user.password}{user.is_active}{user.email}{timestamp}"

    def check_token(self, user, token) -> bool:
        """Django's check, held to CONFIRMATION_TIMEOUT instead of PASSWORD_RESET_TIMEOUT
        (which Django's reads from the settings, and the reset keeps at an hour)."""
        if not (user and token):
            return False
        try:
            made = base36_to_int(token.split("-")[0])
        except ValueError:
            return False
        if self._num_seconds(self._now()) - made > CONFIRMATION_TIMEOUT.total_seconds():
            return False
        return any(
            constant_time_compare(self._make_token_with_timestamp(user, made, secret), token)
            for secret in [self.secret, *self.secret_fallbacks]
        )


tokens = ConfirmationTokens()


def username_for(email: str) -> str:
    """The username an address signs up as: the address itself, in lower case."""
    return get_user_model().objects.normalize_email(email).lower()


def sign_up(*, email: str, password: str, language: str, site_name: str, origin: str) -> None:
    """Queue the security email this sign-up calls for, and make or renew the account that
    awaits confirmation when the address has none; in one transaction (or the caller's).

    language is the visitor's: the email of a new or awaiting account is written in it (and
    the account keeps it); an existing account's owner is written to in their own. origin is
    what the emailed links start with ("https://v10r.example")."""
    address = get_user_model().objects.normalize_email(email)
    username = address.lower()
    with transaction.atomic():
        owners = _accounts_with(address, username)
        if owners is not None:
            # The same hash a new account's password costs, so the answer comes as late.
            make_password(password)
            for owner in owners:
                _tell_taken(owner, site_name=site_name, origin=origin, language=language)
            return
        user = _awaiting_account(username, address=address, password=password)
        Recipient.objects.update_or_create(user=user, defaults={"language": language})
        _ask_to_confirm(user, site_name=site_name, origin=origin, language=language)


def _accounts_with(address: str, username: str) -> list | None:
    """None when no account but one awaiting confirmation has this address or username; else
    the accounts whose owners are told (those the reset form would write to: active, with a
    password, at this address), which may be none (an account staff switched off)."""
    taken = (
        get_user_model()
        ._default_manager.filter(Q(username__iexact=username) | Q(email__iexact=address))
        .filter(pending_sign_up__isnull=True)
    )
    if not taken:
        return None
    return [
        user
        for user in taken
        if user.is_active and user.has_usable_password() and user.email.lower() == username
    ]


def _awaiting_account(username: str, *, address: str, password: str):
    """The inactive account of username, made now or renewed with this password."""
    for _attempt in range(2):
        pending = (
            PendingSignUp.objects.select_for_update()
            .select_related("user")
            .filter(user__username=username)
            .first()
        )
        if pending is not None:
            user = pending.user
            user.email = address
            user.set_password(password)
            user.save(update_fields=["email", "password"])
            PendingSignUp.objects.filter(pk=pending.pk).update(asked_at=Now())
            return user
        try:
            with transaction.atomic():
                user = get_user_model()._default_manager.create_user(
                    username, email=address, password=password, is_active=False
                )
                PendingSignUp.objects.create(user=user)
                return user
        except IntegrityError:
            # A sign-up with the same address, at the same moment, made it first: this one
            # renews it, as a second sign-up would.
            continue
    raise IntegrityError(f"could neither make nor find the account awaiting {username!r}")


def _link(origin: str, name: str, *, language: str, **kwargs) -> str:
    # The link in the language the email is written in.
    with translation.override(language):
        return f"{origin}{reverse(name, kwargs=kwargs)}"


def _ask_to_confirm(user, *, site_name: str, origin: str, language: str) -> None:
    url = _link(
        origin,
        "accounts:sign_up_confirm",
        language=language,
        uidb64=urlsafe_base64_encode(force_bytes(user.pk)),
        token=tokens.make_token(user),
    )
    send_notification(
        user=user,
        type=CONFIRM_MESSAGE,
        params={"url": url, "site_name": site_name},
        channels=["email"],
        # Someone is waiting for it: ahead of the ordinary lane, as the reset email is.
        priority="high",
    )


def _tell_taken(user, *, site_name: str, origin: str, language: str) -> None:
    # The owner's own language; one who has none yet is given the visitor's, as the reset
    # form gives the asker's.
    recipient, _created = Recipient.objects.get_or_create(
        user=user, defaults={"language": language}
    )
    send_notification(
        user=user,
        type=TAKEN_MESSAGE,
        params={
            "username": user.get_username(),
            "site_name": site_name,
            "sign_in_url": _link(origin, "accounts:sign_in", language=recipient.language),
            "reset_url": _link(origin, "accounts:password_reset", language=recipient.language),
        },
        channels=["email"],
        priority="high",
    )


def awaiting(*, uidb64: str, token: str):
    """The account an emailed link confirms, or None when the link does not work: forged,
    expired, used, or superseded by a later sign-up."""
    try:
        pk = force_str(urlsafe_base64_decode(uidb64))
        user = (
            get_user_model()
            ._default_manager.filter(pk=pk, is_active=False, pending_sign_up__isnull=False)
            .first()
        )
    except (TypeError, ValueError, OverflowError, ValidationError):
        return None
    return user if user is not None and tokens.check_token(user, token) else None


def confirm(user) -> bool:
    """Let user, an account awaiting confirmation, sign in; False when it no longer awaits
    it as it was read (confirmed meanwhile, or renewed by another sign-up)."""
    with transaction.atomic():
        # Fenced on the password read with the link's check: of two confirmations at once,
        # or a confirmation and a new sign-up, only one counts.
        confirmed = (
            get_user_model()
            ._default_manager.filter(pk=user.pk, is_active=False, password=user.password)
            .filter(pending_sign_up__isnull=False)
            .update(is_active=True)
        )
        if confirmed:
            PendingSignUp.objects.filter(user_id=user.pk).delete()
    user.is_active = bool(confirmed)
    return bool(confirmed)


def prune(*, older_than: timedelta = UNCONFIRMED_KEPT, limit: int = pruning.BATCH) -> int:
    """Delete up to limit accounts that have awaited confirmation since older_than ago;
    return how many."""
    with transaction.atomic():
        # SKIP LOCKED: an account a sign-up is renewing right now is left for the next run.
        stale = list(
            PendingSignUp.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(asked_at__lt=Now() - older_than)
            .filter(user__is_active=False, user__last_login__isnull=True)
            .values_list("user_id", flat=True)[:limit]
        )
        user_model = get_user_model()
        _total, deleted = user_model._default_manager.filter(pk__in=stale).delete()
    return deleted.get(user_model._meta.label, 0)


def tidy(sender, **kwargs) -> dict[str, int]:
    """outbox_idle's receiver: delete the accounts nobody confirmed (UNCONFIRMED_KEPT)."""
    return {"unconfirmed_sign_ups": pruning.repeat("unconfirmed sign-ups", prune)}
