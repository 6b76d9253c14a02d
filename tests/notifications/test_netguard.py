"""Webhooks reach public addresses only: the address table, the URL rules, the spellings of
127.0.0.1 that the C library accepts, and a DNS rebinding attempt."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest

from tests.httppeers import HTTPPeer
from transports import http, netguard

PUBLIC = "93.184.215.14"


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        # IPv4
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),  # all of 127/8, not just .1
        ("0.0.0.0", "this network"),  # connecting to it reaches this host
        ("0.1.2.3", "this network"),
        ("10.0.0.1", "private"),
        ("10.255.255.255", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),  # the top of 172.16/12
        ("192.168.1.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.100.100.200", "Alibaba"),  # Alibaba Cloud's metadata service, inside 100.64/10
        ("169.254.169.254", "metadata"),  # AWS, GCP, Azure, OpenStack metadata
        ("169.254.0.1", "link-local"),
        ("192.0.0.192", "Oracle"),
        ("192.0.2.10", "documentation"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("168.63.129.16", "Azure"),
        # IPv6
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "IPv4-mapped, carrying 127.0.0.1: loopback"),
        ("::ffff:10.0.0.1", "IPv4-mapped, carrying 10.0.0.1: a private network"),
        ("::ffff:169.254.169.254", "IPv4-mapped, carrying 169.254.169.254"),
        ("::127.0.0.1", "IPv4-compatible, carrying 127.0.0.1: loopback"),
        ("64:ff9b::a9fe:a9fe", "NAT64, carrying 169.254.169.254"),
        ("64:ff9b::7f00:1", "NAT64, carrying 127.0.0.1"),
        ("64:ff9b:1::1", "local-use NAT64"),
        ("2002:7f00:1::", "6to4, carrying 127.0.0.1"),
        ("2002:a00:1::1", "6to4, carrying 10.0.0.1"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),
        ("fc00::1", "unique local"),
        ("fd00:ec2::254", "unique local"),  # AWS's IPv6 metadata service
        ("fe80::1", "link-local"),
        ("fe80::1%1", "scoped"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("100::1", "discard-only"),
        ("::ffff:0:7f00:1", "reserved"),  # IPv4-translated (SIIT): not global unicast
        ("4000::1", "reserved"),
        # Public: allowed
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        (PUBLIC, None),
        ("11.0.0.1", None),  # just past 10/8
        ("172.32.0.1", None),  # just past 172.16/12
        ("100.128.0.1", None),  # just past 100.64/10
        ("169.255.0.1", None),  # just past 169.254/16
        ("192.169.0.1", None),  # just past 192.168/16
        ("2606:4700:4700::1111", None),
        ("2a00:1450:4001::200e", None),
        ("::ffff:8.8.8.8", None),  # carries a public IPv4 address
        ("64:ff9b::808:808", None),  # NAT64 for 8.8.8.8
        ("2002:808:808::1", None),  # 6to4 for 8.8.8.8
    ],
)
def test_each_address_is_allowed_or_refused_with_its_reason(address, reason):
    found = netguard.denied(address)
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", False),  # reaches this host too, but is not loopback: never allowed
        ("10.0.0.1", False),
        ("169.254.169.254", False),
        ("fd00:ec2::254", False),
    ],
)
def test_allowing_loopback_allows_loopback_and_nothing_else(address, allowed):
    assert (netguard.denied(address, allow_loopback=True) is None) is allowed


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/hook", "Only http and https"),
        ("file:///etc/passwd", "Only http and https"),
        ("gopher://example.com/", "Only http and https"),
        ("javascript:alert(1)", "Only http and https"),
        ("//example.com/hook", "not a full URL"),
        ("http://user:secret@example.com/", "user name or password"),
        ("http://user@example.com/", "user name or password"),
        ("http://example.com@127.0.0.1/", "user name or password"),
        ("http:///hook", "no host"),
        ("http://exa mple.com/", "spaces"),
        ("http://example.com\\@127.0.0.1/", "backslashes"),
        ("http://example.com/\r\nX-Injected: 1", "control characters"),
        ("http://example.com:99999/", "port"),
        ("http://example.com:0/", "port"),
        ("http://example.com:http/", "port"),
        ("http://[not-an-address]/", "cannot be read"),
        ("http://exa_mple..com/", "not a valid host name"),
        ("http://-example.com/", "not a valid host name"),
    ],
)
def test_urls_outside_the_rules_are_refused(url, why):
    with pytest.raises(netguard.Refused, match=why):
        netguard.parse_url(url)


@pytest.mark.parametrize(
    ("url", "destination"),
    [
        ("https://Example.COM/hook?a=1&b=2", ("https", "example.com", 443, "/hook?a=1&b=2")),
        ("http://example.com", ("http", "example.com", 80, "/")),
        ("HTTP://example.com:8080/x#fragment", ("http", "example.com", 8080, "/x")),
        ("https://bücher.example/", ("https", "xn--bcher-kva.example", 443, "/")),
        ("https://[2606:4700::1]:8443/p", ("https", "2606:4700::1", 8443, "/p")),
        ("https://example.com/ünï", ("https", "example.com", 443, "/%C3%BCn%C3%AF")),
    ],
)
def test_urls_within_the_rules_are_taken_apart(url, destination):
    parsed = netguard.parse_url(url)
    assert (parsed.scheme, parsed.host, parsed.port, parsed.target) == destination


def refuse_to_resolve(*args, **kwargs):
    raise AssertionError("an address literal was sent to the resolver")


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",  # decimal
        "http://0177.0.0.1/",  # octal
        "http://0x7f.1/",  # hex, short
        "http://0x7f000001/",  # hex, whole
        "http://017700000001/",  # octal, whole
        "http://127.1/",  # short
        "http://127.0.1/",
        "http://0/",  # 0.0.0.0
        "http://[::1]/",
        "http://[::ffff:7f00:1]/",  # mapped, in hex
        "http://[0:0:0:0:0:ffff:127.0.0.1]/",
    ],
)
def test_every_spelling_of_a_local_address_is_read_as_the_c_library_would_and_refused(url):
    host = netguard.parse_url(url).host
    # Read here, never handed to a resolver: it is the address a socket would connect to.
    with pytest.raises(netguard.Refused):
        netguard.resolve(host, 80, resolver=refuse_to_resolve)
    # And the C library agrees on what it means.
    if ":" not in host:
        assert socket.getaddrinfo(host, 80)[0][4][0] in {"127.0.0.1", "0.0.0.0"}


def ipv6_loopback_first(host, port, **kwargs):
    """The system's answer for a name, with ::1 put first, as many a host's resolver does."""
    info = socket.getaddrinfo(host, port, **kwargs)
    if host == "localhost":
        info = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0))] + info
    return info


@pytest.mark.parametrize(
    "resolver", [socket.getaddrinfo, ipv6_loopback_first], ids=["the system's", "::1 first"]
)
def test_a_host_name_that_resolves_to_loopback_is_refused(resolver):
    # Whichever loopback address the resolver gives first is the one the refusal names.
    first = netguard.addresses("localhost", 80, resolver=resolver)[0]
    assert first.is_loopback
    with pytest.raises(netguard.Refused) as refused:
        netguard.resolve("localhost", 80, resolver=resolver)
    assert str(refused.value).startswith(f"localhost ({first}) may not be reached: ")
    assert "loopback" in str(refused.value)


def test_every_address_a_name_resolves_to_is_checked():
    def public_and_private(host, port, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    with pytest.raises(netguard.Refused, match=r"10\.0\.0\.7"):
        netguard.resolve("mixed.example", 443, resolver=public_and_private)


def test_public_addresses_come_back_in_the_resolvers_order_each_once():
    def twice(host, port, **kwargs):
        info = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2606:4700::1", port, 0, 0))]
        info += [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port))] * 2
        return info

    found = netguard.resolve("dual.example", 443, resolver=twice)
    assert [str(a) for a in found] == ["2606:4700::1", PUBLIC]


def test_a_rebinding_name_never_leads_to_a_loopback_connection(monkeypatch):
    """The name answers with a public address first and loopback after: the connection
    goes to the address that was checked, and the name is not asked again for it."""
    peer = HTTPPeer()
    answers = [PUBLIC, "127.0.0.1"]
    asked = []

    def rebinding(host, port, **kwargs):
        asked.append(host)
        address = answers[min(len(asked) - 1, len(answers) - 1)]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    connected_to = []

    def connect(address, timeout=None, **kwargs):
        connected_to.append(address)
        raise ConnectionRefusedError(111, "Connection refused")  # no internet here anyway

    monkeypatch.setattr(socket, "create_connection", connect)
    client = http.Client(
        connect_timeout=timedelta(seconds=0.5),
        total_timeout=timedelta(seconds=1),
        guard=netguard.Guard(resolver=rebinding),
    )
    url = f"http://rebind.example:{peer.port}/hook"
    try:
        with pytest.raises(http.HttpChannelError) as first:
            client.request("POST", url, body=b"{}")
        assert first.value.code == "HTTP_CONNECT"
        assert connected_to == [(PUBLIC, peer.port)]  # the checked address, and only it
        # The next connection asks again, gets loopback, and is refused before connecting.
        with pytest.raises(http.HttpChannelError) as second:
            client.request("POST", url, body=b"{}")
        assert second.value.code == "UNSAFE_ADDRESS"
        assert not second.value.retryable
        assert asked == ["rebind.example", "rebind.example"]
        assert connected_to == [(PUBLIC, peer.port)]
        assert peer.accepted == 0
    finally:
        client.close()
        peer.stop()
