"""Settings read from the environment: each value parsed and held to its bounds.

A bad value raises SettingError, whose message is one line an operator can act on: the
variable and its value, what is wrong with it, and what to set instead. The entry points
(manage.py, deploy/gunicorn.conf.py) print that line alone and exit non-zero.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Iterable
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

GENERATE_SECRET = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


class SettingError(ImproperlyConfigured):
    """A setting from the environment is wrong; the message says which, why, and the fix."""


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    return raw


def _shown(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def boolean(name: str, *, default: bool) -> bool:
    raw = _raw(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise SettingError(f"{name}={raw!r} is not a boolean; use 1 or 0.")


def _bounded(kind, name: str, *, default, minimum, maximum, why: str):
    raw = _raw(name)
    if raw is None:
        return default
    noun = "a whole number" if kind is int else "a number"
    allowed = (
        f"set {noun} from {_shown(minimum)} to {_shown(maximum)}, "
        f"or leave it unset for {_shown(default)}"
    )
    try:
        value = kind(raw.strip())
    except ValueError:
        raise SettingError(f"{name}={raw!r} is not {noun}; {allowed}.") from None
    if not math.isfinite(value):  # float() reads "inf" and "nan"
        raise SettingError(f"{name}={raw!r} is not a finite number; {allowed}.")
    if value < minimum:
        raise SettingError(f"{name}={raw!r} must be at least {_shown(minimum)}; {allowed}.")
    if value > maximum:
        reason = f" ({why})" if why else ""
        raise SettingError(f"{name}={raw!r} must be at most {_shown(maximum)}{reason}; {allowed}.")
    return value


def whole_number(name: str, *, default: int, minimum: int, maximum: int, why: str = "") -> int:
    """An int from minimum to maximum; why says where the maximum comes from."""
    return _bounded(int, name, default=default, minimum=minimum, maximum=maximum, why=why)


def number(name: str, *, default: float, minimum: float, maximum: float, why: str = "") -> float:
    """A finite float from minimum to maximum; why says where the maximum comes from."""
    return _bounded(float, name, default=default, minimum=minimum, maximum=maximum, why=why)


def text(name: str, *, default: str = "") -> str:
    raw = _raw(name)
    return default if raw is None else raw.strip()


def names(name: str, *, default: list[str]) -> list[str]:
    """A comma-separated list."""
    raw = _raw(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def ports(name: str, *, default: tuple[int, ...]) -> tuple[int, ...]:
    """A comma-separated list of TCP ports, each from 1 to 65535."""
    raw = _raw(name)
    if raw is None:
        return default
    shown = ",".join(str(port) for port in default)
    found = []
    for item in names(name, default=[]):
        if not item.isdigit() or not 0 < int(item) < 65536:
            raise SettingError(
                f"{name}={raw!r}: {item!r} is not a port from 1 to 65535; set a comma-separated "
                f"list of them, or leave it unset for {shown}."
            )
        found.append(int(item))
    return tuple(dict.fromkeys(found))


def choices(name: str, *, known: Iterable[str]) -> list[str]:
    """A comma-separated list of names, each one of known (empty when unset)."""
    known = list(known)
    chosen = names(name, default=[])
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise SettingError(
            f"{name} names unknown {', '.join(unknown)}; use a comma-separated list of: "
            f"{', '.join(known)}."
        )
    return chosen


def choice(name: str, *, known: Iterable[str], default: str = "") -> str:
    """One of known, compared in lower case (default when unset)."""
    known = list(known)
    raw = _raw(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in known:
        raise SettingError(f"{name}={raw!r} is not one of: {', '.join(known)}.")
    return value


def secret(name: str, *, min_length: int) -> str:
    """A bearer secret: unset, or at least min_length characters (a short one is guessed)."""
    value = text(name)
    if value and len(value) < min_length:
        raise SettingError(
            f"{name} has {len(value)} characters; use at least {min_length}, so it cannot be "
            f"guessed. Generate one with: {GENERATE_SECRET}"
        )
    return value


def url(name: str, *, default: str) -> str:
    """An http(s) URL with a host."""
    value = text(name, default=default)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - reading it validates it
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in {"http", "https"} or not parts.hostname:
        raise SettingError(f"{name}={value!r} is not an http(s) URL; unset it for {default}.")
    return value


def origin(name: str) -> str:
    """An http(s) origin (scheme, host and optional port; no path), or "" when unset."""
    value = text(name).rstrip("/")
    if not value:
        return ""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - reading it validates it
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in {"http", "https"}
        or not parts.hostname
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise SettingError(
            f"{name}={value!r} is not an origin; use https://host or https://host:port, "
            "with no path."
        )
    return value


def networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """A comma-separated list of networks in CIDR notation."""
    found = []
    for part in names(name, default=[]):
        try:
            found.append(ipaddress.ip_network(part))
        except ValueError:
            raise SettingError(
                f"{name}: {part!r} is not a network; use CIDR, e.g. 10.0.0.0/8."
            ) from None
    return found
