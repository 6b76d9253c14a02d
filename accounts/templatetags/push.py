"""{% push_control %}: the preference centre's "Push notifications on this browser" section.

A tag rather than context from the centre's view, so the section carries what it needs (the
site's public key, its two endpoints) wherever it is included."""

from __future__ import annotations

from django import template
from django.conf import settings

register = template.Library()


@register.inclusion_tag("accounts/push_control.html", takes_context=True)
def push_control(context):
    return {
        # Empty when the site has no VAPID key pair: push is off, and the section says so.
        "public_key": settings.WEBPUSH_VAPID_PUBLIC_KEY,
        "csrf_token": context.get("csrf_token"),
    }
