"""Web push: the rendered message, encrypted to each of the user's browsers (RFC 8291,
aes128gcm) and POSTed to its push service with a VAPID signature (RFC 8292).

A subscription's endpoint came from a browser, so it is input: only public HTTPS addresses
are reached (netguard, checked on what the name resolves to, at connect time), through the
channels' HTTP client with its deadline. One send goes to every active subscription of the
user (one a device), all within one deadline. It is sent when any push service accepted it;
a 404 or 410 deactivates just that subscription. When none accepted and any failure could
pass, the send is retried: nothing was shown anywhere, so a retry shows nothing twice. A
device whose push service failed while another accepted misses this notification: retrying
would show it twice on the others.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import time
from datetime import timedelta
from urllib.parse import urlsplit

import http_ece
import py_vapid
from cryptography.hazmat.primitives.asymmetric import ec
from django.core import checks
from django.utils.translation import gettext_lazy as _

from core import vapid
from transports import http, netguard
from transports.base import (
    AddressSource,
    Channel,
    ChannelError,
    Outgoing,
    SendResult,
    Target,
)

# Push services must take payloads of 4096 bytes (RFC 8030 §7.2); aes128gcm's header (86
# bytes with the key id), its padding delimiter and its tag (17) leave this for the JSON.
MAX_PLAINTEXT_BYTES = 4096 - 86 - 17
# A VAPID token lives at most 24 hours (RFC 8292 §2); 12 leaves room for clocks that differ.
TOKEN_LIFETIME = timedelta(hours=12)
# At most this many of a user's devices are sent to (the newest), so a send stays bounded.
MAX_DEVICES = 10
# The notification's lane says how urgent it is (RFC 8030 §5.3) and how long a push service
# keeps it for a device that is offline: an urgent one goes stale sooner, a low one may wait
# for a device that saves its battery. A lane not named here (one an app or a site adds) is
# sent as normal: nothing says how urgent its rows are.
LANES = {
    "high": ("high", timedelta(hours=6)),
    "normal": ("normal", timedelta(hours=24)),
    "low": ("low", timedelta(hours=72)),
}
ICON = "/static/icons/icon-192.png"


class WebPushChannel(Channel):
    """Sends to every Outgoing.targets (or Outgoing.address), each Target's secrets being the
    subscription's (p256dh, auth).

    allow_loopback lets endpoints on 127.0.0.1 and ::1 through (tests, local development);
    ports are the ports an endpoint may name (WEBPUSH_ENDPOINT_PORTS);
    ssl_context trusts what it trusts instead of the system's CAs; resolver replaces
    socket.getaddrinfo, for tests."""

    name = "webpush"
    label = _("Browser push")
    address_source = AddressSource.CHANNEL_ADDRESS
    several_addresses = True
    # A subscription is made by the browser that receives it, with its keys: never typed.
    typed_address = False
    address_label = _("Push endpoint")

    def check(self) -> list[checks.CheckMessage]:
        if self.public_key and self.signer is not None:
            return []
        return [
            checks.Warning(
                "The webpush channel is configured but WEBPUSH_VAPID_PUBLIC_KEY and "
                "WEBPUSH_VAPID_PRIVATE_KEY are not set: every webpush delivery will fail "
                "permanently (WEBPUSH_NO_KEYS).",
                hint="Run `manage.py vapid_keys --subject mailto:…` and set the lines it prints, "
                "or leave webpush out of the channels this site runs.",
                obj=type(self),
                id="transports.W010",
            )
        ]

    def __init__(
        self,
        *,
        public_key: str = "",
        private_key: str = "",
        subject: str = "",
        connect_timeout: timedelta = timedelta(seconds=5),
        total_timeout: timedelta = timedelta(seconds=10),
        allow_loopback: bool = False,
        ports: tuple[int, ...] = (443,),
        ssl_context: ssl.SSLContext | None = None,
        resolver: netguard.Resolver = socket.getaddrinfo,
    ) -> None:
        self.subject = subject
        self.ports = ports
        self.public_key = public_key
        self.signer = py_vapid.Vapid02.from_raw(private_key.encode()) if private_key else None
        self.client = http.Client(
            connect_timeout=connect_timeout,
            total_timeout=total_timeout,
            guard=netguard.Guard(allow_loopback=allow_loopback, resolver=resolver),
            ssl_context=ssl_context,
        )

    @classmethod
    def from_settings(cls) -> WebPushChannel:
        from django.conf import settings

        context = None
        if settings.WEBPUSH_CA_FILE:
            context = ssl.create_default_context(cafile=settings.WEBPUSH_CA_FILE)
        return cls(
            public_key=settings.WEBPUSH_VAPID_PUBLIC_KEY,
            private_key=settings.WEBPUSH_VAPID_PRIVATE_KEY,
            subject=settings.WEBPUSH_VAPID_SUBJECT,
            connect_timeout=timedelta(seconds=settings.DELIVERY_HTTP_CONNECT_TIMEOUT),
            total_timeout=timedelta(seconds=settings.DELIVERY_HTTP_TOTAL_TIMEOUT),
            allow_loopback=settings.WEBPUSH_ALLOW_LOOPBACK,
            ports=settings.WEBPUSH_ENDPOINT_PORTS,
            ssl_context=context,
        )

    @property
    def worst_case(self) -> timedelta:
        return self.client.worst_case  # every device's request shares one deadline

    def send(self, outgoing: Outgoing) -> SendResult:
        if self.signer is None:
            raise ChannelError(
                "WEBPUSH_NO_KEYS",
                "WEBPUSH_VAPID_PUBLIC_KEY and WEBPUSH_VAPID_PRIVATE_KEY are not set: web push "
                "is off.",
                retryable=False,
            )
        targets = outgoing.targets or (Target(outgoing.address, outgoing.secrets),)
        plaintext = payload(outgoing)
        deadline = self.client.deadline()
        accepted: list[str] = []
        gone: list[tuple[str, str]] = []
        errors: list[ChannelError] = []
        for target in targets[:MAX_DEVICES]:
            try:
                accepted.append(self._push(target, plaintext, lane=outgoing.lane, until=deadline))
            except ChannelError as exc:
                if exc.deactivate_address:
                    gone.append((target.address, f"{exc.code}: {exc.message}"))
                errors.append(exc)
        if accepted:
            return SendResult(provider_message_id=accepted[0], gone=tuple(gone))
        retryable = [e for e in errors if e.retryable]
        if retryable:
            # A 429 re-queues without spending an attempt only when every failure was one.
            chosen = next((e for e in retryable if not e.throttled), retryable[0])
            waits = [e.retry_after for e in retryable if e.retry_after is not None]
            raise ChannelError(
                chosen.code,
                chosen.message,
                retryable=True,
                retry_after=max(waits) if waits else None,
                throttled=chosen.throttled,
                gone=tuple(gone),
            )
        first = errors[0]
        raise ChannelError(
            first.code,
            first.message,
            retryable=False,
            deactivate_address=bool(gone),
            gone=tuple(gone),
        )

    def _push(self, target: Target, plaintext: bytes, *, lane: str, until: float) -> str:
        """POST plaintext to one subscription; return the push service's message id (its
        Location), or raise a ChannelError with deactivate_address for a gone subscription."""
        endpoint = target.address
        try:
            destination = netguard.parse_url(endpoint)
        except netguard.Refused as exc:
            raise ChannelError("BAD_URL", str(exc), retryable=False) from None
        if destination.scheme != "https":
            raise ChannelError(
                "WEBPUSH_NOT_HTTPS", "A push endpoint must be an https:// URL.", retryable=False
            )
        if destination.port not in self.ports:
            # Stored before WEBPUSH_ENDPOINT_PORTS said otherwise: checked again here.
            raise ChannelError(
                "WEBPUSH_PORT",
                f"A push endpoint on port {destination.port} is refused: "
                f"WEBPUSH_ENDPOINT_PORTS allows {', '.join(map(str, self.ports))}.",
                retryable=False,
            )
        try:
            p256dh, auth = target.secrets
            body = encrypt(plaintext, p256dh=p256dh, auth=auth)
        except ValueError:
            # The browser's keys cannot be used, now or ever: the subscription is dead.
            raise ChannelError(
                "WEBPUSH_BAD_KEYS",
                "The subscription's keys are not a P-256 key and a 16-byte secret.",
                retryable=False,
                deactivate_address=True,
            ) from None
        urgency, ttl = LANES.get(lane, LANES["normal"])
        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Encoding": "aes128gcm",
            "TTL": str(int(ttl.total_seconds())),
            "Urgency": urgency,
            **self.authorization(endpoint),
        }
        response = self.client.request("POST", endpoint, headers=headers, body=body, deadline=until)
        if response.status in (404, 410):
            raise ChannelError(
                "WEBPUSH_GONE",
                f"The push service answered {response.status}: the subscription has ended.",
                retryable=False,
                deactivate_address=True,
            )
        if error := http.classify(response, peer=http.Peer.WEBPUSH):
            raise error
        return http.redact(response.headers.get("Location", ""), secrets=())[:200]

    def authorization(self, endpoint: str, *, now: float | None = None) -> dict[str, str]:
        """The VAPID Authorization header for endpoint's push service: aud its origin."""
        parts = urlsplit(endpoint)
        claims = {
            "aud": f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}",
            "exp": int((now or time.time()) + TOKEN_LIFETIME.total_seconds()),
            "sub": self.subject,
        }
        try:
            return self.signer.sign(claims)
        except py_vapid.VapidException as exc:
            raise ChannelError("WEBPUSH_BAD_CLAIMS", str(exc), retryable=False) from None

    def close_idle(self) -> None:
        self.client.close_idle()

    def close(self) -> None:
        self.client.close()


