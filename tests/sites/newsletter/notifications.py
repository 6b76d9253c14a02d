from django.utils.translation import gettext_lazy as _

from recipients import catalogue
from recipients.catalogue import Category, Message

catalogue.register_category(
    "newsletter",
    Category(
        label=_("Newsletter"),
        description=_("A letter from the editors, once a month."),
        # Off on webhooks unless the recipient turns it on; on everywhere else.
        defaults={"webhook": False},
    ),
)

catalogue.register_message(
    "newsletter.issue",
    Message(
        subject=_("{title}: the new issue"),
        body=_("The {title} issue is out. Read it here:\n\n{url}"),
        category="newsletter",
        params=frozenset({"title", "url"}),
    ),
)
