"""The signed token in an email's unsubscribe link: it names a user, a category and a channel,
and whoever holds it may turn that one category off on that one channel, without signing in.

The token is `<user id>.<category>.<channel>.<signature>`: Django's Signer (an HMAC-SHA256 of
the value under SECRET_KEY and this module's own salt), so no other signed value of the site
verifies here, and no value signed here verifies anywhere else.

It does not expire. An unsubscribe link must keep working in an email read months later
(RFC 8058 asks the sender to honour it for as long as the message might be read), and what
it grants is small, one choice the recipient can undo on the preference centre. For the same
reason it does not depend on the password: a password change does not stop it. It stops
working when the user is deleted, and when SECRET_KEY changes without the old key kept in
SECRET_KEY_FALLBACKS. Being the same for every email of a user, category and channel, a
replayed token does again what it did once: nothing more.
"""

from __future__ import annotations

import functools
from urllib.parse import quote

from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils import translation

from core.origins import ascii_origin
from recipients import preferences
from recipients.catalogue import CATEGORIES

SALT = "notifications.unsubscribe"
# Its own separator: a dot needs no escaping in a URL, and the value's parts never hold one.
SEPARATOR = "."
# The longest token made here is about 80 characters (a 20-digit id, the longest names, the
# 43-character signature); anything much longer is refused before any HMAC is computed.
MAX_LENGTH = 200
BIGGEST_ID = 2**63 - 1  # a bigint primary key's


class TokenRefused(ValueError):
    """The token is not one this site signed (tampered, cut short, another salt's), or it
    names a user id, category or channel no link may name."""


def _signer() -> signing.Signer:
    # Made per call, so it reads SECRET_KEY (and its fallbacks) as they are now: cheap, an
    # object and no I/O.
    return signing.Signer(salt=SALT, sep=SEPARATOR, algorithm="sha256")


def make(*, user_id: int, category: str, channel: str) -> str:
    """The token for user_id's category on channel; ValueError for a category or channel no
    link may name (a required category, which nobody can unsubscribe from)."""
    _refuse_names(category=category, channel=channel, error=ValueError)
    if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id < 1:
        raise ValueError(f"user_id must be a positive integer, not {user_id!r}")
    return _signer().sign(f"{user_id}{SEPARATOR}{category}{SEPARATOR}{channel}")


def verify(token: str) -> tuple[int, str, str]:
    """(user_id, category, channel) from a token made by make(); TokenRefused for any other
    string, and for a token whose category or channel a recipient can no longer choose."""
    if not isinstance(token, str) or not token.isascii() or len(token) > MAX_LENGTH:
        raise TokenRefused("not a token")
    try:
        value = _signer().unsign(token)
    except signing.BadSignature:
        raise TokenRefused("bad signature") from None
    parts = value.split(SEPARATOR)
    if len(parts) != 3 or not parts[0].isdecimal() or not parts[0].isascii():
        raise TokenRefused("not a token's value")
    user_id, category, channel = int(parts[0]), parts[1], parts[2]
    if not 0 < user_id <= BIGGEST_ID:
        raise TokenRefused("not a user id")
    _refuse_names(category=category, channel=channel, error=TokenRefused)
    return user_id, category, channel


def _refuse_names(*, category: str, channel: str, error: type[Exception]) -> None:
    found = CATEGORIES.get(category)
    if found is None or not found.choosable:
        raise error(f"no unsubscribe link names the category {category!r}")
    if found.required:
        raise error(f"the category {category!r} is required: nobody can unsubscribe from it")
    if channel not in preferences.choosable_channels():
        raise error(f"no unsubscribe link names the channel {channel!r}")


# Where the token goes in the path reverse() makes: a NUL, which no URL reverse() makes can
# hold (it quotes one as %00).
_TOKEN = "\x00"


def offer(*, user_id: int, category: str, channel: str, language: str) -> tuple[str, str] | None:
    """What a message of category tells its recipient about stopping it, in language: the
    category's label and the one-click link ("" when SITE_ORIGIN is unset, and no link can
    be made). None when the recipient may not stop it (a required category, one nobody
    chooses, a channel nobody chooses). One HMAC; the rest is made once per language."""
    try:
        token = make(user_id=user_id, category=category, channel=channel)
    except ValueError:
        return None
    label = _label(category, language)
    origin = settings.SITE_ORIGIN
    if not origin:
        return label, ""
    head, tail = _link_parts(language=language, origin=origin, urlconf=settings.ROOT_URLCONF)
    return label, f"{head}{token}{tail}"


@functools.lru_cache(maxsize=256)
def _label(category: str, language: str) -> str:
    with translation.override(language):
        return str(CATEGORIES[category].label)


@functools.lru_cache(maxsize=64)
def _link_parts(*, language: str, origin: str, urlconf: str) -> tuple[str, str]:
    """The unsubscribe link before and after its token, under the language's prefix (the
    page's), on the origin as a mail header may carry it."""
    origin = ascii_origin(origin)
    with translation.override(language):
        head, tail = reverse("unsubscribe", kwargs={"token": _TOKEN}).split(quote(_TOKEN))
    return origin + head, tail