def encrypt(plaintext: bytes, *, p256dh: str, auth: str) -> bytes:
    """The aes128gcm body for a subscription's keys, from a fresh key pair and salt; ValueError
    when the keys are not a P-256 public key and a 16-byte secret."""
    receiver = vapid.b64url_decode(p256dh)
    secret = vapid.b64url_decode(auth)
    if len(receiver) != 65 or len(secret) != 16:
        raise ValueError("bad subscription keys")
    ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), receiver)  # ValueError
    return http_ece.encrypt(
        plaintext,
        salt=os.urandom(16),
        private_key=ec.generate_private_key(ec.SECP256R1()),
        dh=receiver,
        auth_secret=secret,
        version="aes128gcm",
    )


def payload(outgoing: Outgoing) -> bytes:
    """What the service worker shows, as JSON within MAX_PLAINTEXT_BYTES: title, body, the
    target as a same-origin path ("" for none: a foreign URL is never sent), icon, language.
    A body too long is cut, ending in an ellipsis."""
    fields = {
        "title": outgoing.subject[:200],
        "body": outgoing.body,
        "url": same_origin_path(outgoing.action_url),
        "icon": ICON,
        "lang": outgoing.language,
    }
    body = outgoing.body
    while True:
        encoded = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()
        if len(encoded) <= MAX_PLAINTEXT_BYTES:
            return encoded
        body = body[: max(len(body) - (len(encoded) - MAX_PLAINTEXT_BYTES) - 1, 0)]
        fields["body"] = body + "…"


def same_origin_path(url: str) -> str:
    """url as a path on this site: a path as it is; an absolute URL on SITE_ORIGIN as its
    path; anything else ""."""
    from django.conf import settings

    if url.startswith("/") and not url.startswith(("//", "/\\")):
        return url
    origin = getattr(settings, "SITE_ORIGIN", "")
    if origin and url.startswith(origin + "/"):
        return url[len(origin) :]
    return ""
