"""The categories and messages accounts registers in the catalogue (docs/messages.md): what the
site tells its users about their accounts, sent through the outbox like any notification.

The two categories are accounts' because accounts sends what is in them; an app that sends a
security notice of its own names "security" as its message's category and does not register it
again.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from recipients import catalogue
from recipients.catalogue import Category, Message

catalogue.register_category(
    "security",
    Category(
        label=_("Security"),
        description=_("Password resets and other messages about access to your account."),
        required=True,
    ),
)
catalogue.register_category(
    "account",
    Category(
        label=_("Your account"),
        description=_("Welcome messages and news about your account."),
        # A webhook is a machine's endpoint: it gets account news only when asked for.
        defaults={"webhook": False},
    ),
)

catalogue.register_message(
    "welcome",
    Message(
        subject=_("Welcome to v10r, {name}"),
        body=_(
            "Hello {name}. This message went through the outbox: queued in a transaction, "
            "claimed by a worker, sent, and recorded under its fencing token."
        ),
        category="account",
        params=frozenset({"name"}),
    ),
)
# accounts/forms.py queues it; the link carries Django's reset token, so it lives in the
# notification's parameters until pruning (docs/accounts.md).
catalogue.register_message(
    "account.password_reset",
    Message(
        subject=_("Reset your password on {site_name}"),
        body=_(
            "Someone asked to reset the password of the account {username} on {site_name}. "
            "To choose a new password, open this link:\n\n{url}\n\n"
            "The link works once, and for a limited time. If you did not ask, ignore this "
            "email: your password stays as it is."
        ),
        category="security",
        params=frozenset({"site_name", "username", "url"}),
        # Anyone who reads the link can set the password, until it is used or expires.
        secret=frozenset({"url"}),
    ),
)
# accounts/signup.py queues one of these two for every sign-up it accepts, and nothing
# else: the answer cannot tell a new address from one that has an account.
catalogue.register_message(
    "account.confirm_sign_up",
    Message(
        subject=_("Confirm your email address on {site_name}"),
        body=_(
            "Someone signed up on {site_name} with this email address. To confirm it and "
            "sign in, open this link and enter the password chosen at sign-up:\n\n{url}\n\n"
            "The link works once, for 24 hours. If you did not sign up, ignore this email: "
            "nobody can sign in to the account, and it is deleted within a week."
        ),
        category="security",
        params=frozenset({"site_name", "url"}),
        # With the password, it opens the account, until it is used or expires.
        secret=frozenset({"url"}),
    ),
)
catalogue.register_message(
    "account.sign_up_taken",
    Message(
        subject=_("Someone tried to sign up on {site_name} with your address"),
        body=_(
            "Someone tried to sign up on {site_name} with this email address, which already "
            "has the account {username}. No second account was made, and yours is unchanged."
            "\n\nIf it was you, sign in here:\n\n{sign_in_url}\n\n"
            "Forgot your password? Choose a new one here:\n\n{reset_url}\n\n"
            "If it was not you, ignore this email."
        ),
        category="security",
        params=frozenset({"site_name", "username", "sign_in_url", "reset_url"}),
    ),
)
