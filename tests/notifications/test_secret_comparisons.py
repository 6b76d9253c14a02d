"""Every secret the site checks is compared in constant time, by hmac.compare_digest.

`==` stops at the first byte that differs, so how long a refusal takes tells an attacker how
much of a guess was right. The time difference is too small to measure reliably in a test;
what is tested instead is that each check hands its comparison to compare_digest and acts on
what compare_digest answers (a spy wraps the real one, or overrides its verdict).
"""

from __future__ import annotations

import hmac

import pytest

from notifications import metrics
from tests.httppeers import spec_verify
from transports import signing

REAL_COMPARE = hmac.compare_digest
CRON_SECRET = "c" * 40
METRICS_TOKEN = "m" * 40


class Spy:
    """Stands in for hmac.compare_digest: records each pair, answers as the real one does
    unless told a verdict."""

    def __init__(self, verdict: bool | None = None) -> None:
        self.verdict = verdict
        self.calls: list[tuple] = []

    def __call__(self, a, b) -> bool:
        self.calls.append((a, b))
        real = REAL_COMPARE(a, b)
        return real if self.verdict is None else self.verdict


@pytest.fixture
def spy(monkeypatch):
    def install(verdict: bool | None = None) -> Spy:
        spy = Spy(verdict)
        monkeypatch.setattr(hmac, "compare_digest", spy)
        return spy

    return install


def signed(*, secrets: list[str], body: bytes = b'{"ok":true}') -> dict[str, str]:
    return signing.headers(msg_id="msg_1", body=body, secrets=secrets)


# --- Webhook signatures -------------------------------------------------------------------------


def test_verify_compares_every_offered_signature_with_every_secret_by_compare_digest(spy):
    offered_by = [signing.new_secret() for _ in range(3)]
    known = [signing.new_secret(), signing.new_secret()]
    headers = signed(secrets=offered_by)
    record = spy()
    with pytest.raises(signing.InvalidSignature):
        signing.verify(headers=headers, body=b'{"ok":true}', secrets=known)
    assert len(record.calls) == len(known) * len(offered_by)
    assert all(isinstance(a, bytes) and isinstance(b, bytes) for a, b in record.calls)


def test_verify_accepts_what_compare_digest_matches_and_nothing_else(spy):
    secret = signing.new_secret()
    headers = signed(secrets=[secret])
    record = spy()
    signing.verify(headers=headers, body=b'{"ok":true}', secrets=[secret])
    assert record.calls and REAL_COMPARE(*record.calls[-1])

    spy(verdict=False)
    with pytest.raises(signing.InvalidSignature):
        signing.verify(headers=headers, body=b'{"ok":true}', secrets=[secret])

    spy(verdict=True)  # a forged signature passes only if the comparison is compare_digest's
    signing.verify(headers=headers, body=b"forged", secrets=[signing.new_secret()])


def test_the_test_receiver_checks_signatures_by_compare_digest_too(spy):
    secret = signing.new_secret()
    headers = signed(secrets=[secret])
    record = spy()
    assert spec_verify(headers, b'{"ok":true}', [secret]) is True
    assert record.calls
    spy(verdict=False)
    assert spec_verify(headers, b'{"ok":true}', [secret]) is False
    spy(verdict=True)
    assert spec_verify(headers, b"forged", [signing.new_secret()]) is True


# --- The cron trigger's secret ------------------------------------------------------------------


@pytest.mark.django_db
def test_the_cron_secret_is_compared_by_compare_digest(client, settings, spy):
    settings.CRON_SECRET = CRON_SECRET
    record = spy()
    response = client.post("/cron/drain", HTTP_AUTHORIZATION="Bearer " + "x" * 40)
    assert response.status_code == 401
    assert record.calls == [(b"x" * 40, CRON_SECRET.encode())]

    spy(verdict=False)  # the right secret is refused when compare_digest says no
    response = client.post("/cron/drain", HTTP_AUTHORIZATION=f"Bearer {CRON_SECRET}")
    assert response.status_code == 401


# --- The metrics token --------------------------------------------------------------------------


def test_the_metrics_token_is_compared_by_compare_digest(rf, settings, spy):
    settings.METRICS_TOKEN = METRICS_TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []
    right = rf.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    wrong = rf.get("/metrics", headers={"Authorization": "Bearer " + "y" * 40})

    record = spy()
    assert metrics.allowed(right, address="203.0.113.9") is True
    assert metrics.allowed(wrong, address="203.0.113.9") is False
    assert record.calls == [
        (METRICS_TOKEN.encode(), METRICS_TOKEN.encode()),
        (b"y" * 40, METRICS_TOKEN.encode()),
    ]

    spy(verdict=False)
    assert metrics.allowed(right, address="203.0.113.9") is False
    spy(verdict=True)
    assert metrics.allowed(wrong, address="203.0.113.9") is True
