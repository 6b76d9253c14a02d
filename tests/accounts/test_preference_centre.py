"""The preference centre (/account/notifications/) and the staff console's recipients' settings:
what is saved, what is refused and why, in the user's words, and that no POST, however
hostile, gets a 500 or changes another user."""

from __future__ import annotations

import html
from datetime import time
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from notifications import digests
from notifications.enqueue import send_notification
from notifications.models import NotificationDelivery, Status
from recipients import preferences
from recipients.models import (
    Cadence,
    ChannelAddress,
    ChannelPreference,
    DigestChoice,
    Recipient,
    WebhookSecret,
)
from recipients.windows import Digest
from tests.address_refusals import REFUSED_ADDRESSES

pytestmark = pytest.mark.django_db

CENTRE = "/account/notifications/"
ADMIN = "/admin/recipients/recipient/"


@pytest.fixture
def signed_in(client, ada):
    client.force_login(ada)
    return client


def grid(*, off=(), on=()) -> dict[str, str]:
    """The boxes as the page shows them by default (each category's default per channel),
    with the (category, channel) pairs in off unticked and those in on ticked."""
    ticked = {
        (category, channel)
        for category in preferences.choosable_categories()
        for channel in preferences.choosable_channels()
        if preferences.Preferences().enabled(category, channel)
    }
    return {f"on-{cat}-{ch}": "on" for cat, ch in (ticked - set(off)) | set(on)}


def save(client, section: str, data: dict, *, prefix: str = "", htmx: bool = False):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(prefix + CENTRE, {"section": section, **data}, headers=headers)


def text(response) -> str:
    return html.unescape(response.content.decode())


# --- The page --------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["", "/ru", "/de"])
def test_the_page_asks_anyone_signed_out_to_sign_in_and_come_back(client, prefix):
    response = client.get(prefix + CENTRE)
    assert response.status_code == 302
    assert response["Location"] == f"{prefix}/account/sign-in/?next={prefix}{CENTRE}"


@pytest.mark.parametrize(
    ("prefix", "heading", "required"),
    [
        ("", "Notification settings", "Required: it stays on for at least one channel."),
        (
            "/ru",
            "Настройки уведомлений",
            "Обязательно: остаётся включённым хотя бы в одном канале.",
        ),
        ("/de", "Benachrichtigungen", "Pflicht: bleibt auf mindestens einem Kanal an."),
    ],
)
def test_the_page_shows_every_category_on_every_channel_in_the_users_language(
    signed_in, prefix, heading, required
):
    page = text(signed_in.get(prefix + CENTRE))
    assert f"<h1>{heading}</h1>" in page
    assert required in page
    for category in preferences.choosable_categories():
        for channel in preferences.choosable_channels():
            assert f'name="on-{category}-{channel}"' in page
    # The showcase's demo is nobody's choice.
    assert 'name="on-demo-' not in page and "on-security-demo" not in page


def test_the_header_links_a_signed_in_user_to_the_centre(signed_in):
    page = signed_in.get("/").content.decode()
    assert f'href="{CENTRE}" data-preferences-link' in page


def test_defaults_show_ticked_where_the_category_is_on_by_default(signed_in):
    page = signed_in.get(CENTRE).content.decode()
    assert 'name="on-account-email" id="id_on-account-email" checked' in page
    # Account news reaches a webhook only when asked for (the catalogue's default).
    assert 'name="on-account-webhook" id="id_on-account-webhook">' in page


def test_a_time_zone_is_offered_from_the_browser_only_when_none_is_saved(signed_in, ada):
    assert "data-prefill-time-zone" in signed_in.get(CENTRE).content.decode()
    Recipient.objects.create(user=ada, time_zone="Europe/Berlin")
    page = signed_in.get(CENTRE).content.decode()
    assert "data-prefill-time-zone" not in page
    assert 'value="Europe/Berlin"' in page
    # The script that fills it is a file of the site's, under the CSP (no inline script).
    assert "accounts/time-zone" in page and "<script>" not in page


# --- Choices ---------------------------------------------------------------------------------


def test_turning_a_category_off_on_a_channel_is_stored_and_redirects_with_a_message(signed_in, ada):
    response = save(signed_in, "choices", grid(off=[("account", "email")]))
    assert response.status_code == 302
    assert response["Location"] == CENTRE + "#choices"
    assert preferences.of(ada).enabled("account", "email") is False
    # Only the choice that differs from its default is a row.
    assert list(
        ChannelPreference.objects.filter(user=ada).values_list("category", "channel", "enabled")
    ) == [("account", "email", False)]
    page = text(signed_in.get(CENTRE))
    assert "Your choices are saved." in page
    assert 'name="on-account-email" id="id_on-account-email">' in page


