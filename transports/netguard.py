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

from django.utils.translation import gettext, gettext_noop

type Address = IPv4Address | IPv6Address
# socket.getaddrinfo's shape: (host, port, *, type=...) -> [(family, type, proto, name, sockaddr)]
type Resolver = Callable[..., list[tuple]]

SCHEMES = {"http": 80, "https": 443}

_LOOPBACK = (IPv4Network("127.0.0.0/8"), IPv6Network("::1/128"))

_V4_DENIED: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(network), reason)
    for network, reason in [
        ("0.0.0.0/8", gettext_noop("'this network' (0.0.0.0 reaches this host)")),
        ("10.0.0.0/8", gettext_noop("a private network")),
        ("100.64.0.0/10", gettext_noop("carrier-grade NAT (and Alibaba Cloud's metadata service)")),
        ("127.0.0.0/8", gettext_noop("loopback")),
        (
            "169.254.0.0/16",
            gettext_noop("link-local (cloud metadata services live at 169.254.169.254)"),
        ),
        ("172.16.0.0/12", gettext_noop("a private network")),
        (
            "192.0.0.0/24",
            gettext_noop("IETF protocol assignments (Oracle Cloud's metadata service)"),
        ),
        ("192.0.2.0/24", gettext_noop("documentation (TEST-NET-1)")),
        ("192.88.99.0/24", gettext_noop("the retired 6to4 relay anycast")),
        ("192.168.0.0/16", gettext_noop("a private network")),
        ("198.18.0.0/15", gettext_noop("benchmarking")),
        ("198.51.100.0/24", gettext_noop("documentation (TEST-NET-2)")),
        ("203.0.113.0/24", gettext_noop("documentation (TEST-NET-3)")),
        ("224.0.0.0/4", gettext_noop("multicast")),
        ("255.255.255.255/32", gettext_noop("broadcast")),
        ("240.0.0.0/4", gettext_noop("reserved")),
        # Public by its number, but on Azure it is the host's own service endpoint.
        ("168.63.129.16/32", gettext_noop("Azure's host service")),
    ]
)

