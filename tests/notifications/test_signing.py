"""Standard Webhooks signatures, checked against spec_signature and spec_verify
(tests/httppeers.py), written from the specification without the module under test."""

from __future__ import annotations

import base64
import time

import pytest

from tests.httppeers import spec_signature, spec_verify
from transports import signing

# The specification's own example secret, and a second one for rotation.
OLD = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NEW = "whsec_" + base64.b64encode(b"the next key, thirty-two bytes!!").decode()
BODY = b'{"type":"welcome","delivery_id":7}'


def test_a_signature_is_the_specifications_hmac_of_id_timestamp_and_body():
    value = signing.signature(
        msg_id="delivery-7", timestamp=1_700_000_000, body=BODY, secrets=[OLD]
    )
    assert value == spec_signature(OLD, "delivery-7", "1700000000", BODY)


def test_the_specifications_published_example_signs_the_same():
    # From the Standard Webhooks specification's example.
    body = b'{"test": 2432232314}'
    value = signing.signature(
        msg_id="msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp=1614265330, body=body, secrets=[OLD]
    )
    assert value == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_during_rotation_both_secrets_sign_and_a_receiver_knowing_either_accepts():
    headers = signing.headers(msg_id="delivery-8", body=BODY, secrets=[OLD, NEW])
    stamp = headers["webhook-timestamp"]
    assert headers["webhook-signature"].split(" ") == [
        spec_signature(OLD, "delivery-8", stamp, BODY),
        spec_signature(NEW, "delivery-8", stamp, BODY),
    ]
    for known in ([OLD], [NEW], [NEW, OLD]):
        assert spec_verify(headers, BODY, known)
        signing.verify(headers=headers, body=BODY, secrets=known)
    assert not spec_verify(headers, BODY, [signing.new_secret()])


def test_headers_carry_the_id_and_a_timestamp_of_now():
    before = int(time.time())
    headers = signing.headers(msg_id="delivery-9", body=BODY, secrets=[OLD])
    assert headers["webhook-id"] == "delivery-9"
    assert before <= int(headers["webhook-timestamp"]) <= int(time.time())


@pytest.mark.parametrize(
    ("part", "value"),
    [
        ("body", b'{"type":"welcome","delivery_id":8}'),
        ("webhook-id", "delivery-8"),
        ("webhook-timestamp", "+1"),  # one second later: another signed content
    ],
)
def test_verify_rejects_a_tampered_body_id_or_timestamp(part, value):
    headers = signing.headers(msg_id="delivery-7", body=BODY, secrets=[OLD])
    body = BODY
    if part == "body":
        body = value
    elif value == "+1":
        headers[part] = str(int(headers[part]) + 1)
    else:
        headers[part] = value
    with pytest.raises(signing.InvalidSignature):
        signing.verify(headers=headers, body=body, secrets=[OLD])
    assert not spec_verify(headers, body, [OLD])


@pytest.mark.parametrize(
    ("offset", "accepted"),
    [
        (-299, True),  # within five minutes either way
        (299, True),
        (-301, False),  # an old request: a replay
        (301, False),  # from the future
        (-86_400, False),
    ],
)
def test_verify_accepts_timestamps_within_five_minutes_only(offset, accepted):
    now = 1_700_000_000
    stamp = now + offset
    headers = {
        "webhook-id": "delivery-7",
        "webhook-timestamp": str(stamp),
        "webhook-signature": spec_signature(OLD, "delivery-7", str(stamp), BODY),
    }
    if accepted:
        signing.verify(headers=headers, body=BODY, secrets=[OLD], now=now)
    else:
        with pytest.raises(signing.InvalidSignature, match="too far"):
            signing.verify(headers=headers, body=BODY, secrets=[OLD], now=now)


def test_verify_reads_header_names_in_any_case_and_skips_other_versions():
    stamp = str(int(time.time()))
    headers = {
        "Webhook-Id": "delivery-7",
        "WEBHOOK-TIMESTAMP": stamp,
        "webhook-signature": "v2,bm90LWEtc2lnbmF0dXJl v1,%%% "
        + spec_signature(OLD, "delivery-7", stamp, BODY),
    }
    signing.verify(headers=headers, body=BODY, secrets=[OLD])


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"webhook-id": "d", "webhook-timestamp": "now", "webhook-signature": "v1,AAAA"},
        {"webhook-id": "d", "webhook-timestamp": "1700000000"},
    ],
)
def test_verify_rejects_missing_or_unreadable_headers(headers):
    with pytest.raises(signing.InvalidSignature):
        signing.verify(headers=headers, body=BODY, secrets=[OLD], now=1_700_000_000)


@pytest.mark.parametrize(
    "secret",
    ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_", "whsec_YQ"],
)
def test_a_malformed_secret_is_refused(secret):
    with pytest.raises(ValueError, match="webhook secret"):
        signing.key_of(secret)


def test_a_new_secret_is_thirty_two_random_bytes_in_the_standard_spelling():
    first, second = signing.new_secret(), signing.new_secret()
    assert first != second
    assert first.startswith("whsec_")
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32
    headers = signing.headers(msg_id="d", body=BODY, secrets=[first])
    assert spec_verify(headers, BODY, [first])
