"""Delivery channels, by name, from settings.DELIVERY_CHANNELS."""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from transports.base import Channel


@cache
def _load(path: str) -> Channel:
    """Build the channel once: from the settings it reads, when it has from_settings()."""
    kind = import_string(path)
    build = getattr(kind, "from_settings", None)
    return build() if build is not None else kind()


def get(name: str) -> Channel | None:
    """Return the channel configured under name, or None when there is none."""
    path = settings.DELIVERY_CHANNELS.get(name)
    return _load(path) if path else None


def configured() -> dict[str, Channel]:
    return {name: _load(path) for name, path in settings.DELIVERY_CHANNELS.items()}


def forget_built(**kwargs) -> None:
    """Build every channel again at its next use (a setting it read may have changed)."""
    _load.cache_clear()
