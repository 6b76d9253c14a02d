"""A browser's Web Push subscription, kept as a webpush ChannelAddress with its keys.

What the browser sends is checked before it is stored, since the drain will later POST to
the endpoint and encrypt to the keys: the endpoint must be an https URL on a public host
(netguard, so a hostile page cannot make the worker reach 10.0.0.5 or the cloud's metadata
service) and on a port of WEBPUSH_ENDPOINT_PORTS (443, where every browser's push service
listens, so it cannot aim the drain at some other service of a public host), p256dh a point
on P-256 and auth 16 bytes. An endpoint belongs to one browser, so when another user
subscribes from it (a shared computer) it moves to them, if they send the keys the browser
gave with it: knowing an endpoint's URL is not enough to take it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import socket
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from recipients.models import WEBPUSH, ChannelAddress, PushSubscription
from transports import netguard
from transports.http import HttpChannelError, resolve_within

# As many browsers as a person plausibly uses, and few enough that one account cannot make
# every notification fan out into thousands of pushes.
MAX_SUBSCRIPTIONS = 20
MAX_ENDPOINT_LENGTH = ChannelAddress._meta.get_field("address").max_length
MAX_USER_AGENT_LENGTH = PushSubscription._meta.get_field("user_agent").max_length


def subscribe(
    user,
    *,
    endpoint: str,
    p256dh: str,
    auth: str,
    user_agent: str = "",
    resolver: netguard.Resolver = socket.getaddrinfo,
) -> ChannelAddress:
    """Store user's subscription (or update its keys), moving it from whoever had it.

    Raises ValidationError, with a message for the user, for anything not to be stored.
    """
    endpoint = check_endpoint(endpoint, resolver=resolver)
    p256dh = check_public_key(p256dh)
    auth = check_auth_secret(auth)
    user_agent = user_agent[:MAX_USER_AGENT_LENGTH] if isinstance(user_agent, str) else ""
    try:
        return _store(user, endpoint=endpoint, p256dh=p256dh, auth=auth, user_agent=user_agent)
    except IntegrityError:
        # Another request inserted the same endpoint between our look and our insert (the
        # partial unique index said so); the second try finds its row and locks it.
        return _store(user, endpoint=endpoint, p256dh=p256dh, auth=auth, user_agent=user_agent)


def _store(user, *, endpoint: str, p256dh: str, auth: str, user_agent: str) -> ChannelAddress:
    with transaction.atomic():
        # The user's row is the lock that makes the cap hold: two subscribes of one user
        # are taken one after the other, so neither counts before the other has written.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        address = (
            ChannelAddress.objects.select_for_update()
            .filter(channel=WEBPUSH, address=endpoint, is_active=True)
            .first()
        )
        if address is None or address.user_id != user.pk:
            owned = ChannelAddress.objects.filter(user=user, channel=WEBPUSH, is_active=True)
            if owned.count() >= MAX_SUBSCRIPTIONS:
                raise ValidationError(
                    _(
                        "Push notifications are on in %(count)d browsers already, the most "
                        "an account may have. Turn them off on one you no longer use first."
                    )
                    % {"count": MAX_SUBSCRIPTIONS},
                    code="too_many",
                )
        if address is None:
            address = ChannelAddress.objects.create(user=user, channel=WEBPUSH, address=endpoint)
        elif address.user_id != user.pk:
            # The same browser hands back the same subscription, keys and all. An endpoint
            # with other keys is someone who knows the URL, not the browser: it stays put.
            held = PushSubscription.objects.filter(address=address).first()
            if held is not None and (held.p256dh, held.auth) != (p256dh, auth):
                raise ValidationError(
                    _(
                        "This push subscription belongs to another account. Turn push "
                        "notifications off and on again in this browser."
                    ),
                    code="taken",
                )
            address.user = user
            address.save(update_fields=["user"])
        PushSubscription.objects.update_or_create(
            address=address,
            defaults={"p256dh": p256dh, "auth": auth, "user_agent": user_agent},
        )
        return address


def unsubscribe(user, *, endpoint: str) -> bool:
    """Turn off user's own subscription at endpoint; False when they had none there."""
    if not isinstance(endpoint, str):
        return False
    try:
        endpoint = canonical_endpoint(endpoint)
    except netguard.Refused:
        return False  # no endpoint spelled so was ever stored
    # Deleted, not deactivated: the keys are of no further use, and a deactivated row is
    # what the drain leaves for staff to look at.
    deleted, _rows = ChannelAddress.objects.filter(
        user=user, channel=WEBPUSH, address=endpoint, is_active=True
    ).delete()
    return deleted > 0