def test_ticking_it_again_returns_to_the_default_and_keeps_no_row(signed_in, ada):
    save(signed_in, "choices", grid(off=[("account", "email")]))
    save(signed_in, "choices", grid(on=[("account", "webhook")]))
    assert preferences.of(ada).enabled("account", "email") is True
    # The webhook box ticked is a choice against account's default.
    assert list(
        ChannelPreference.objects.filter(user=ada).values_list("category", "channel", "enabled")
    ) == [("account", "webhook", True)]


@pytest.mark.parametrize(
    ("prefix", "refusal"),
    [
        ("", "Security messages must stay on for at least one channel."),
        ("/ru", "Сообщения категории «Безопасность» должны оставаться включёнными"),
        ("/de", "Nachrichten der Kategorie „Sicherheit“ müssen auf mindestens einem Kanal"),
    ],
)
def test_the_last_channel_of_a_required_category_cannot_be_turned_off(
    signed_in, ada, prefix, refusal
):
    every = [("security", channel) for channel in preferences.choosable_channels()]
    off = [*every, ("account", "email")]
    response = save(signed_in, "choices", grid(off=off), prefix=prefix)
    assert response.status_code == 200
    assert refusal in text(response)
    # Nothing of it stayed, the other category's change neither: Ada's own choices, not the
    # whole table, which any other connection's committed rows would fill.
    assert not ChannelPreference.objects.filter(user=ada).exists()
    # The user's ticks are shown as they sent them, to correct.
    assert 'name="on-account-email" id="id_on-account-email">' in response.content.decode()


def test_a_required_category_may_leave_all_but_one_channel_and_that_one_is_marked(signed_in, ada):
    others = [("security", ch) for ch in preferences.choosable_channels() if ch != "email"]
    assert save(signed_in, "choices", grid(off=others)).status_code == 302
    assert preferences.of(ada).enabled("security", "email")
    page = signed_in.get(CENTRE).content.decode()
    assert page.count("data-must-stay-on") == 1


def test_moving_security_from_email_to_telegram_is_one_save_the_centre_accepts(signed_in, ada):
    ChannelAddress.objects.create(user=ada, channel="telegram", address="42")
    channels = preferences.choosable_channels()
    preferences.choose(ada, choices={("security", ch): False for ch in channels if ch != "email"})
    moved = [("security", ch) for ch in channels if ch != "telegram"]
    assert save(signed_in, "choices", grid(off=moved)).status_code == 302
    stored = preferences.of(ada)
    assert [ch for ch in channels if stored.enabled("security", ch)] == ["telegram"]


def test_unknown_categories_and_channels_in_a_post_are_ignored(signed_in, ada):
    data = {**grid(), "on-nonsense-email": "on", "on-account-pigeon": "on", "on-demo-email": ""}
    assert save(signed_in, "choices", data).status_code == 302
    assert set(ChannelPreference.objects.values_list("category", flat=True)) <= {"account"}


# --- How often (digests) ---------------------------------------------------------------------


def how_often(category: str = "account", cadence: str = "instant", *, hour="9", day="0") -> dict:
    """A category's digest fields as the page sends them: all three, whatever the choice."""
    return {
        f"digest-{category}": cadence,
        f"digest-{category}-hour": hour,
        f"digest-{category}-weekday": day,
    }


def digest_rows(user) -> dict[str, tuple]:
    return {
        row.category: (row.cadence, row.hour, row.weekday)
        for row in DigestChoice.objects.filter(user=user)
    }


@pytest.mark.parametrize(
    ("prefix", "heading", "always", "option"),
    [
        ("", "How often", "Always sent at once, never in a digest.", "daily digest"),
        (
            "/ru",
            "Как часто",
            "Всегда отправляются сразу, никогда не в сводке.",
            "сводка раз в день",
        ),
        (
            "/de",
            "Wie oft",
            "Immer sofort gesendet, nie in einer Zusammenfassung.",
            "tägliche Zusammenfassung",
        ),
    ],
)
def test_the_page_asks_how_often_each_category_comes_in_the_users_language(
    signed_in, prefix, heading, always, option
):
    page = text(signed_in.get(prefix + CENTRE))
    assert f'<h2 id="digests-title">{heading}</h2>' in page
    assert f'<option value="daily">{option}</option>' in page
    for category in preferences.digest_categories():
        for field in (
            f"digest-{category}",
            f"digest-{category}-hour",
            f"digest-{category}-weekday",
        ):
            assert f'name="{field}"' in page
    # A required category has no choice: it says so instead.
    assert 'name="digest-security' not in page
    assert always in page
    assert '<option value="instant" selected>' in page
    # The day and hour fields are hidden by a file of the site's, under the CSP.
    assert "accounts/digests" in page and "<script>" not in page


