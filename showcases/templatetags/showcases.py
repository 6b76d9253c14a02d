from __future__ import annotations

from datetime import timedelta

from django import template
from django.conf import settings
from django.utils import formats
from django.utils.translation import pgettext

from core.templatetags import units
from notifications.models import NotificationDelivery, ShownStatus
from recipients import catalogue

register = template.Library()


# The site's one way of writing a duration ("1 min 9 s", "1 мин 9 с"), the console's too.
register.filter("duration", units.duration)


@register.simple_tag(takes_context=True)
def rendered_message(context, delivery: NotificationDelivery) -> str:
    """The notification's text in the page's language."""
    notification = delivery.notification
    request = context.get("request")
    language = getattr(request, "LANGUAGE_CODE", "en")
    return catalogue.render_or_key(
        key=notification.message_key, params=notification.message_params, language=language
    ).body


@register.simple_tag
def feed_note(delivery: NotificationDelivery, loop) -> str:
    """What a visitor's demo row waits for, or what became of it (queue_demo.explain)."""
    from showcases import queue_demo

    return queue_demo.explain(delivery, loop=loop, max_attempts=settings.DELIVERY_MAX_ATTEMPTS)


@register.simple_tag
def pickup_note(delivery: NotificationDelivery) -> str:
    """ "picked up in 12 ms" under a visitor's demo row, or "" while the wait is not known
    (queue_demo.pickup says when)."""
    from showcases import queue_demo

    wait = queue_demo.pickup(delivery)
    if wait is None:
        return ""
    if wait < timedelta(milliseconds=0.5):
        # Rounded, it would read "0 ms": as if no time had passed at all.
        return pgettext("demo pickup", "picked up in under %(wait)s") % {
            "wait": brief_duration(timedelta(milliseconds=1))
        }
    return pgettext("demo pickup", "picked up in %(wait)s") % {"wait": brief_duration(wait)}


@register.filter
def depth_count(depth, name: str) -> str:
    """One count of a QueueDepth, with "+" when it stopped at the limit: "1000+"."""
    count = getattr(depth, name)
    shown = formats.number_format(count, use_l10n=True, force_grouping=True)
    return f"{shown}+" if depth.at_limit(name) else shown


def brief_duration(value: timedelta) -> str:
    """Under a second in whole milliseconds ("12 ms"), else as every other duration on the
    site (core/templatetags/units)."""
    milliseconds = round(value.total_seconds() * 1000)
    if milliseconds >= 1000:
        return units.duration(value)
    count = formats.number_format(milliseconds)
    return (pgettext("unit of time", "%(count)s ms") % {"count": count}).replace(" ", "\u00a0")


@register.filter
def run_duration(value) -> str:
    """A job run's duration: a demo run takes a few milliseconds (brief_duration)."""
    if value is None or value == "":
        return ""
    return brief_duration(value)


@register.filter
def shown_counts(result: dict) -> list[tuple[str, object]]:
    """The demo job's result ({state: count}, stored with the states' values for operators and
    /metrics) as people read it: each state's label, in the states' own order."""
    labels = dict(ShownStatus.choices)
    known = [(labels[state], result[state]) for state in ShownStatus.values if state in result]
    return known + [(state, count) for state, count in result.items() if state not in labels]
