"""`manage.py check` for the channels a site runs (DELIVERY_CHANNELS): each one loads, is a
Channel under the name it is configured as, and says what is wrong with its own settings."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register
from django.utils.module_loading import import_string

from transports import get
from transports.base import Channel


@register()
def check_channels(app_configs=None, **kwargs):
    configured = getattr(settings, "DELIVERY_CHANNELS", None)
    if not isinstance(configured, dict):
        return [
            Error(
                "DELIVERY_CHANNELS must be a dict of channel name → class path.",
                id="transports.E001",
            )
        ]
    messages = []
    for name, path in configured.items():
        try:
            kind = import_string(path)
        except ImportError as exc:
            messages.append(
                Error(
                    f"The channel {name!r} names {path!r}, which cannot be imported: {exc}",
                    id="transports.E002",
                )
            )
            continue
        if not (isinstance(kind, type) and issubclass(kind, Channel)):
            messages.append(
                Error(
                    f"The channel {name!r} names {path!r}, which is no Channel class.",
                    id="transports.E003",
                )
            )
            continue
        if getattr(kind, "name", None) != name:
            messages.append(
                Error(
                    f"The channel configured as {name!r} ({path}) calls itself "
                    f"{getattr(kind, 'name', None)!r}: its rows would be sent under one name "
                    "and chosen under the other.",
                    hint=f"Configure it as {getattr(kind, 'name', None)!r}, or set its name.",
                    id="transports.E004",
                )
            )
            continue
        # Built as the drain builds it, from its settings.
        messages += get(name).check()
    return messages