def test_the_hours_are_said_to_be_on_the_users_own_clock(signed_in, ada):
    page = text(signed_in.get(CENTRE))
    # Nothing saved yet: UTC, which the digests use until the user saves a zone.
    assert 'your time zone <strong id="digest-zone">UTC</strong>' in page
    assert "on your clock" in page
    Recipient.objects.create(user=ada, time_zone="Asia/Tokyo")
    assert '<strong id="digest-zone">Asia/Tokyo</strong>' in text(signed_in.get(CENTRE))


def test_a_daily_digest_at_an_hour_is_stored_and_redirects_with_a_message(signed_in, ada):
    response = save(signed_in, "digests", how_often(cadence="daily", hour="7", day="3"))
    assert response.status_code == 302
    assert response["Location"] == CENTRE + "#digests"
    # The day is for a weekly digest only: not stored for a daily one.
    assert digest_rows(ada) == {"account": ("daily", 7, None)}
    page = text(signed_in.get(CENTRE))
    assert "Your digest choices are saved." in page
    assert '<option value="daily" selected>' in page
    assert '<option value="7" selected>07:00</option>' in page


@pytest.mark.parametrize(
    ("fields", "row"),
    [
        (how_often(cadence="weekly", hour="18", day="6"), ("weekly", 18, 6)),
        # Hourly uses neither the day nor the hour the page sends with it.
        (how_often(cadence="hourly", hour="18", day="6"), ("hourly", None, None)),
        (how_often(cadence="hourly", hour="", day=""), ("hourly", None, None)),
    ],
)
def test_each_cadence_is_stored_with_only_what_it_uses(signed_in, ada, fields, row):
    assert save(signed_in, "digests", fields).status_code == 302
    assert digest_rows(ada) == {"account": row}


def test_as_it_happens_again_keeps_no_row(signed_in, ada):
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.DAILY, 9)})
    assert save(signed_in, "digests", how_often(cadence="instant")).status_code == 302
    assert digest_rows(ada) == {}


@pytest.mark.parametrize(
    ("prefix", "fields", "error"),
    [
        ("", how_often(cadence="daily", hour=""), "Choose the hour the digest goes out."),
        ("", how_often(cadence="weekly", day=""), "Choose the day a weekly digest goes out."),
        ("", how_often(cadence="weekly", hour="", day=""), "Choose the hour the digest goes out."),
        ("", how_often(cadence="daily", hour="24"), "The hour is a whole number from 0 to 23."),
        ("", how_often(cadence="daily", hour="-1"), "The hour is a whole number from 0 to 23."),
        ("", how_often(cadence="daily", hour="7.5"), "The hour is a whole number from 0 to 23."),
        ("", how_often(cadence="weekly", day="7"), "The day is a number from 0 (Monday) to 6"),
        ("", how_often(cadence="monthly"), "Select a valid choice."),
        ("/ru", how_often(cadence="daily", hour="24"), "Час — целое число от 0 до 23."),
        ("/de", how_often(cadence="weekly", day=""), "Wählen Sie den Tag, an dem die wöchentliche"),
    ],
)
def test_a_digest_that_cannot_be_is_refused_and_the_users_choice_kept(
    signed_in, ada, prefix, fields, error
):
    response = save(signed_in, "digests", fields, prefix=prefix)
    assert response.status_code == 200
    page = text(response)
    assert error in page
    assert digest_rows(ada) == {}
    # The page shows what they chose, to correct.
    cadence = fields["digest-account"]
    if cadence != "monthly":
        assert f'<option value="{cadence}" selected>' in page


def test_a_bad_hour_for_a_choice_that_does_not_use_it_is_ignored(signed_in, ada):
    response = save(signed_in, "digests", how_often(cadence="hourly", hour="99", day="nine"))
    assert response.status_code == 302
    assert digest_rows(ada) == {"account": ("hourly", None, None)}


def test_a_required_category_cannot_be_made_a_digest_through_the_page(signed_in, ada):
    data = {
        **how_often(cadence="daily"),
        **how_often("security", "daily"),
        **how_often("demo", "hourly"),
    }
    assert save(signed_in, "digests", data).status_code == 302
    # The fields the page has no place for are not read.
    assert digest_rows(ada) == {"account": ("daily", 9, None)}


def test_with_htmx_the_digests_are_saved_in_place(signed_in, ada):
    response = save(signed_in, "digests", how_often(cadence="weekly", hour="8", day="4"), htmx=True)
    assert response.status_code == 200
    body = text(response)
    assert body.lstrip().startswith('<section id="digests"')
    assert "<html" not in body and 'id="quiet"' not in body
    assert "Your digest choices are saved." in body
    assert '<option value="4" selected>Friday</option>' in body
    assert digest_rows(ada) == {"account": ("weekly", 8, 4)}


def test_with_htmx_a_refused_digest_answers_200_with_the_section(signed_in, ada):
    response = save(signed_in, "digests", how_often(cadence="daily", hour=""), htmx=True)
    assert response.status_code == 200
    body = text(response)
    assert body.lstrip().startswith('<section id="digests"')
    assert "Choose the hour the digest goes out." in body
    assert digest_rows(ada) == {}


