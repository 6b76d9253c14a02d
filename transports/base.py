"""What every channel is: a class that says everything about itself (its label, whether
recipients choose it, whether quiet hours hold it, what its address looks like, the settings it
needs) and a send that returns the provider's id or raises a ChannelError.

This package imports neither the engine (notifications) nor the recipients' rules: what a send
needs from them (an unsubscribe link, whether a message is a digest) reaches it on Outgoing.
See docs/channels.md for adding a channel of your own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from django.conf import settings
from django.core import checks
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _


class AddressSource(StrEnum):
    """Where a channel finds the recipient's address."""

    EMAIL = "email"  # the auth user's email
    CHANNEL_ADDRESS = "channel_address"  # the user's active ChannelAddress for the channel
    ACCOUNT = "account"  # the user's account itself: every user has one (the inbox)
    NONE = "none"  # nowhere: the channel needs no address (a showcase's own)


class QuietHours(StrEnum):
    """Whether a recipient's quiet hours hold a channel's sends."""

    # It interrupts (a phone buzzes, a browser pops up): quiet hours always hold it.
    ALWAYS = "always"
    # It waits to be read (an email in an inbox): held only when the recipient asks.
    WHEN_ASKED = "when_asked"
    # Nobody is woken by it (a machine's endpoint, the site's own inbox): never held.
    NEVER = "never"


# Outgoing and SendResult are named tuples, not frozen dataclasses: a drain makes one of each
# per row, and a frozen dataclass's __init__ (an object.__setattr__ per field) cost 2.7 µs for
# Outgoing's fourteen fields, a named tuple's 0.6 (timeit, here). Both stay immutable.
class Outgoing(NamedTuple):
    """One rendered message for one recipient, ready for a channel."""

    delivery_id: int
    channel: str
    address: str  # an email address, a chat id, a URL: whatever the channel delivers to
    subject: str
    body: str
    action_url: str
    language: str
    # The notification's own parameters, for channels that send structured data (webhooks).
    # Read-only: one empty mapping is every default's.
    params: Mapping[str, Any] = MappingProxyType({})
    type: str = ""  # the notification's type and message key, for the same channels
    message_key: str = ""
    # The recipient, for what a channel signs in their name (an email's unsubscribe link).
    user_id: int | None = None
    # The address's signing secrets (a webhook endpoint's), read by the drain with the address
    # so no sender thread needs the database. Never in a repr, so never in a log.
    secrets: tuple[str, ...] = ()
    # The claim's lane (the notification's priority), for channels that say how urgent a
    # message is (web push's Urgency and TTL).
    lane: str = ""
    # Every active address of the user, newest first, for a channel that sends to all of them
    # (Channel.several_addresses: web push, one subscription a device); address and secrets
    # are then the first's.
    targets: tuple[Target, ...] = ()
    # Whether it is a digest's carrier (its notification gathers others), for a channel that
    # treats one differently from a single message (the inbox lists each item).
    digest: bool = False
    # Of a channel that offers_unsubscribe, when the recipient may stop this message's
    # category: the category's label in the message's language, and the signed one-click
    # link ("" when the site has no SITE_ORIGIN to make it on). Both "" otherwise.
    category_label: str = ""
    unsubscribe_url: str = ""

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={value!r}"
            for name, value in zip(self._fields, self, strict=True)
            if name not in {"secrets", "unsubscribe_url"}
        )
        return f"Outgoing({shown})"


@dataclass(frozen=True)
class Target:
    """One of several addresses a send goes to, with its secrets (a push subscription's keys)."""

    address: str
    secrets: tuple[str, ...] = field(default=(), repr=False)


class SendResult(NamedTuple):
    provider_message_id: str
    # Addresses the provider said are gone for good, (address, why) each, while the send
    # reached another of them: the drain deactivates just these.
    gone: tuple[tuple[str, str], ...] = ()


