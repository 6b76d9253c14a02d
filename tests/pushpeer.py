"""A push service on loopback, over HTTPS, that checks what web push sends it.

Written from RFC 8291 (aes128gcm's key derivation and record) and RFC 8292 (the VAPID JWT)
with cryptography's primitives only, not with http_ece or py_vapid, so it cannot share a
mistake with the sending code. Each subscription is a path with its own browser key pair
and auth secret; each request's verdict and decrypted payload are recorded, and a test
scripts the status each path answers with.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import NameOID

from tests.httppeers import HTTPPeer, Reply, Request


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hmac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def public_bytes(key) -> bytes:
    return key.public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )


@dataclass
class Subscription:
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey  # the browser's
    auth: bytes

    @property
    def p256dh(self) -> str:
        return b64url(public_bytes(self.private_key.public_key()))

    @property
    def auth_text(self) -> str:
        return b64url(self.auth)


@dataclass
class Push:
    path: str
    headers: dict[str, str]
    problems: list[str]  # what is wrong with the VAPID token or the body; empty: nothing
    payload: dict | None  # the decrypted JSON


def decrypt(body: bytes, *, private_key: ec.EllipticCurvePrivateKey, auth: bytes) -> bytes:
    """RFC 8291 §3.4 and RFC 8188 §2, one record: the browser's side."""
    salt, rs, idlen = body[:16], int.from_bytes(body[16:20], "big"), body[20]
    sender_raw = body[21 : 21 + idlen]
    ciphertext = body[21 + idlen :]
    if rs < 18 or len(ciphertext) > rs:
        raise ValueError("more than one record, or a bad record size")
    sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), sender_raw)
    shared = private_key.exchange(ec.ECDH(), sender)
    receiver_raw = public_bytes(private_key.public_key())
    prk_key = _hmac(auth, shared)
    ikm = _hmac(prk_key, b"WebPush: info\x00" + receiver_raw + sender_raw + b"\x01")
    prk = _hmac(salt, ikm)
    cek = _hmac(prk, b"Content-Encoding: aes128gcm\x00\x01")[:16]
    nonce = _hmac(prk, b"Content-Encoding: nonce\x00\x01")[:12]
    padded = AESGCM(cek).decrypt(nonce, ciphertext, None).rstrip(b"\x00")
    if not padded.endswith(b"\x02"):  # the last record's delimiter
        raise ValueError("no last-record delimiter")
    return padded[:-1]


def vapid_params(authorization: str) -> tuple[str, dict[str, str]]:
    """The scheme of an Authorization: vapid t=…, k=… header and its parameters by name."""
    scheme, _, rest = authorization.partition(" ")
    return scheme, dict(part.strip().split("=", 1) for part in rest.split(",") if "=" in part)


def vapid_problems(authorization: str, *, origin: str, now: float) -> list[str]:
    """What is wrong with an Authorization: vapid t=…, k=… header (RFC 8292 §3)."""
    scheme, params = vapid_params(authorization)
    if scheme.lower() != "vapid":
        return [f"scheme {scheme!r}"]
    try:
        token, key = params["t"], params["k"]
        head, claims_text, signature = token.split(".")
        header = json.loads(b64url_decode(head))
        claims = json.loads(b64url_decode(claims_text))
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b64url_decode(key))
        raw = b64url_decode(signature)
    except (KeyError, ValueError) as exc:
        return [f"unreadable: {exc!r}"]
    problems = []
    if header.get("alg") != "ES256":
        problems.append(f"alg {header.get('alg')!r}")
    r, s = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
    try:
        public.verify(
            encode_dss_signature(r, s),
            f"{head}.{claims_text}".encode(),
            ec.ECDSA(hashes.SHA256()),
        )
    except InvalidSignature:
        problems.append("bad signature")
    if claims.get("aud") != origin:
        problems.append(f"aud {claims.get('aud')!r}, not {origin!r}")
    exp = claims.get("exp")
    if not isinstance(exp, int) or not now < exp <= now + 86400:
        problems.append(f"exp {exp!r}")
    if not str(claims.get("sub", "")).startswith(("mailto:", "https://")):
        problems.append(f"sub {claims.get('sub')!r}")
    return problems


def certificate(folder: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context for 127.0.0.1 (self-signed, a day's validity), and the certificate's
    file, for the client to trust."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "push.crt", folder / "push.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_path, key_path)
    return server, cert_path


class PushPeer(HTTPPeer):
    """Answers each subscription's POST with 201 and a Location, unless statuses[path] says
    another status (404, 410, 429 with Retry-After, 500)."""

    def __init__(self, folder: Path) -> None:
        server, self.ca_file = certificate(folder)
        self.subscriptions: dict[str, Subscription] = {}
        self.statuses: dict[str, int] = {}
        self.pushes: list[Push] = []
        super().__init__(tls=server)

    def subscribe(self, name: str) -> Subscription:
        path = f"/push/{name}"
        sub = Subscription(self.url + path, ec.generate_private_key(ec.SECP256R1()), os.urandom(16))
        self.subscriptions[path] = sub
        return sub

    def reply(self, request: Request, behaviour) -> Reply:
        self._check(request)
        status = self.statuses.get(request.path, 201)
        if status == 201:
            return Reply(201, b"", {"Location": f"{self.url}/message/{len(self.pushes) - 1}"})
        if status == 429:
            return Reply(429, b"slow down", {"Retry-After": "120"})
        return Reply(status, b"")

    def _check(self, request: Request) -> None:
        problems = vapid_problems(
            request.headers.get("authorization", ""), origin=self.url, now=time.time()
        )
        if request.headers.get("content-encoding") != "aes128gcm":
            problems.append(f"content-encoding {request.headers.get('content-encoding')!r}")
        payload = None
        sub = self.subscriptions.get(request.path)
        if sub is None:
            problems.append("no such subscription")
        else:
            try:
                payload = json.loads(
                    decrypt(request.body, private_key=sub.private_key, auth=sub.auth)
                )
            except (ValueError, IndexError) as exc:
                problems.append(f"cannot decrypt: {exc!r}")
        with self.lock:
            self.pushes.append(Push(request.path, request.headers, problems, payload))
