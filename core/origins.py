"""The site's origin (SITE_ORIGIN) as links in messages carry it."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=4)
def ascii_origin(origin: str) -> str:
    """origin as a mail header may carry it: an internationalised host in its IDNA form."""
    if origin.isascii():
        return origin
    scheme, slashes, rest = origin.partition("://")
    host, colon, port = rest.partition(":")
    return f"{scheme}{slashes}{host.encode('idna').decode('ascii')}{colon}{port}"