def test_a_zone_saved_in_place_is_the_zone_the_digests_section_names(signed_in):
    response = save(signed_in, "quiet", quiet(time_zone="America/New_York"), htmx=True)
    # Swapped out of band into the digests section, which htmx does not otherwise redraw.
    assert '<strong id="digest-zone" hx-swap-oob="true">America/New_York</strong>' in text(response)
    refused = save(signed_in, "quiet", quiet(time_zone="Nowhere"), htmx=True)
    assert "digest-zone" not in text(refused)


def test_a_page_left_open_does_not_undo_a_digest_chosen_since(signed_in, ada):
    page = text(signed_in.get(CENTRE))
    assert 'name="initial-digest-account" value="instant"' in page
    loaded = {"initial-digest-account": "instant", "initial-digest-account-hour": "9",
              "initial-digest-account-weekday": "0"}  # fmt: skip
    # Another tab chose a daily digest; this one is saved as it was loaded.
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.DAILY, 8)})
    assert save(signed_in, "digests", {**how_often(), **loaded}).status_code == 302
    assert digest_rows(ada) == {"account": ("daily", 8, None)}
    # Changed on this page, it is the reader's choice and stands.
    assert save(signed_in, "digests", {**how_often(cadence="hourly"), **loaded}).status_code == 302
    assert digest_rows(ada) == {"account": ("hourly", None, None)}


# --- Time zone and quiet hours ---------------------------------------------------------------


def quiet(**fields) -> dict:
    return {"time_zone": "Europe/Berlin", "quiet_start": "", "quiet_end": "", **fields}


def test_a_time_zone_and_quiet_hours_are_stored_with_the_pages_language(signed_in, ada):
    data = quiet(quiet_start="22:00", quiet_end="07:00", quiet_email="on")
    response = save(signed_in, "quiet", data, prefix="/de")
    assert response["Location"] == "/de" + CENTRE + "#quiet"
    recipient = Recipient.objects.get(user=ada)
    assert (recipient.time_zone, recipient.quiet_start, recipient.quiet_end) == (
        "Europe/Berlin",
        time(22),
        time(7),
    )
    assert recipient.quiet_email is True
    assert recipient.language == "de"
    assert "Ihre Zeitzone und Ruhezeiten sind gespeichert." in text(signed_in.get("/de" + CENTRE))


@pytest.mark.parametrize(
    ("prefix", "box", "intro"),
    [
        ("", "Hold messages by email during quiet hours too", "messages by email wait too"),
        (
            "/ru",
            "Задерживать в тихие часы и сообщения по каналу «электронная почта»",
            "сообщения по каналу «электронная почта» ждут тоже",
        ),
        (
            "/de",
            "Während der Ruhezeiten auch Nachrichten per E-Mail zurückhalten",
            "Nachrichten per E-Mail warten auch",
        ),
    ],
)
def test_the_box_for_channels_held_when_asked_names_them_in_the_users_language(
    signed_in, prefix, box, intro
):
    page = text(signed_in.get(prefix + CENTRE))
    assert box in page
    assert intro in page


def test_a_site_without_a_channel_held_when_asked_has_no_box_and_keeps_the_stored_one(
    signed_in, ada, settings
):
    Recipient.objects.create(user=ada, quiet_email=True)
    settings.DELIVERY_CHANNELS = {
        name: path for name, path in settings.DELIVERY_CHANNELS.items() if name != "email"
    }
    page = text(signed_in.get(CENTRE))
    assert 'name="quiet_email"' not in page
    assert "wait too if you tick the box" not in page
    assert (
        save(signed_in, "quiet", quiet(quiet_start="22:00", quiet_end="07:00")).status_code == 302
    )
    assert Recipient.objects.get(user=ada).quiet_email is True


def test_an_existing_recipients_language_is_kept(signed_in, ada):
    Recipient.objects.create(user=ada, language="ru")
    save(signed_in, "quiet", quiet(), prefix="/de")
    assert Recipient.objects.get(user=ada).language == "ru"


