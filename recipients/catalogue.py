"""The catalogue of messages notifications can carry, by key.

A notification stores only a key and its parameters; the words are chosen when a delivery is
sent, in the recipient's language, so a message queued in English reaches a Russian reader in
Russian.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.utils import translation
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _


@dataclass(frozen=True)
class Category:
    """What recipients choose by: a kind of notification, and whether it reaches each channel
    when they have said nothing (defaults; a channel not named there is on)."""

    label: Promise
    description: Promise
    defaults: Mapping[str, bool] = field(default_factory=dict)
    # Required: no preference mutes it, quiet hours do not hold it, its email has no unsubscribe
    # link, and at least one channel stays on (the preference centre refuses to turn off the
    # last one, and enqueue keeps the first reachable one if the stored choices do).
    required: bool = False
    # Listed on the preference centre: False for rows only the site itself is sent (the
    # showcase's demo), which are not a person's choice.
    choosable: bool = True

    def default_for(self, channel: str) -> bool:
        return self.defaults.get(channel, True)


# Every notification's category, by name: the catalogue's messages each name one.
CATEGORIES: dict[str, Category] = {
    "security": Category(
        label=_("Security"),
        description=_("Password resets and other messages about access to your account."),
        required=True,
    ),
    "account": Category(
        label=_("Your account"),
        description=_("Welcome messages and news about your account."),
        # A webhook is a machine's endpoint: it gets account news only when asked for.
        defaults={"webhook": False},
    ),
    "demo": Category(
        label=_("Showcase"),
        description=_("The rows visitors send with “Try it” on the workers page."),
        choosable=False,
    ),
}


@dataclass(frozen=True)
class Message:
    subject: Promise
    body: Promise
    # A key of CATEGORIES: what the recipient's preferences are read by.
    category: str
    # Parameters that grant something to whoever reads them (a password-reset link): the
    # recipient gets them in the message, staff never see them (shown_params).
    secret: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Rendered:
    subject: str
    body: str
    language: str


MESSAGES: dict[str, Message] = {
    "welcome": Message(
        subject=_("Welcome to v10r, {name}"),
        body=_(
            "Hello {name}. This message went through the outbox: queued in a transaction, "
            "claimed by a worker, sent, and recorded under its fencing token."
        ),
        category="account",
    ),
    "queue.demo": Message(
        subject=_("A notification from the queue"),
        # Shown beside the row's state on the page, so it says what happens, not what has.
        body=_("Queued as “{label}”, for the drain loop to claim and deliver."),
        category="demo",
    ),
    # accounts/forms.py queues it; the link carries Django's reset token, so it lives in the
    # notification's parameters until pruning (docs/accounts.md).
    "account.password_reset": Message(
        subject=_("Reset your password on {site_name}"),
        body=_(
            "Someone asked to reset the password of the account {username} on {site_name}. "
            "To choose a new password, open this link:\n\n{url}\n\n"
            "The link works once, and for a limited time. If you did not ask, ignore this "
            "email: your password stays as it is."
        ),
        category="security",
        # Anyone who reads the link can set the password, until it is used or expires.
        secret=frozenset({"url"}),
    ),
    # accounts/signup.py queues one of these two for every sign-up it accepts, and nothing
    # else: the answer cannot tell a new address from one that has an account.
    "account.confirm_sign_up": Message(
        subject=_("Confirm your email address on {site_name}"),
        body=_(
            "Someone signed up on {site_name} with this email address. To confirm it and "
            "sign in, open this link and enter the password chosen at sign-up:\n\n{url}\n\n"
            "The link works once, for 24 hours. If you did not sign up, ignore this email: "
            "nobody can sign in to the account, and it is deleted within a week."
        ),
        category="security",
        # With the password, it opens the account, until it is used or expires.
        secret=frozenset({"url"}),
    ),
    "account.sign_up_taken": Message(
        subject=_("Someone tried to sign up on {site_name} with your address"),
        body=_(
            "Someone tried to sign up on {site_name} with this email address, which already "
            "has the account {username}. No second account was made, and yours is unchanged."
            "\n\nIf it was you, sign in here:\n\n{sign_in_url}\n\n"
            "Forgot your password? Choose a new one here:\n\n{reset_url}\n\n"
            "If it was not you, ignore this email."
        ),
        category="security",
    ),
}


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def validate(*, key: str, params: Mapping[str, Any]) -> None:
    """Raise ValueError unless key is a known message and params fill all its blanks."""
    try:
        message = MESSAGES[key]
    except KeyError:
        known = ", ".join(sorted(MESSAGES))
        raise ValueError(f"Unknown message key {key!r}; known keys: {known}.") from None
    with translation.override("en"):
        needed = _fields(str(message.subject)) | _fields(str(message.body))
    missing = sorted(needed - set(params))
    if missing:
        raise ValueError(f"Message {key!r} needs the parameter(s): {', '.join(missing)}.")


def render(*, key: str, params: Mapping[str, Any], language: str) -> Rendered:
    """Return the message's subject and body in language."""
    message = MESSAGES[key]
    with translation.override(language):
        return Rendered(
            subject=str(message.subject).format(**params),
            body=str(message.body).format(**params),
            language=language,
        )


# What staff see in place of a secret parameter.
HIDDEN = "•••"


def shown_params(*, key: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """params as staff may see them: each of the message's secret parameters hidden (all of
    them, for a key the catalogue no longer has: nothing says which were secret)."""
    message = MESSAGES.get(key)
    if message is None:
        return dict.fromkeys(params, HIDDEN)
    return {name: HIDDEN if name in message.secret else value for name, value in params.items()}


# What render() raises on a stored notification it cannot render: a key removed since it was
# queued, a parameter its message no longer has, a template a translation broke.
RENDER_ERRORS = (KeyError, IndexError, ValueError)


def render_or_key(*, key: str, params: Mapping[str, Any], language: str) -> Rendered:
    """render(), or the key itself as subject and body when the message cannot be rendered:
    for pages that show stored notifications and must not fail on an old one."""
    try:
        return render(key=key, params=params, language=language)
    except RENDER_ERRORS:
        return Rendered(subject=key, body=key, language=language)