# Checked before the IPv4-carrying forms, since both read as IPv4-compatible addresses.
_V6_SPECIAL: tuple[tuple[IPv6Network, str], ...] = (
    (IPv6Network("::/128"), gettext_noop("the unspecified address")),
    (IPv6Network("::1/128"), gettext_noop("loopback")),
)
_V6_DENIED: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(network), reason)
    for network, reason in [
        ("64:ff9b:1::/48", gettext_noop("local-use NAT64")),
        ("100::/64", gettext_noop("discard-only")),
        ("2001::/32", gettext_noop("Teredo")),
        ("2001:2::/48", gettext_noop("benchmarking")),
        ("2001:10::/28", gettext_noop("ORCHID")),
        ("2001:20::/28", gettext_noop("ORCHIDv2")),
        ("2001:db8::/32", gettext_noop("documentation")),
        ("3fff::/20", gettext_noop("documentation")),
        ("5f00::/16", gettext_noop("segment routing (SRv6)")),
        (
            "fc00::/7",
            gettext_noop("a unique local address (AWS's metadata service is fd00:ec2::254)"),
        ),
        ("fe80::/10", gettext_noop("link-local")),
        ("fec0::/10", gettext_noop("site-local")),
        ("ff00::/8", gettext_noop("multicast")),
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


class Reason(str):
    """A message in English, as the drain stores it (error messages are written once, for
    every reader), that can also say itself in the active language, for the admin's form."""

    template: str
    params: dict

    def __new__(cls, template: str, /, **params) -> Reason:
        made = super().__new__(cls, template % params if params else template)
        made.template, made.params = template, params
        return made

    def translated(self) -> str:
        params = {
            key: value.translated() if isinstance(value, Reason) else value
            for key, value in self.params.items()
        }
        text = gettext(self.template)
        return text % params if params else text


class Refused(ValueError):
    """A URL or an address a webhook may not be sent to, and why (str() in English)."""

    def __init__(self, template: str, /, **params) -> None:
        self.reason = Reason(template, **params)
        super().__init__(str(self.reason))

    def translated(self) -> str:
        return self.reason.translated()


@dataclass(frozen=True)
class Destination:
    """A URL taken apart the way the client needs it."""

    scheme: str
    host: str  # ASCII, lower case, an IPv6 address without its brackets
    port: int
    target: str  # path and query, percent-encoded, at least "/"


def denied(address: Address | str, *, allow_loopback: bool = False) -> Reason | None:
    """Return why address may not be connected to, or None when it may."""
    if isinstance(address, str):
        address = ipaddress.ip_address(address)
    if allow_loopback and any(address in network for network in _LOOPBACK):
        return None
    if address.version == 4:
        return next((Reason(why) for network, why in _V4_DENIED if address in network), None)
    if address.scope_id:
        return Reason(gettext_noop("a scoped (interface-bound) address"))
    for network, why in _V6_SPECIAL:
        if address in network:
            return Reason(why)
    for network, shift, form in _V6_CARRIERS:
        if address in network:
            carried = IPv4Address((int(address) >> shift) & 0xFFFF_FFFF)
            why = denied(carried, allow_loopback=allow_loopback)
            if why is None:
                return None
            return Reason(
                gettext_noop("%(form)s, carrying %(carried)s: %(why)s"),
                form=form,
                carried=str(carried),
                why=why,
            )
    for network, why in _V6_DENIED:
        if address in network:
            return Reason(why)
    if address not in _GLOBAL_UNICAST:
        return Reason(gettext_noop("reserved (not global unicast)"))
    return None


def parse_url(url: str) -> Destination:
    """Take an http(s) URL apart, or raise Refused: no other scheme, no user or password."""
    if not isinstance(url, str) or _UNSAFE_IN_URL.search(url):
        raise Refused(gettext_noop("The URL contains spaces, control characters or backslashes."))
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # brackets around something that is not an IPv6 address
        raise Refused(gettext_noop("The URL cannot be read: %(error)s"), error=str(exc)) from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise Refused(gettext_noop("This is not a full URL: write it with https:// in front."))
    if scheme not in SCHEMES:
        raise Refused(
            gettext_noop("Only http and https URLs are allowed, not %(scheme)s."),
            scheme=repr(parts.scheme),
        )
    if "@" in parts.netloc:
        raise Refused(gettext_noop("The URL may not carry a user name or password."))
    try:
        port = SCHEMES[scheme] if parts.port is None else parts.port
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise Refused(gettext_noop("The URL's port is not a number from 1 to 65535."))
    host = _ascii_host(parts.hostname or "", bracketed=parts.netloc.startswith("["))
    target = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if parts.query:
        target += "?" + quote(parts.query, safe="/?%:@!$&'()*+,;=-._~")
    return Destination(scheme=scheme, host=host, port=port, target=target)


INVALID_HOST = gettext_noop("%(host)s is not a valid host name.")


def _ascii_host(host: str, *, bracketed: bool) -> str:
    if not host:
        raise Refused(gettext_noop("The URL has no host."))
    if bracketed:
        try:
            return str(IPv6Address(host))
        except ValueError:
            raise Refused(
                gettext_noop("%(host)s is not an IPv6 address."), host=repr(host)
            ) from None
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise Refused(INVALID_HOST, host=repr(host)) from None
    if not _HOST_NAME.fullmatch(host):
        raise Refused(INVALID_HOST, host=repr(host))
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
            raise Refused(
                gettext_noop("%(host)s may not be reached: %(why)s."), host=shown, why=why
            )
    return found


@dataclass(frozen=True)
class Guard:
    """What the HTTP client checks before it connects: loopback allowed only for tests and
    local development, and the resolver (a test may pass its own)."""

    allow_loopback: bool = False
    resolver: Resolver = socket.getaddrinfo

    def resolve(self, host: str, port: int) -> list[Address]:
        return resolve(host, port, allow_loopback=self.allow_loopback, resolver=self.resolver)
