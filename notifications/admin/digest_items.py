"""What staff see of digests: a carrier's items on its delivery's page and its notification's,
the digests an item was gathered into on that notification's page, and a carrier's title in
the deliveries list ("Digest · 12 notifications · Your account").

Read only, and nothing here changes a row: a carrier is retried, sent now or cancelled as any
delivery is (retry.py, schedule.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Case, Count, IntegerField, OuterRef, Subquery, When
from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils.translation import get_language, gettext, ngettext

from notifications import digests
from notifications.admin.schedule import moment
from notifications.models import DigestItem, Notification, NotificationDelivery
from recipients import catalogue

# How many of a carrier's items its page lists, newest first; the rest are counted.
SHOWN = 50

# The template the deliveries' and notifications' change pages use: Django's, with the
# digests' sections after the fields.
CHANGE_FORM = "admin/notifications/digest_change_form.html"

# A carrier's number of items, for the deliveries list: counted only on carriers' rows (the
# CASE runs the subquery for those alone), each through digest_items' primary key.
ITEM_COUNT = Case(
    When(
        notification__type=digests.DIGEST,
        then=Coalesce(
            Subquery(
                DigestItem.objects.filter(carrier=OuterRef("pk"))
                .order_by()
                .values("carrier")
                .annotate(total=Count("*"))
                .values("total"),
                output_field=IntegerField(),
            ),
            0,
        ),
    ),
    default=None,
    output_field=IntegerField(),
)


# A digest notification's number of gathered notifications, for the notifications list and its
# page: the largest of its channels' digests (they may differ: one may have been claimed while
# another still gathered). Counted only on digests' rows, as ITEM_COUNT is.
GATHERED_COUNT = Case(
    When(
        type=digests.DIGEST,
        then=Coalesce(
            Subquery(
                DigestItem.objects.filter(carrier__notification=OuterRef("pk"))
                .order_by()
                .values("carrier")
                .annotate(total=Count("*"))
                .order_by("-total")
                .values("total")[:1],
                output_field=IntegerField(),
            ),
            0,
        ),
    ),
    default=None,
    output_field=IntegerField(),
)


def is_carrier(notification: Notification) -> bool:
    return notification.type == digests.DIGEST


def title(notification: Notification, count: int | None) -> str:
    """A carrier's title in the staff member's language: what it gathers, how many, of what."""
    params = notification.message_params or {}
    category = catalogue.CATEGORIES.get(params.get("category", ""))
    label = str(category.label) if category else params.get("category", "")
    count = count or 0
    if params.get("kind") == digests.THROTTLE_KIND:
        text = ngettext(
            "Over the limit · %(count)d notification · %(category)s",
            "Over the limit · %(count)d notifications · %(category)s",
            count,
        )
    else:
        text = ngettext(
            "Digest · %(count)d notification · %(category)s",
            "Digest · %(count)d notifications · %(category)s",
            count,
        )
    return text % {"count": count, "category": label}


@dataclass(frozen=True)
class ListedItem:
    subject: str
    type: str
    joined: str
    url: str | None  # the notification's admin page, for who may view it


@dataclass(frozen=True)
class Gathered:
    """One carrier's items as its page lists them."""

    heading: str
    items: list[ListedItem]
    more: str  # "…and 12 more.", or nothing when every item is listed


@dataclass(frozen=True)
class Carrier:
    """One digest an item was gathered into, as the item's page names it."""

    text: str
    url: str | None


def _item(row: DigestItem, *, language: str, linked: bool) -> ListedItem:
    notification = row.notification
    key = notification.message_key or notification.type
    subject = catalogue.render_or_key(
        key=key, params=notification.message_params, language=language
    ).subject
    url = None
    if linked:
        url = reverse("admin:notifications_notification_change", args=[notification.pk])
    joined = moment(row.joined_at)
    return ListedItem(subject=subject, type=notification.type, joined=joined, url=url)


def gathered(carrier: NotificationDelivery, *, linked: bool, heading) -> Gathered:
    """carrier's items, newest first (SHOWN of them), in the active language, under
    heading(total); linked: each links to its notification's page."""
    rows = (
        DigestItem.objects.filter(carrier=carrier)
        .select_related("notification")
        .order_by("-joined_at", "-notification_id")
    )
    total = rows.count()
    language = get_language()
    items = [_item(row, language=language, linked=linked) for row in rows[:SHOWN]]
    left = total - len(items)
    more = ""
    if left > 0:
        # The digest's own words (digests.render), for the same thing.
        more = ngettext("…and %(count)d more.", "…and %(count)d more.", left) % {"count": left}
    return Gathered(heading=heading(total), items=items, more=more)


def for_delivery(delivery: NotificationDelivery, *, linked: bool) -> list[Gathered]:
    """The sections a delivery's page shows: its items, when it is a carrier."""
    if not is_carrier(delivery.notification):
        return []

    def heading(total: int) -> str:
        return ngettext(
            "In this digest: %(count)d notification, newest first",
            "In this digest: %(count)d notifications, newest first",
            total,
        ) % {"count": total}

    return [gathered(delivery, linked=linked, heading=heading)]


def for_notification(notification: Notification, *, linked: bool) -> list[Gathered]:
    """The sections a notification's page shows: a carrier's items, channel by channel (they
    may differ: a channel's digest may have been claimed while another's was still open)."""
    if not is_carrier(notification):
        return []
    sections = []
    for carrier in notification.deliveries.order_by("channel"):

        def heading(total: int, channel: str = carrier.channel) -> str:
            return ngettext(
                "In the %(channel)s digest: %(count)d notification, newest first",
                "In the %(channel)s digest: %(count)d notifications, newest first",
                total,
            ) % {"count": total, "channel": channel}

        sections.append(gathered(carrier, linked=linked, heading=heading))
    return sections


def carriers_of(notification: Notification, *, linked: bool) -> list[Carrier]:
    """The digests notification was gathered into (none for most), oldest first: where its
    channels went when it has no delivery of its own on them."""
    rows = (
        DigestItem.objects.filter(notification=notification)
        .select_related("carrier")
        .order_by("carrier__created_at", "carrier_id")
    )
    found = []
    for row in rows:
        carrier = row.carrier
        text = gettext("Digest #%(id)s · %(channel)s · %(status)s") % {
            "id": carrier.pk,
            "channel": carrier.channel,
            "status": carrier.shown_status.label,
        }
        url = None
        if linked:
            url = reverse("admin:notifications_notificationdelivery_change", args=[carrier.pk])
        found.append(Carrier(text=text, url=url))
    return found