def test_quiet_hours_are_emptied_by_leaving_both_blank(signed_in, ada):
    Recipient.objects.create(user=ada, quiet_start=time(22), quiet_end=time(7))
    assert save(signed_in, "quiet", quiet()).status_code == 302
    assert Recipient.objects.get(user=ada).quiet_start is None


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"time_zone": "Mars/Olympus"}, "Mars/Olympus is not a time zone"),
        ({"time_zone": ""}, "This field is required."),
        ({"time_zone": "x" * 65}, "at most 64 characters"),
        ({"time_zone": "Europe/Berlin\x00"}, "Null characters are not allowed."),
        ({"time_zone": "../../etc/passwd"}, "is not a time zone"),
        # Names Python and the database know that name no place.
        ({"time_zone": "localtime"}, "is not a time zone"),
        ({"time_zone": "Factory"}, "is not a time zone"),
        ({"time_zone": "posix/Europe/Berlin"}, "is not a time zone"),
        ({"quiet_start": "22:00"}, "Quiet hours need both a start and an end, or neither."),
        ({"quiet_end": "07:00"}, "Quiet hours need both a start and an end, or neither."),
        (
            {"quiet_start": "07:00", "quiet_end": "07:00"},
            "Quiet hours must end at another time than they start.",
        ),
        ({"quiet_start": "25:00", "quiet_end": "07:00"}, "Enter a valid time."),
        ({"quiet_start": "9" * 100_000, "quiet_end": "07:00"}, "Enter a valid time."),
    ],
)
def test_a_bad_time_zone_or_window_is_refused_and_the_users_values_kept(
    signed_in, ada, fields, error
):
    data = quiet(**fields)
    response = save(signed_in, "quiet", data)
    assert response.status_code == 200
    assert error in text(response)
    assert not Recipient.objects.filter(user=ada).exists()
    if fields.get("time_zone") == "Mars/Olympus":
        assert 'value="Mars/Olympus"' in response.content.decode()


def test_quiet_hours_are_kept_to_the_minute(signed_in, ada):
    save(signed_in, "quiet", quiet(quiet_start="22:00:00.5", quiet_end="07:00:59"))
    recipient = Recipient.objects.get(user=ada)
    assert (recipient.quiet_start.isoformat(), recipient.quiet_end.isoformat()) == (
        "22:00:00",
        "07:00:00",
    )


def test_a_refusal_in_german_is_german(signed_in):
    response = save(signed_in, "quiet", quiet(quiet_start="22:00"), prefix="/de")
    assert "Ruhezeiten brauchen einen Anfang und ein Ende, oder keines." in text(response)


# --- Addresses -------------------------------------------------------------------------------


def test_addresses_are_added_changed_and_removed(signed_in, ada):
    response = save(signed_in, "addresses", {"address-telegram": "1001", "address-discord": ""})
    assert response.status_code == 302
    [row] = ChannelAddress.objects.filter(user=ada)
    assert (row.channel, row.address, row.is_active) == ("telegram", "1001", True)
    save(signed_in, "addresses", {"address-telegram": " @v10r_reader ", "address-discord": "42"})
    assert dict(ChannelAddress.objects.values_list("channel", "address")) == {
        "telegram": "@v10r_reader",
        "discord": "42",
    }
    assert ChannelAddress.objects.get(channel="telegram").pk == row.pk
    save(signed_in, "addresses", {"address-telegram": "", "address-discord": "42"})
    assert list(ChannelAddress.objects.values_list("channel", flat=True)) == ["discord"]


def test_a_browsers_push_subscription_is_no_typed_address_and_survives_a_save(signed_in, ada):
    browser = ChannelAddress.objects.create(
        user=ada, channel="webpush", address="https://push.example.com/send/ada"
    )
    assert 'name="address-webpush"' not in text(signed_in.get(CENTRE))
    typed = {"address-telegram": "1001", "address-webpush": "https://push.example.com/typed"}
    assert save(signed_in, "addresses", typed).status_code == 302
    assert set(ChannelAddress.objects.values_list("channel", "address", "is_active")) == {
        ("telegram", "1001", True),
        ("webpush", browser.address, True),
    }


@pytest.mark.parametrize(("prefix", "channel", "address", "error"), REFUSED_ADDRESSES)
def test_a_bad_address_is_refused_as_the_staff_console_refuses_it(
    signed_in, ada, prefix, channel, address, error
):
    response = save(signed_in, "addresses", {f"address-{channel}": address}, prefix=prefix)
    assert response.status_code == 200
    assert error in text(response)
    assert not ChannelAddress.objects.exists()
    if "\x00" not in address and len(address) < 500:
        assert f'value="{html.escape(address)}"' in response.content.decode()


def test_a_webhook_address_gets_a_signing_secret_shown_once(
    signed_in, ada, settings, rebuilt_channels
):
    settings.DELIVERY_WEBHOOK_ALLOW_LOOPBACK = True
    rebuilt_channels()  # the webhook channel's guard is built from it
    response = save(signed_in, "addresses", {"address-webhook": "http://127.0.0.1:9/hook"})
    assert response.status_code == 302
    secret = WebhookSecret.objects.get(address__user=ada).secret
    first = text(signed_in.get(CENTRE))
    assert secret in first
    assert secret not in text(signed_in.get(CENTRE))
    # Saved again, unchanged or changed, it keeps its secret.
    save(signed_in, "addresses", {"address-webhook": "http://127.0.0.1:9/other"})
    assert WebhookSecret.objects.get(address__user=ada).secret == secret


