from __future__ import annotations

from datetime import timedelta

from django import template
from django.conf import settings
from django.utils import formats
from django.utils.translation import gettext as _

from notifications import catalogue
from notifications.models import NotificationDelivery

register = template.Library()


@register.filter
def duration(value: timedelta) -> str:
    """30 s, 2 min, 1 h 30 min: the policy's waits, read at a glance."""
    seconds = round(value.total_seconds())
    if seconds < 60:
        return _("%(n)d s") % {"n": seconds}
    if seconds < 3600:
        minutes, rest = divmod(seconds, 60)
        text = _("%(n)d min") % {"n": minutes}
        return text if not rest else f"{text} {_('%(n)d s') % {'n': rest}}"
    hours, rest = divmod(seconds, 3600)
    text = _("%(n)d h") % {"n": hours}
    return text if not rest else f"{text} {_('%(n)d min') % {'n': rest // 60}}"


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


@register.filter
def depth_count(depth, name: str) -> str:
    """One count of a QueueDepth, with "+" when it stopped at the limit: "1000+"."""
    count = getattr(depth, name)
    shown = formats.number_format(count, use_l10n=True, force_grouping=True)
    return f"{shown}+" if depth.at_limit(name) else shown
