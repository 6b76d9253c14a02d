from __future__ import annotations

import pytest
from django.test import RequestFactory

from core import clients


@pytest.mark.parametrize(
    ("raw", "bucket"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("192.0.2.1:5123", "192.0.2.1"),  # a proxy that writes the port too
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),  # the whole /64 is one client
        ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),  # the next /64 is another
        ("[2001:db8::1]:443", "2001:db8::/64"),
        ("fe80::1%eth0", "fe80::/64"),  # a zone index names an interface, not a client
        ("::ffff:198.51.100.7", "198.51.100.7"),  # IPv4-mapped: the IPv4 client it is
        ("", "unknown"),
        ("not-an-address", "unknown"),
        ("999.1.1.1", "unknown"),
    ],
)
def test_addresses_fall_into_buckets_ipv4_alone_and_ipv6_per_64(raw, bucket):
    assert clients.bucket(raw) == bucket


@pytest.mark.parametrize(
    ("trusted", "forwarded", "peer"),
    [
        (0, "203.0.113.9", "10.0.0.1"),  # no proxy trusted: the header is the client's own
        (1, None, "10.0.0.1"),  # a trusted proxy that sent nothing: the peer
        (1, "203.0.113.9", "203.0.113.9"),
        (1, "6.6.6.6, 203.0.113.9", "203.0.113.9"),  # the client's own entry is ignored
        (2, "6.6.6.6, 203.0.113.9, 10.1.1.1", "203.0.113.9"),  # CDN, then our proxy
        (2, "203.0.113.9", "203.0.113.9"),  # fewer hops than configured: the leftmost
        (1, " , ", "10.0.0.1"),
    ],
)
def test_x_forwarded_for_is_read_only_as_far_as_the_trusted_proxies_go(
    settings, trusted, forwarded, peer
):
    settings.V10R_TRUSTED_PROXIES = trusted
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", **extra)
    assert clients.peer(request) == peer


def test_behind_one_proxy_two_visitors_are_two_clients(settings):
    settings.V10R_TRUSTED_PROXIES = 1
    factory = RequestFactory()
    first = factory.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.1")
    second = factory.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.2")
    assert clients.address(first) != clients.address(second)
