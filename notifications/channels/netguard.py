"""Which addresses a webhook may reach: public ones only, checked where the socket connects.

A webhook's URL is typed in by a user, so without this the worker would POST wherever it is
told: to the database on 10.0.0.5, to a cloud's metadata service on 169.254.169.254 (which
hands out credentials), to an admin port on 127.0.0.1. The check runs on what the host name
resolves to, once per connection, and the connection is made to the very address that was
checked; checking a name and letting the socket library resolve it again would leave a
window for DNS rebinding, where the second answer is the private one.

The denied networks are listed here rather than taken from ipaddress's is_private and
is_global flags: those have changed between Python patch releases, and the list is what a
review needs to read. IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64,
6to4) are judged by the IPv4 address they carry.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from urllib.parse import quote, urlsplit

type Address = IPv4Address | IPv6Address
# socket.getaddrinfo's shape: (host, port, *, type=...) -> [(family, type, proto, name, sockaddr)]
type Resolver = Callable[..., list[tuple]]

SCHEMES = {"http": 80, "https": 443}

_LOOPBACK = (IPv4Network("127.0.0.0/8"), IPv6Network("::1/128"))

_V4_DENIED: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(network), reason)
    for network, reason in [
        ("0.0.0.0/8", "'this network' (0.0.0.0 reaches this host)"),
        ("10.0.0.0/8", "a private network"),
        ("100.64.0.0/10", "carrier-grade NAT (and Alibaba Cloud's metadata service)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local (cloud metadata services live at 169.254.169.254)"),
        ("172.16.0.0/12", "a private network"),
        ("192.0.0.0/24", "IETF protocol assignments (Oracle Cloud's metadata service)"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("192.88.99.0/24", "the retired 6to4 relay anycast"),
        ("192.168.0.0/16", "a private network"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "broadcast"),
        ("240.0.0.0/4", "reserved"),
        # Public by its number, but on Azure it is the host's own service endpoint.
        ("168.63.129.16/32", "Azure's host service"),
    ]
)

# Checked before the IPv4-carrying forms, since both read as IPv4-compatible addresses.
_V6_SPECIAL: tuple[tuple[IPv6Network, str], ...] = (
    (IPv6Network("::/128"), "the unspecified address"),
    (IPv6Network("::1/128"), "loopback"),
)
_V6_DENIED: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(network), reason)
    for network, reason in [
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/32", "Teredo"),
        ("2001:2::/48", "benchmarking"),
        ("2001:10::/28", "ORCHID"),
        ("2001:20::/28", "ORCHIDv2"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing (SRv6)"),
        ("fc00::/7", "a unique local address (AWS's metadata service is fd00:ec2::254)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local"),
        ("ff00::/8", "multicast"),
    ]
)

# IPv6 addresses that carry an IPv4 address, and where: the bits to shift it down by.
_V6_CARRIERS: tuple[tuple[IPv6Network, int, str], ...] = (
    (IPv6Network("::ffff:0:0/96"), 0, "IPv4-mapped"),
    (IPv6Network("::/96"), 0, "IPv4-compatible"),
    (IPv6Network("64:ff9b::/96"), 0, "NAT64"),
    (IPv6Network("2002::/16"), 80, "6to4"),
)
_GLOBAL_UNICAST = IPv6Network("2000::/3")

# What a host name may be spelled with once in ASCII (IDNA) form.
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
# A host the C library would read as an IPv4 address in one of inet_aton's spellings:
# decimal (2130706433), octal (0177.0.0.1), hex (0x7f.1), or short (127.1).
_NUMERIC_HOST = re.compile(r"[0-9a-fx.]+")
_UNSAFE_IN_URL = re.compile(r"[\x00-\x20\x7f\\]")


class Refused(ValueError):
    """A URL or an address a webhook may not be sent to, and why."""


@dataclass(frozen=True)
class Destination:
    """A URL taken apart the way the client needs it."""

    scheme: str
    host: str  # ASCII, lower case, an IPv6 address without its brackets
    port: int
    target: str  # path and query, percent-encoded, at least "/"


def denied(address: Address | str, *, allow_loopback: bool = False) -> str | None:
    """Return why address may not be connected to, or None when it may."""
    if isinstance(address, str):
        address = ipaddress.ip_address(address)
    if allow_loopback and any(address in network for network in _LOOPBACK):
        return None
    if address.version == 4:
        return next((reason for network, reason in _V4_DENIED if address in network), None)
    if address.scope_id:
        return "a scoped (interface-bound) address"
    for network, reason in _V6_SPECIAL:
        if address in network:
            return reason
    for network, shift, form in _V6_CARRIERS:
        if address in network:
            carried = IPv4Address((int(address) >> shift) & 0xFFFF_FFFF)
            why = denied(carried, allow_loopback=allow_loopback)
            return f"{form}, carrying {carried}: {why}" if why else None
    for network, reason in _V6_DENIED:
        if address in network:
            return reason
    if address not in _GLOBAL_UNICAST:
        return "reserved (not global unicast)"
    return None


def parse_url(url: str) -> Destination:
    """Take an http(s) URL apart, or raise Refused: no other scheme, no user or password."""
    if not isinstance(url, str) or _UNSAFE_IN_URL.search(url):
        raise Refused("The URL contains spaces, control characters or backslashes.")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # brackets around something that is not an IPv6 address
        raise Refused(f"The URL cannot be read: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise Refused(f"Only http and https URLs are allowed, not {parts.scheme or 'none'!r}.")
    if "@" in parts.netloc:
        raise Refused("The URL may not carry a user name or password.")
    try:
        port = SCHEMES[scheme] if parts.port is None else parts.port
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise Refused("The URL's port is not a number from 1 to 65535.")
    host = _ascii_host(parts.hostname or "", bracketed=parts.netloc.startswith("["))
    target = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if parts.query:
        target += "?" + quote(parts.query, safe="/?%:@!$&'()*+,;=-._~")
    return Destination(scheme=scheme, host=host, port=port, target=target)


def _ascii_host(host: str, *, bracketed: bool) -> str:
    if not host:
        raise Refused("The URL has no host.")
    if bracketed:
        try:
            return str(IPv6Address(host))
        except ValueError:
            raise Refused(f"{host!r} is not an IPv6 address.") from None
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise Refused(f"{host!r} is not a valid host name.") from None
    if not _HOST_NAME.fullmatch(host):
        raise Refused(f"{host!r} is not a valid host name.")
    return host


def addresses(host: str, port: int, *, resolver: Resolver = socket.getaddrinfo) -> list[Address]:
    """Return every address host stands for, each once, in the resolver's order.

    An address literal, in any spelling the C library accepts, is read here, without the
    resolver: it is the address the socket would connect to.
    """
    literal = address_literal(host)
    if literal is not None:
        return [literal]
    found: list[Address] = []
    for *_, sockaddr in resolver(host, port, type=socket.SOCK_STREAM):
        address = ipaddress.ip_address(sockaddr[0])
        if address not in found:
            found.append(address)
    if not found:
        raise socket.gaierror(socket.EAI_NONAME, f"{host} has no address")
    return found


def address_literal(host: str) -> Address | None:
    """Return the address host spells, or None when it is a name to resolve."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_HOST.fullmatch(host):
        try:
            return IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def resolve(
    host: str, port: int, *, allow_loopback: bool = False, resolver: Resolver = socket.getaddrinfo
) -> list[Address]:
    """Return the addresses host resolves to, once, after checking every one of them.

    Refused when any may not be reached: a name that answers with a public and a private
    address is refused whole, since which one a later connection would get is not ours to
    choose. socket.gaierror when the name does not resolve.
    """
    found = addresses(host, port, resolver=resolver)
    for address in found:
        if why := denied(address, allow_loopback=allow_loopback):
            shown = host if str(address) == host else f"{host} ({address})"
            raise Refused(f"{shown} may not be reached: {why}.")
    return found


@dataclass(frozen=True)
class Guard:
    """What the HTTP client checks before it connects: loopback allowed only for tests and
    local development, and the resolver (a test may pass its own)."""

    allow_loopback: bool = False
    resolver: Resolver = socket.getaddrinfo

    def resolve(self, host: str, port: int) -> list[Address]:
        return resolve(host, port, allow_loopback=self.allow_loopback, resolver=self.resolver)