def unsubscribe_all(user, *, keep: str | None = None) -> int:
    """Turn off every one of user's subscriptions but the one at keep (the browser they are
    using, when it has one); returns how many. A new password ends the other browsers' pushes
    as it ends their sessions."""
    rows = ChannelAddress.objects.filter(user=user, channel=WEBPUSH, is_active=True)
    if keep:
        # An endpoint that cannot be spelled canonically was never stored: nothing to keep.
        with contextlib.suppress(netguard.Refused):
            rows = rows.exclude(address=canonical_endpoint(keep))
    _total, deleted = rows.delete()  # the total counts each address's keys too
    return deleted.get(ChannelAddress._meta.label, 0)


def owns(user, *, endpoint: str) -> bool:
    """Whether the server sends user's pushes to endpoint (an active subscription of theirs):
    a browser may hold a subscription that is someone else's now, or nobody's."""
    if not isinstance(endpoint, str):
        return False
    try:
        endpoint = canonical_endpoint(endpoint)
    except netguard.Refused:
        return False
    return ChannelAddress.objects.filter(
        user=user, channel=WEBPUSH, address=endpoint, is_active=True
    ).exists()


def check_endpoint(endpoint, *, resolver: netguard.Resolver = socket.getaddrinfo) -> str:
    if not isinstance(endpoint, str) or not endpoint:
        raise ValidationError(_("The subscription has no endpoint."), code="endpoint")
    if len(endpoint) > MAX_ENDPOINT_LENGTH:
        raise ValidationError(
            _("The endpoint is longer than %(limit)d characters.") % {"limit": MAX_ENDPOINT_LENGTH},
            code="endpoint",
        )
    try:
        destination = netguard.parse_url(endpoint)
    except netguard.Refused as exc:
        raise ValidationError(
            _("The endpoint is not a usable URL: %(why)s") % {"why": exc.translated()},
            code="endpoint",
        ) from None
    if destination.scheme != "https":
        raise ValidationError(_("The endpoint must be an https URL."), code="endpoint")
    if "#" in endpoint:
        raise ValidationError(_("The endpoint may not have a #fragment."), code="endpoint")
    if destination.port not in settings.WEBPUSH_ENDPOINT_PORTS:
        raise ValidationError(
            _(
                "The endpoint's port is %(port)d; push services are reached on port "
                "%(allowed)s only."
            )
            % {
                "port": destination.port,
                "allowed": ", ".join(str(port) for port in settings.WEBPUSH_ENDPOINT_PORTS),
            },
            code="endpoint",
        )
    try:
        # Bounded like a send's lookup: a slow name server may not hold a web worker.
        resolve_within(
            lambda: netguard.resolve(
                destination.host,
                destination.port,
                allow_loopback=settings.WEBPUSH_ALLOW_LOOPBACK,
                resolver=resolver,
            ),
            host=destination.host,
            seconds=settings.DELIVERY_HTTP_CONNECT_TIMEOUT,
        )
    except netguard.Refused as exc:
        raise ValidationError(
            _("The endpoint's host is not a public push service: %(why)s")
            % {"why": exc.translated()},
            code="endpoint",
        ) from None
    except (OSError, UnicodeError, HttpChannelError):  # socket.gaierror is an OSError
        raise ValidationError(
            _("The endpoint's host %(host)s does not resolve.") % {"host": destination.host},
            code="endpoint",
        ) from None
    return canonical_endpoint(endpoint)


def canonical_endpoint(endpoint: str) -> str:
    """The one spelling an endpoint is stored and looked up by: scheme and host in lower case,
    no default port, the path and query as the push service gave them. Two spellings of one
    URL would otherwise be two owners of one browser."""
    destination = netguard.parse_url(endpoint)
    split = urlsplit(endpoint)
    host = f"[{destination.host}]" if ":" in destination.host else destination.host
    port = (
        "" if destination.port == netguard.SCHEMES[destination.scheme] else f":{destination.port}"
    )
    query = f"?{split.query}" if split.query else ""
    return f"{destination.scheme}://{host}{port}{split.path or '/'}{query}"


def _base64url(value, *, field: str) -> bytes:
    if not isinstance(value, str) or not value.isascii() or len(value) > 200:
        raise ValidationError(_("%(field)s is not base64url text.") % {"field": field}, code="keys")
    try:
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise ValidationError(
            _("%(field)s is not base64url text.") % {"field": field}, code="keys"
        ) from None


def check_public_key(p256dh) -> str:
    raw = _base64url(p256dh, field="p256dh")
    if len(raw) != 65 or raw[0] != 0x04:
        raise ValidationError(
            _("p256dh is not an uncompressed P-256 public key (65 bytes starting with 0x04)."),
            code="keys",
        )
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        raise ValidationError(_("p256dh is not a point on the P-256 curve."), code="keys") from None
    return p256dh.rstrip("=")


def check_auth_secret(auth) -> str:
    if len(_base64url(auth, field="auth")) != 16:
        raise ValidationError(_("auth is not a 16-byte secret."), code="keys")
    return auth.rstrip("=")