def test_a_switched_off_address_is_explained_and_switched_on_by_typing_it_again(signed_in, ada):
    row = ChannelAddress.objects.create(user=ada, channel="telegram", address="1001")
    ChannelAddress.objects.filter(pk=row.pk).update(
        is_active=False, deactivated_reason="BOT_BLOCKED"
    )
    page = text(signed_in.get(CENTRE))
    assert "1001 was switched off" in page and "BOT_BLOCKED" in page
    assert save(signed_in, "addresses", {"address-telegram": "1001"}).status_code == 302
    row.refresh_from_db()
    assert row.is_active and row.deactivated_reason == ""
    assert ChannelAddress.objects.count() == 1


def test_another_users_addresses_are_neither_shown_nor_touched(signed_in, django_user_model):
    other = django_user_model.objects.create_user("bob")
    theirs = ChannelAddress.objects.create(user=other, channel="telegram", address="7777")
    assert "7777" not in signed_in.get(CENTRE).content.decode()
    save(signed_in, "addresses", {"address-telegram": "1001", "user": other.pk})
    theirs.refresh_from_db()
    assert theirs.address == "7777" and theirs.user == other
    assert ChannelAddress.objects.get(address="1001").user.username == "ada"


# --- htmx ------------------------------------------------------------------------------------


def test_with_htmx_a_section_is_saved_and_answered_with_its_partial(signed_in, ada):
    response = save(signed_in, "choices", grid(off=[("account", "email")]), htmx=True)
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="choices"')
    assert "<html" not in body and 'id="quiet"' not in body
    assert "Your choices are saved." in body
    assert preferences.of(ada).enabled("account", "email") is False


def test_with_htmx_a_refusal_answers_200_so_the_section_shows_it(signed_in):
    response = save(signed_in, "quiet", quiet(time_zone="Nowhere"), htmx=True)
    assert response.status_code == 200
    assert text(response).lstrip().startswith('<section id="quiet"')
    assert "Nowhere is not a time zone" in text(response)


# --- Hostile posts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"section": ""},
        {"section": "nonsense"},
        {"section": "choices\x00"},
        {"section": "x" * 10_000},
    ],
)
def test_a_post_without_a_known_section_is_a_400_that_saves_nothing(signed_in, data):
    response = signed_in.post(CENTRE, data)
    assert response.status_code == 400
    assert "This form is out of date; nothing was saved." in text(response)
    assert not Recipient.objects.exists() and not ChannelPreference.objects.exists()


@pytest.mark.parametrize("section", ["choices", "digests", "quiet", "addresses"])
@pytest.mark.parametrize(
    "junk",
    [
        {},
        {"digest-account": ["daily", "weekly"], "digest-account-hour": "\x00"},
        {"digest-account": "weekly", "digest-account-weekday": "9" * 100_000},
        {"digest-account": "daily", "initial-digest-account": "\x00", "digest-account-hour": "1e9"},
        {"time_zone": ["UTC", "Europe/Berlin"], "quiet_start": ["1", "2"]},
        {"quiet_email": "\x00", "address-telegram": "\x00" * 1000},
        {"on-security-email": "x" * 100_000, "address-discord": "9" * 600},
        {"address-webhook": "http://[::1", "time_zone": "Europe/\u202eBerlin"},
        {"address-webhook": "http://" + "a." * 200 + "example/"},
    ],
)
def test_no_post_gets_a_500(signed_in, section, junk):
    assert signed_in.post(CENTRE, {"section": section, **junk}).status_code < 500
    assert (
        signed_in.post(CENTRE, {"section": section, **junk}, headers={"HX-Request": "true"})
    ).status_code < 500


