"""Standard Webhooks signatures (https://www.standardwebhooks.com/): sign what we send,
and verify it, for receivers and tests.

Three headers go with every request: webhook-id (the delivery's own id, the same on every
retry, so a receiver can drop a duplicate), webhook-timestamp (unix seconds, new on every
attempt) and webhook-signature: "v1,<base64 HMAC-SHA256 of id.timestamp.body>" for each
active secret, separated by spaces. While a secret is being rotated, the old and the new
are both active and both signatures are sent, so a receiver that knows either accepts.
A secret is "whsec_" and the base64 of its key bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets as _secrets
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta

PREFIX = "whsec_"
VERSION = "v1"
# How far a timestamp may be from the receiver's clock, either way: older is a replay.
TOLERANCE = timedelta(minutes=5)
KEY_BYTES = 32


class InvalidSignature(Exception):
    """The request is not signed with any of the secrets, or not recently."""


def new_secret() -> str:
    """Return a fresh secret: 32 random bytes, spelled the standard way."""
    return PREFIX + base64.b64encode(_secrets.token_bytes(KEY_BYTES)).decode("ascii")


def key_of(secret: str) -> bytes:
    """Return the key bytes a secret spells, or raise ValueError."""
    if not secret.startswith(PREFIX):
        raise ValueError(f"A webhook secret starts with {PREFIX!r}.")
    try:
        key = base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("A webhook secret is base64 after its prefix.") from None
    if not key:
        raise ValueError("A webhook secret may not be empty.")
    return key


def signature(*, msg_id: str, timestamp: int, body: bytes, secrets: Sequence[str]) -> str:
    """Return the webhook-signature header's value: one signature per secret."""
    if not secrets:
        raise ValueError("Signing needs at least one secret.")
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        f"{VERSION},{base64.b64encode(_mac(key_of(secret), signed)).decode('ascii')}"
        for secret in secrets
    )


def headers(
    *, msg_id: str, body: bytes, secrets: Sequence[str], timestamp: int | None = None
) -> dict[str, str]:
    """Return the three headers that sign body, stamped now unless timestamp is given."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature(msg_id=msg_id, timestamp=stamp, body=body, secrets=secrets),
    }


def verify(
    *,
    headers: Mapping[str, str],
    body: bytes,
    secrets: Sequence[str],
    tolerance: timedelta = TOLERANCE,
    now: float | None = None,
) -> None:
    """Return when body carries a valid signature by any of secrets, stamped within
    tolerance of now; raise InvalidSignature otherwise."""
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get("webhook-id")
    stamp = lowered.get("webhook-timestamp", "")
    offered = lowered.get("webhook-signature", "")
    if not msg_id or not stamp.isascii() or not stamp.isdigit() or not offered:
        raise InvalidSignature("The webhook-id, webhook-timestamp or webhook-signature is missing.")
    current = time.time() if now is None else now
    if abs(current - int(stamp)) > tolerance.total_seconds():
        raise InvalidSignature("The timestamp is too far from now.")
    signed = f"{msg_id}.{stamp}.".encode() + body
    candidates = []
    for item in offered.split():
        version, _, encoded = item.partition(",")
        if version != VERSION:
            continue
        try:
            candidates.append(base64.b64decode(encoded, validate=True))
        except binascii.Error:
            continue
    for secret in secrets:
        expected = _mac(key_of(secret), signed)
        if any(hmac.compare_digest(expected, candidate) for candidate in candidates):
            return
    raise InvalidSignature("No signature matches.")


def _mac(key: bytes, signed: bytes) -> bytes:
    return hmac.new(key, signed, hashlib.sha256).digest()
