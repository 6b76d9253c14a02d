"""The header's inbox badge, on every page a signed-in user sees.

Nothing is read until a template asks: the processor hands over an object whose count is
worked out on first use (one statement on the unread index, capped as inbox.unread_count
caps it) and kept for the rest of the render. A visitor who is not signed in costs no
statement, and neither does the offline page, which the service worker keeps for anyone and so
must name nobody's count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from django.utils.translation import npgettext

from core import plurals
from notifications import inbox


@dataclass
class InboxBadge:
    request: object = field(repr=False)

    @cached_property
    def unread(self) -> int:
        user = getattr(self.request, "user", None)
        if user is None or not user.is_authenticated:
            return 0
        return inbox.unread_count(user)

    @property
    def text(self) -> str:
        """ "" for none, the count, or "99+"."""
        return inbox.badge(self.unread)

    @property
    def word(self) -> str:
        """What a screen reader hears after the count ("1 непрочитанное", "5 непрочитанных");
        "99+" agrees as the number past the cap does."""
        return unread_word(self.unread)

    @property
    def words(self) -> dict[str, str]:
        """The word for each plural category, for the live script's new counts."""
        return plurals.forms(unread_word)


def unread_word(count: int) -> str:
    return npgettext("after the inbox's unread count", "unread", "unread", count)


def inbox_badge(request) -> dict:
    match = getattr(request, "resolver_match", None)
    if match is not None and match.view_name == "offline":
        return {}
    return {"inbox_badge": InboxBadge(request)}
