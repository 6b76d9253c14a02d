"""The tests' note: a message in a category nobody chooses, as the showcase's rows are, so no
preference, quiet hours or throttle touches it and a test sees exactly the sends it queues.
Its words are the showcase's message's, whose translations the site's .po files carry: a test
reads them in every language whether or not the showcase is installed."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from recipients import catalogue
from recipients.catalogue import Category, Message

KEY = "test.note"
CATEGORY = "test"

catalogue.register_category(
    CATEGORY, Category(label=_("Showcase"), description=_("Test notes."), choosable=False)
)
catalogue.register_message(
    KEY,
    Message(
        subject=_("A notification from the queue"),
        body=_("Queued as “{label}”, for the drain loop to claim and deliver."),
        category=CATEGORY,
        params=frozenset({"label"}),
    ),
)
