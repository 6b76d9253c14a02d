"""The showcase's category and message in the catalogue (docs/messages.md): the rows visitors
send with "Try it" on the workers page. A site without the showcase has neither."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from recipients import catalogue
from recipients.catalogue import Category, Message

# The showcase's category, which its message names: only the site's own demo user is sent it,
# so no recipient chooses it and the preference centre leaves it out.
CATEGORY = "demo"
# The message the workers page queues (showcases/queue_demo.py).
MESSAGE = "queue.demo"

catalogue.register_category(
    CATEGORY,
    Category(
        label=_("Showcase"),
        description=_("The rows visitors send with “Try it” on the workers page."),
        choosable=False,
    ),
)
catalogue.register_message(
    MESSAGE,
    Message(
        subject=_("A notification from the queue"),
        # Shown beside the row's state on the page, so it says what happens, not what has.
        body=_("Queued as “{label}”, for the drain loop to claim and deliver."),
        category=CATEGORY,
        params=frozenset({"label"}),
    ),
)
