"""Rate limits behind the proxy: each visitor nginx sees is a client of its own, and a visitor
cannot choose another identity by sending X-Forwarded-For.

Loopback is a whole /8, so visitors are told apart by the address they connect from:
127.0.0.2, 127.0.0.3, … all reach nginx on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import re
from http.cookies import SimpleCookie
from urllib.parse import urlencode

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = "/showcases/workers/"
TRY = PAGE + "try/"
TRY_LIMIT = 10


class Visitor:
    """A browser without JavaScript: a cookie jar, a source address, forms posted as forms."""

    def __init__(self, port: int, address: str) -> None:
        self.port = port
        self.address = address
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, *, body: dict | None = None, headers=None):
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=10, source_address=(self.address, 0)
        )
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        encoded = None
        if body is not None:
            encoded = urlencode(body)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, path, body=encoded, headers=sent)
            response = connection.getresponse()
            content = response.read().decode()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return response.status, content
        finally:
            connection.close()

    def try_it(self, *, headers=None) -> int:
        status, page = self.request("GET", PAGE)
        assert status == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        status, _ = self.request("POST", TRY, body={"csrfmiddlewaretoken": token}, headers=headers)
        return status


def test_behind_nginx_each_visitor_has_a_limit_of_their_own(nginx):
    proxy = nginx(CONNECTIONS_PER_CLIENT="100", REQUEST_RATE="100r/s", REQUEST_BURST="100")
    first = Visitor(proxy.port, "127.0.0.2")
    # Without JavaScript a queued notification redirects back to the page.
    assert [first.try_it() for _ in range(TRY_LIMIT + 1)] == [302] * TRY_LIMIT + [429]
    assert Visitor(proxy.port, "127.0.0.3").try_it() == 302


def test_a_visitor_cannot_buy_fresh_limits_by_sending_x_forwarded_for(nginx):
    proxy = nginx(CONNECTIONS_PER_CLIENT="100", REQUEST_RATE="100r/s", REQUEST_BURST="100")
    visitor = Visitor(proxy.port, "127.0.0.4")
    statuses = [
        visitor.try_it(headers={"X-Forwarded-For": f"203.0.113.{i}"}) for i in range(TRY_LIMIT + 1)
    ]
    assert statuses == [302] * TRY_LIMIT + [429]