@pytest.mark.parametrize("section", ["choices", "digests", "quiet", "addresses"])
def test_a_body_that_is_not_utf8_gets_no_500(signed_in, section):
    body = (
        f"section={section}&time_zone=%ff%fe&address-telegram=%c0%80&on-security-email=%ff"
        "&digest-account=%ff&digest-account-hour=%c0%80"
    )
    response = signed_in.generic(
        "POST", CENTRE, body, content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code < 500


def test_a_post_of_too_many_fields_is_refused_before_any_form_reads_it(signed_in):
    data = {"section": "choices", **{f"on-x-{n}": "on" for n in range(1500)}}
    assert signed_in.post(CENTRE, data).status_code == 400
    assert not ChannelPreference.objects.exists()


def test_a_post_without_the_csrf_token_is_refused(ada):
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    assert client.post(CENTRE, {"section": "quiet", **quiet()}).status_code == 403
    assert not Recipient.objects.exists()


def test_a_signed_out_post_changes_nothing(client):
    response = client.post(CENTRE, {"section": "quiet", **quiet()})
    assert response.status_code == 302
    assert not Recipient.objects.exists()


# --- The staff console -----------------------------------------------------------------------


@pytest.fixture
def editor(django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("boss", "b@example.com", "pw"))
    return client


@pytest.fixture
def viewer(django_user_model):
    person = django_user_model.objects.create_user("viewer", is_staff=True)
    person.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client = Client()
    client.force_login(person)
    return client


def admin_form(recipient: Recipient, *, off=(), **fields) -> dict:
    return {
        "language": recipient.language,
        "time_zone": recipient.time_zone,
        "quiet_start": "",
        "quiet_end": "",
        **grid(off=off),
        **fields,
    }


def test_staff_edit_a_users_settings_and_choices(editor, ada):
    recipient = Recipient.objects.create(user=ada)
    data = admin_form(
        recipient,
        off=[("account", "email")],
        time_zone="Asia/Tokyo",
        quiet_start="23:00",
        quiet_end="06:30",
    )
    response = editor.post(f"{ADMIN}{ada.pk}/change/", data)
    assert response.status_code == 302, text(response)
    recipient.refresh_from_db()
    assert (recipient.time_zone, recipient.quiet_start) == ("Asia/Tokyo", time(23))
    assert preferences.of(ada).enabled("account", "email") is False


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"time_zone": "Mars/Olympus"}, "Mars/Olympus is not a time zone"),
        ({"quiet_start": "22:00"}, "Quiet hours need both a start and an end, or neither."),
        ({"quiet_start": "07:00", "quiet_end": "07:00"}, "must end at another time"),
    ],
)
def test_the_staff_console_refuses_what_the_centre_refuses(editor, ada, fields, error):
    recipient = Recipient.objects.create(user=ada)
    response = editor.post(f"{ADMIN}{ada.pk}/change/", admin_form(recipient, **fields))
    assert response.status_code == 200
    assert error in text(response)
    recipient.refresh_from_db()
    assert recipient.time_zone == "UTC" and recipient.quiet_start is None


def test_the_staff_console_keeps_a_required_category_on_and_saves_nothing(editor, ada):
    recipient = Recipient.objects.create(user=ada)
    every = [("security", channel) for channel in preferences.choosable_channels()]
    data = admin_form(recipient, off=every, time_zone="Asia/Tokyo")
    response = editor.post(f"{ADMIN}{ada.pk}/change/", data)
    assert response.status_code == 200
    assert "Security messages must stay on for at least one channel." in text(response)
    assert not ChannelPreference.objects.exists()
    recipient.refresh_from_db()
    assert recipient.time_zone == "UTC"


def test_staff_add_settings_for_a_user_who_has_none(editor, ada):
    response = editor.post(
        f"{ADMIN}add/", {"user": ada.pk, "language": "ru", "time_zone": "Europe/Moscow", **grid()}
    )
    assert response.status_code == 302, text(response)
    assert Recipient.objects.get(user=ada).time_zone == "Europe/Moscow"


def test_view_only_staff_see_the_settings_and_cannot_change_them(viewer, ada):
    recipient = Recipient.objects.create(user=ada, time_zone="Europe/Berlin")
    ChannelPreference.objects.create(user=ada, category="account", channel="email", enabled=False)
    page = viewer.get(f"{ADMIN}{ada.pk}/change/")
    assert page.status_code == 200
    body = text(page)
    assert "Europe/Berlin" in body
    assert "Email off" in body and 'name="on-account-email"' not in body
    response = viewer.post(f"{ADMIN}{ada.pk}/change/", admin_form(recipient, time_zone="UTC"))
    assert response.status_code == 403
    recipient.refresh_from_db()
    assert recipient.time_zone == "Europe/Berlin"
    assert viewer.post(f"{ADMIN}add/", {"user": ada.pk}).status_code == 403


def test_the_staff_list_shows_each_users_zone_and_quiet_hours(editor, ada):
    Recipient.objects.create(
        user=ada, time_zone="Europe/Berlin", quiet_start=time(22), quiet_end=time(7)
    )
    body = text(editor.get(ADMIN))
    assert "Europe/Berlin" in body and "22:00–07:00" in body


# --- What the choices do ---------------------------------------------------------------------


def test_an_email_turned_off_on_the_centre_skips_the_next_one_as_opted_out(signed_in, ada):
    save(signed_in, "choices", grid(off=[("account", "email")]))
    save(signed_in, "addresses", {"address-telegram": "1001"})
    sent = send_notification(user=ada, type="welcome", params={"name": "Ada"})
    assert sent.skipped == {"email": "opted_out"}
    assert sent.queued == ("telegram", "inapp")
    email = NotificationDelivery.objects.get(notification=sent.notification, channel="email")
    assert (email.status, email.skip_reason) == (Status.SKIPPED, "opted_out")


