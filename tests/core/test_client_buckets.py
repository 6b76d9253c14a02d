"""Every per-client limit in the tree counts an IPv6 client per /64 (core/clients.py).

Each endpoint that limits by client is asked from two addresses in one /64 and from one in the
next /64, and the rate limiter's keys are compared: a limit keyed on the full address would hand
a single host 2^64 fresh budgets."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from core import ratelimit

SAME_64 = ("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff")
NEXT_64 = "2001:db8:1:3::1"


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 40, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


def _try_it(client, address):
    client.post("/showcases/workers/try/", HTTP_HX_REQUEST="true", REMOTE_ADDR=address)


def _analyse(client, address):
    upload = SimpleUploadedFile("upload", _png(), content_type="image/png")
    client.post("/showcases/workers/analyse/", {"image": upload}, REMOTE_ADDR=address)


def _cron_guess(client, address):
    client.get("/cron/drain", headers={"Authorization": "Bearer wrong"}, REMOTE_ADDR=address)


def _metrics_guess(client, address):
    client.get("/metrics", headers={"Authorization": "Bearer wrong"}, REMOTE_ADDR=address)


def _admin_login(client, address):
    client.post("/admin/login/", {"username": "someone", "password": "wrong"}, REMOTE_ADDR=address)


@pytest.fixture
def keys(monkeypatch) -> list[str]:
    """Every key the rate limiter is asked to count, in order."""
    asked = []
    hit = ratelimit.hit

    def recorded(*, key, **kwargs):
        asked.append(key)
        return hit(key=key, **kwargs)

    monkeypatch.setattr(ratelimit, "hit", recorded)
    return asked


@pytest.mark.django_db
@pytest.mark.parametrize(
    "ask", [_try_it, _analyse, _cron_guess, _metrics_guess, _admin_login], ids=lambda f: f.__name__
)
def test_every_per_client_limit_counts_an_ipv6_client_per_64(client, settings, keys, ask):
    settings.CRON_SECRET = "s" * 32
    settings.METRICS_TOKEN = "t" * 32

    def asked_from(address: str) -> set[str]:
        keys.clear()
        ask(client, address)
        assert keys, "the endpoint counted nothing"
        return set(keys)

    first, second = (asked_from(address) for address in SAME_64)
    assert first == second
    # The limit is per client at all: the next /64 is counted under other keys.
    assert asked_from(NEXT_64) != first