class ChannelError(Exception):
    """A send that did not happen, and whether trying again could change that."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool,
        retry_after: timedelta | None = None,
        deactivate_address: bool = False,
        throttled: bool = False,
        gone: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        # The provider refused the send for our rate (an HTTP 429), not for anything about
        # the message: the outbox re-queues it without spending a send, and the drain holds
        # the provider's pace for every drain (notifications/pacing.py).
        self.throttled = throttled
        # Stop sending to this address at all: the recipient blocked the bot (a 403), or the
        # webhook endpoint is gone (a 410). The drain deactivates the address.
        self.deactivate_address = deactivate_address
        # Of a channel with several addresses: which of them to deactivate, (address, why)
        # each; empty with deactivate_address means every active address of the channel.
        self.gone = gone


@dataclass(frozen=True)
class Pace:
    """A provider's rate limit: at most rate sends a second under key, shared by every drain.

    key names the channel and the account (a bot), never a secret: it is stored in
    notifications.provider_rates, and shown to staff."""

    key: str
    rate: float  # sends per second


@dataclass(frozen=True)
class Probe:
    """What a provider's identity endpoint said: how long it took, and the account's name."""

    seconds: float
    name: str


class Channel:
    """A way to reach a recipient. Subclasses set name and address_source and define send."""

    name: ClassVar[str]
    # What recipients and staff call it (translated); "" shows its name.
    label: ClassVar[Any] = ""
    # What it is called inside a sentence, where a label's capital would be wrong
    # ("messages by email": an unsubscribe page); "" uses label.
    label_in_sentence: ClassVar[Any] = ""
    # Whether recipients choose, category by category, what reaches them on it (the
    # preference centre, an email's unsubscribe link). Not a channel a site keeps to itself.
    choosable: ClassVar[bool] = True
    # Whether quiet hours hold it. The safe default: a new channel interrupts.
    quiet_hours: ClassVar[QuietHours] = QuietHours.ALWAYS
    # Whether a delivery of it that dies (its budget spent on a fault that may pass) is one a
    # person should look at: Needs attention lists it, /metrics counts it.
    needs_attention: ClassVar[bool] = True
    # Whether its message carries a one-click way to stop its category (RFC 8058's
    # List-Unsubscribe): the drain then puts the link on Outgoing.
    offers_unsubscribe: ClassVar[bool] = False
    # Where the recipient's address comes from: the auth user's email, the user's
    # ChannelAddress for this channel, or nowhere (a channel that needs no recipient).
    address_source: ClassVar[AddressSource] = AddressSource.CHANNEL_ADDRESS
    # Of a ChannelAddress channel: whether a person types the address (a chat id, a URL),
    # on the preference centre or in the admin. Not a browser's push subscription, which the
    # browser makes.
    typed_address: ClassVar[bool] = True
    # What the address field is called ("": what the channel is called), and the help under it.
    address_label: ClassVar[Any] = ""
    address_help: ClassVar[Any] = ""
    # The HTML inputmode of that field ("url", "numeric"), "" for plain text.
    address_input_mode: ClassVar[str] = ""
    # Whether each address has signing secrets of its own (WebhookSecret), made when the
    # address is first saved and shown once: a webhook endpoint's.
    signed_with_secret: ClassVar[bool] = False
    # The settings it cannot send without: `manage.py check` warns of each one unset or
    # empty, naming the channel (a bot's token).
    required_settings: ClassVar[tuple[str, ...]] = ()
    # Whether probe() asks the provider who the site is (a bot's identity endpoint): the
    # admin dashboard then offers a "Probe" button for it.
    probes: ClassVar[bool] = False
    # Whether sends carry the rendered message (a channel that only counts does not need it).
    renders: ClassVar[bool] = True
    # Whether a send finishes at once, without waiting on anything outside the process (a
    # channel that writes to memory): the drain then sends it itself instead of handing it to
    # a sender thread, which would cost more than the send.
    local: ClassVar[bool] = False
    # Whether a send goes to every active address of the user (Outgoing.targets) rather than
    # to the one a channel allows.
    several_addresses: ClassVar[bool] = False

    @property
    def shown_label(self) -> str:
        """What people call it: its label, or its name when it has none."""
        return str(self.label) if self.label else self.name

    @property
    def shown_in_sentence(self) -> str:
        """What a sentence calls it: label_in_sentence, or what people call it."""
        return str(self.label_in_sentence) if self.label_in_sentence else self.shown_label

    def clean_address(self, address: str) -> str:
        """address as it is stored, or ValidationError saying what is wrong with it, in the
        words of the person who typed it. Run by the preference centre and the admin alike;
        the default takes any non-empty text."""
        address = (address or "").strip()
        if not address:
            raise ValidationError(_("Enter an address."))
        return address

    def check(self) -> list[checks.CheckMessage]:
        """What `manage.py check` says of this channel's settings: by default, a warning for
        each of required_settings unset or empty, naming the channel."""
        return [
            checks.Warning(
                f"The {self.name} channel is configured but {name} is not set: every "
                f"{self.name} delivery will fail permanently.",
                hint=f"Set {name}, or stop running the {self.name} channel: leave it out of "
                "V10R_CHANNELS (a built-in one) or DELIVERY_CHANNELS (a site's own).",
                obj=type(self),
                id="transports.W001",
            )
            for name in self.required_settings
            if not getattr(settings, name, "")
        ]

    @property
    def worst_case(self) -> timedelta:
        """The longest one send can take, timeouts included: the lease check relies on it."""
        raise NotImplementedError

    def send(self, outgoing: Outgoing) -> SendResult:
        raise NotImplementedError

    def probe(self) -> Probe:
        """Of a channel that probes: ask the provider who the site is, and how fast it
        answers; raise a ChannelError when it cannot say."""
        raise NotImplementedError

    def pace(self) -> Pace | None:
        """The rate limit every drain keeps to for this channel, or None for none.

        The rate is settings.DELIVERY_PROVIDER_RATES[name] (0 or absent: unpaced), read on
        each batch so a test may change it; the key is the channel's name and account()."""
        rate = getattr(settings, "DELIVERY_PROVIDER_RATES", {}).get(self.name, 0)
        if not rate or self.local:
            return None
        account = self.account()
        return Pace(key=f"{self.name}:{account}" if account else self.name, rate=rate)

    def account(self) -> str:
        """Which of the provider's accounts the sends spend, so two accounts (two bots) are
        two budgets; "" when the channel has one."""
        return ""

    # A channel that keeps connections open between sends closes them here: those idle for a
    # while on each quiet turn of the worker, and all of them when the worker stops.
    def close_idle(self) -> None:
        pass

    def close(self) -> None:
        pass