def test_a_daily_digest_chosen_on_the_centre_gathers_the_next_welcome(signed_in, ada):
    save(signed_in, "quiet", quiet(time_zone="Europe/Berlin"))
    save(signed_in, "digests", how_often(cadence="daily", hour="7"))
    sent = send_notification(user=ada, type="welcome", params={"name": "Ada"})
    # No delivery of its own on email: it joined the digest that goes out at 07:00 Berlin.
    assert "email" in sent.digested and "email" not in sent.queued
    carrier = NotificationDelivery.objects.get(pk=sent.digested["email"])
    assert carrier.notification.type == digests.DIGEST
    assert carrier.status == Status.PENDING
    due = carrier.next_attempt_at.astimezone(ZoneInfo("Europe/Berlin"))
    assert (due.hour, due.minute) == (7, 0)


def test_the_staff_pages_render_for_an_editor_and_a_viewer(editor, viewer, ada):
    Recipient.objects.create(user=ada)
    for client in (editor, viewer):
        for url in (
            ADMIN,
            f"{ADMIN}{ada.pk}/change/",
            f"/ru{ADMIN}",
            f"/de{ADMIN}{ada.pk}/change/",
        ):
            assert client.get(url).status_code == 200, url
    add = text(editor.get(f"{ADMIN}add/"))
    assert 'name="user"' in add and 'name="on-security-email"' in add
    assert (
        'name="on-security-email" id="id_on-security-email" checked'
        in editor.get(f"{ADMIN}{ada.pk}/change/").content.decode()
    )
    assert viewer.get(f"{ADMIN}add/").status_code == 403


# --- A save changes only what its reader changed -----------------------------------------------


def loaded(choices: dict[tuple[str, str], bool]) -> dict[str, str]:
    """The hidden initial values a page carries for each box, as it was when loaded."""
    return {
        f"initial-on-{cat}-{ch}": str(
            choices.get((cat, ch), preferences.Preferences().enabled(cat, ch))
        )
        for cat in preferences.choosable_categories()
        for ch in preferences.choosable_channels()
    }


def test_a_page_left_open_does_not_undo_an_unsubscribe_made_since(signed_in, ada):
    # The page was loaded with every default on; then an email's unsubscribe link turned
    # account email off; then the reader saves the page, changing Telegram only.
    page = signed_in.get(CENTRE).content.decode()
    assert 'name="initial-on-account-email" value="True"' in page
    before = loaded({})
    preferences.choose(ada, choices={("account", "email"): False})
    data = {**grid(off=[("account", "telegram")]), **before}
    assert save(signed_in, "choices", data).status_code == 302
    assert preferences.of(ada).enabled("account", "email") is False
    assert preferences.of(ada).enabled("account", "telegram") is False


def test_a_staff_save_does_not_undo_an_unsubscribe_made_while_the_form_was_open(editor, ada):
    recipient = Recipient.objects.create(user=ada)
    before = loaded({})
    preferences.choose(ada, choices={("account", "email"): False})
    data = {**admin_form(recipient, language="de"), **before}
    response = editor.post(f"{ADMIN}{ada.pk}/change/", data)
    assert response.status_code == 302, text(response)
    assert preferences.of(ada).enabled("account", "email") is False
    recipient.refresh_from_db()
    assert recipient.language == "de"


def test_adding_settings_for_a_user_keeps_the_choices_they_made(editor, ada):
    # An unsubscribe link stores a choice without a settings row; staff then add the row.
    preferences.choose(ada, choices={("account", "email"): False})
    data = {"user": ada.pk, "language": "en", "time_zone": "UTC", **grid(), **loaded({})}
    response = editor.post(f"{ADMIN}add/", data)
    assert response.status_code == 302, text(response)
    assert preferences.of(ada).enabled("account", "email") is False


def test_staff_who_may_add_but_not_change_get_the_add_form(django_user_model, ada):
    person = django_user_model.objects.create_user("adder", is_staff=True)
    person.user_permissions.set(
        Permission.objects.filter(codename__in=["add_recipient", "view_recipient"])
    )
    client = Client()
    client.force_login(person)
    page = client.get(f"{ADMIN}add/")
    assert page.status_code == 200
    assert 'name="on-account-email"' in page.content.decode()


def test_the_inbox_is_a_channel_to_choose_but_no_address_to_type(signed_in):
    page = text(signed_in.get(CENTRE))
    assert 'name="on-account-inapp"' in page
    assert 'name="address-inapp"' not in page
    assert 'name="address-telegram"' in page


def test_the_centre_says_which_zone_its_times_are_in_and_follows_a_saved_one(signed_in, ada):
    from recipients.models import Recipient

    assert 'data-time-zone="UTC"' in signed_in.get(CENTRE).content.decode()
    Recipient.objects.create(user=ada, time_zone="Europe/Berlin")
    page = text(signed_in.get("/de" + CENTRE))
    assert "Alle Zeiten in der Zeitzone Europe/Berlin" in page
