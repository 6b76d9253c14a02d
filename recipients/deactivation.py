"""Why a channel address was switched off, in the reader's language.

The drain stores the provider's verdict once, as "CODE: detail" in English
(ChannelAddress.deactivated_reason, written by notifications/drain.py from the ChannelError
that carried deactivate_address). The code is turned into a sentence when it is read, in
whatever language the reader has; the detail stays the provider's own words, for whoever needs
them."""

from __future__ import annotations

import re

from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

# Every code a channel switches an address off with (a test walks transports for
# deactivate_address=True and finds each here).
SENTENCES = {
    "BOT_BLOCKED": _(
        "The recipient blocked the bot, or the chat is closed to it: the provider refuses "
        "every message to this address."
    ),
    "ENDPOINT_GONE": _("The webhook's endpoint answered 410 Gone: it takes no more deliveries."),
    "WEBPUSH_GONE": _(
        "The browser's push subscription has ended: its push service answered that it is gone."
    ),
    "WEBPUSH_BAD_KEYS": _(
        "The browser's push subscription has keys no message can be encrypted to."
    ),
}

# "BOT_BLOCKED: Forbidden: bot was blocked by the user" → the code, and the rest.
_STORED = re.compile(r"(?P<code>[A-Z][A-Z0-9_]+)(?::\s*(?P<detail>.*))?", re.DOTALL)


def code_and_detail(stored: str) -> tuple[str, str]:
    """The code and the provider's detail of a stored reason ("" for either that is absent)."""
    match = _STORED.fullmatch(stored.strip())
    if match is None:
        return "", stored.strip()
    return match["code"], (match["detail"] or "").strip()


def explain(stored: str) -> str:
    """A stored reason as a sentence in the active language."""
    code, _detail = code_and_detail(stored)
    if code in SENTENCES:
        return str(SENTENCES[code])
    if code:
        return gettext("The provider refused this address for good (%(code)s).") % {"code": code}
    if stored.strip():
        return gettext("The provider refused this address for good.")
    # Nothing stored: staff switched it off in the admin, which records no reason.
    return gettext("Switched off by hand; no reason was recorded.")
