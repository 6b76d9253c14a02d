"""The facts each built-in channel states about itself, as the forms, quiet hours, the checks
and the admin read them: one table, so a channel whose fact changes changes it here too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import checks
from django.core.exceptions import ValidationError
from django.utils import translation

import transports as channels
from transports.base import AddressSource, Channel, QuietHours


def test_every_configured_channel_is_its_name_and_has_a_label_of_its_own():
    for name, channel in channels.configured().items():
        assert isinstance(channel, Channel)
        assert channel.name == name
        assert channel.label, f"{name} has no label"
        assert channel.shown_label != name or name == "demo"


# (name, label, choosable, quiet hours, where the address comes from, typed, probes)
FACTS = [
    ("email", "Email", True, QuietHours.WHEN_ASKED, AddressSource.EMAIL, True, False),
    ("telegram", "Telegram", True, QuietHours.ALWAYS, AddressSource.CHANNEL_ADDRESS, True, True),
    ("discord", "Discord", True, QuietHours.ALWAYS, AddressSource.CHANNEL_ADDRESS, True, True),
    ("webhook", "Webhook", True, QuietHours.NEVER, AddressSource.CHANNEL_ADDRESS, True, False),
    (
        "webpush",
        "Browser push",
        True,
        QuietHours.ALWAYS,
        AddressSource.CHANNEL_ADDRESS,
        False,
        False,
    ),
    ("inapp", "Inbox on this site", True, QuietHours.NEVER, AddressSource.ACCOUNT, True, False),
]


@pytest.mark.parametrize(
    ("name", "label", "choosable", "quiet", "source", "typed", "probes"), FACTS
)
def test_a_built_in_channel_states_its_facts(name, label, choosable, quiet, source, typed, probes):
    channel = channels.get(name)
    assert (
        channel.shown_label,
        channel.choosable,
        channel.quiet_hours,
        channel.address_source,
        channel.typed_address,
        channel.probes,
    ) == (label, choosable, quiet, source, typed, probes)


def test_only_the_webhook_signs_and_only_email_offers_an_unsubscribe_link():
    configured = channels.configured()
    assert {n for n, c in configured.items() if c.signed_with_secret} == {"webhook"}
    assert {n for n, c in configured.items() if c.offers_unsubscribe} == {"email"}
    assert {n for n, c in configured.items() if c.several_addresses} == {"webpush"}


@pytest.mark.parametrize(
    ("language", "sentence"), [("en", "email"), ("ru", "электронная почта"), ("de", "E-Mail")]
)
def test_email_is_called_by_its_lower_case_name_inside_a_sentence(language, sentence):
    with translation.override(language):
        assert channels.get("email").shown_in_sentence == sentence


def test_a_channel_without_a_name_for_sentences_uses_its_label():
    assert channels.get("telegram").shown_in_sentence == "Telegram"


@pytest.mark.parametrize(
    ("name", "typed", "stored"),
    [
        ("telegram", " -1001234567 ", "-1001234567"),  # a group's chat id
        ("telegram", "@v10r_reader", "@v10r_reader"),
        ("discord", "123456789012345678", "123456789012345678"),
    ],
)
def test_a_bots_address_is_stored_stripped(name, typed, stored):
    assert channels.get(name).clean_address(typed) == stored


@pytest.mark.parametrize(
    ("name", "typed", "refusal"),
    [
        ("telegram", "hello, world!", "A Telegram chat id is a number, or @ and a name."),
        ("telegram", "@abc", "A Telegram chat id is a number, or @ and a name."),
        ("discord", "hello, world!", "A Discord user id is a number of up to 20 digits."),
        ("discord", "1" * 21, "A Discord user id is a number of up to 20 digits."),
        ("webhook", "hello, world!", "The URL contains spaces"),
        ("webhook", "hooks.example/hello", "This is not a full URL"),
        ("webhook", "", "Enter an address."),
    ],
)
def test_an_address_a_send_would_refuse_is_refused_in_the_channels_words(name, typed, refusal):
    with pytest.raises(ValidationError) as refused:
        channels.get(name).clean_address(typed)
    assert refusal in " ".join(refused.value.messages)


def test_the_webhook_refuses_loopback_unless_its_sends_may_reach_it(settings, rebuilt_channels):
    with pytest.raises(ValidationError, match="loopback"):
        channels.get("webhook").clean_address("http://127.0.0.1:9/hook")
    settings.DELIVERY_WEBHOOK_ALLOW_LOOPBACK = True
    rebuilt_channels()
    assert channels.get("webhook").clean_address("http://127.0.0.1:9/hook")


def test_a_bot_without_a_token_is_named_by_the_checks(settings, rebuilt_channels):
    settings.TELEGRAM_BOT_TOKEN = ""
    settings.DISCORD_BOT_TOKEN = "set"
    rebuilt_channels()
    found = [m for m in checks.run_checks() if m.id == "transports.W001"]
    assert [m.msg.split(" channel ")[0] for m in found] == ["The telegram"]
    assert "TELEGRAM_BOT_TOKEN is not set" in found[0].msg


class Devices(Channel):
    """A site's channel that sends to each of a user's devices, as web push does."""

    name = "devices"
    several_addresses = True
    worst_case = timedelta(seconds=1)


def test_a_channel_with_several_addresses_the_database_does_not_allow_is_refused(
    settings, rebuilt_channels
):
    settings.DELIVERY_CHANNELS = {
        **settings.DELIVERY_CHANNELS,
        "devices": f"{__name__}.Devices",
    }
    [error] = [m for m in checks.run_checks() if m.id == "recipients.E010"]
    assert "'devices'" in error.msg
    assert "webpush" in error.msg
