"""Who is asking: the client address that rate limits count against.

Behind a reverse proxy every request arrives from the proxy's address, so REMOTE_ADDR alone
would put all visitors in one bucket. `X-Forwarded-For` is read only when the operator says how
many proxies stand in front of the app (V10R_TRUSTED_PROXIES): any client can send that header,
and only the entries our own proxies wrote can be believed. IPv6 clients are counted per /64,
the block one subscriber line or one host usually gets: counting per address would hand an
attacker 2^64 fresh buckets.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings

IPV6_PREFIX = 64
UNKNOWN = "unknown"


def address(request) -> str:
    """Return the rate-limit bucket of request's client: an IPv4 address or an IPv6 /64."""
    return bucket(peer(request))


def peer(request) -> str:
    """Return the client's address as our outermost trusted proxy saw it."""
    remote = request.META.get("REMOTE_ADDR", "")
    trusted = settings.V10R_TRUSTED_PROXIES
    if not trusted:
        return remote
    forwarded = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [hop for hop in forwarded if hop]
    if not forwarded:
        return remote
    # Each proxy appends the address it was connected from, so the entry written by the
    # outermost of our N proxies is the N-th from the right; everything left of it came from
    # the client and proves nothing. A shorter list means a hop did not append: its leftmost
    # entry is still one a trusted proxy wrote.
    return forwarded[-trusted] if len(forwarded) >= trusted else forwarded[0]


def bucket(raw: str) -> str:
    """Return the bucket for an address: itself for IPv4, its /64 for IPv6."""
    text = raw.strip()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]  # "[2001:db8::1]:443", as some proxies write it
    elif text.count(":") == 1:
        text = text.partition(":")[0]  # "192.0.2.1:5123"
    try:
        ip = ipaddress.ip_address(text.partition("%")[0])
    except ValueError:
        return UNKNOWN
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        network = ipaddress.IPv6Network((ip, IPV6_PREFIX), strict=False)
        return str(network)
    return str(ip)
