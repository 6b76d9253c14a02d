"""VAPID keys (RFC 8292): the P-256 pair web push signs with, in the base64url text the
settings read, and what is wrong with a pair an operator set.

Pure functions of text, with no Django import, so the settings can check the environment's
keys as they read them.
"""

from __future__ import annotations

import base64
import re

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

_BASE64URL = re.compile(r"[A-Za-z0-9_-]+=*")
# mailto: with an address in it, or an https: URL with a host: how a push service reaches
# the site's operator (RFC 8292 §2.1).
_SUBJECT = re.compile(r"mailto:[^@\s]+@[^@\s]+|https://[^/\s]+(/\S*)?")


def b64url_decode(text: str) -> bytes:
    """Decode base64url with or without its padding; ValueError for anything else."""
    if not _BASE64URL.fullmatch(text):
        raise ValueError("not base64url")
    text = text.rstrip("=")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def new_pair() -> tuple[str, str]:
    """A fresh (public, private) pair: the public key uncompressed (65 bytes), the private
    key as its 32-byte scalar, both base64url without padding."""
    key = ec.generate_private_key(ec.SECP256R1())
    return public_text(key), b64url(key.private_numbers().private_value.to_bytes(32, "big"))


def public_text(key: ec.EllipticCurvePrivateKey) -> str:
    raw = key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return b64url(raw)


def private_key(text: str) -> ec.EllipticCurvePrivateKey:
    """The private key text stands for; ValueError when it is none."""
    raw = b64url_decode(text)
    if len(raw) != 32:
        raise ValueError(f"{len(raw)} bytes, not 32")
    return ec.derive_private_key(int.from_bytes(raw, "big"), ec.SECP256R1())


def problem(*, public: str, private: str, subject: str) -> str | None:
    """What is wrong with these settings, in words naming the setting; None when nothing.

    No keys at all is not a problem (the channel is off, and a check warns); half a pair, a
    key that is not one, a pair whose halves do not belong together, or a missing or
    malformed subject is."""
    if not public and not private:
        return None
    if not public or not private:
        missing = "WEBPUSH_VAPID_PUBLIC_KEY" if not public else "WEBPUSH_VAPID_PRIVATE_KEY"
        return f"{missing} is not set, but the other half of the pair is; set both or neither."
    try:
        raw = b64url_decode(public)
        if len(raw) != 65 or raw[0] != 4:
            raise ValueError(f"{len(raw)} bytes, not an uncompressed point of 65")
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError as exc:
        return (
            f"WEBPUSH_VAPID_PUBLIC_KEY is not a P-256 public key in base64url ({exc}); "
            "`manage.py vapid_keys` prints a pair."
        )
    try:
        key = private_key(private)
    except ValueError as exc:
        return (
            f"WEBPUSH_VAPID_PRIVATE_KEY is not a P-256 private key in base64url ({exc}); "
            "`manage.py vapid_keys` prints a pair."
        )
    if public_text(key) != public.rstrip("="):
        return (
            "WEBPUSH_VAPID_PUBLIC_KEY is not the public half of WEBPUSH_VAPID_PRIVATE_KEY; "
            "set the two lines `manage.py vapid_keys` printed together."
        )
    if not _SUBJECT.fullmatch(subject):
        return (
            f"WEBPUSH_VAPID_SUBJECT is {subject!r}: with VAPID keys set it must say how a push "
            "service reaches the operator, as mailto:someone@example.com or an https:// URL."
        )
    return None
