"""The preference centre in Chromium, in each language: reached signed out, it asks for a
sign-in and comes back; a section saves in place with htmx, or with a plain POST when the
browser runs no JavaScript; the time zone comes from the browser; a digest's day and hour are
shown only for the choices that use them; nothing scrolls sideways at 390 or 1440 px; all
under the site's CSP, with no violation."""

from __future__ import annotations

import os
import re

import pytest

from recipients import preferences
from recipients.models import DigestChoice, Recipient
from tests.browser.conftest import (
    READER_PASSWORD,
    RECORD_CSP_VIOLATIONS,
    csp_violations,
    in_each_language,
)

pytestmark = pytest.mark.browser

PASSWORD = READER_PASSWORD
CENTRE = "/account/notifications/"
SHOTS = os.environ.get("CENTRE_SHOTS")

WORDS = {
    "": {
        "sign_in": "Sign in",
        "title": "Notification settings",
        "saved": "Your choices are saved.",
        "quiet_saved": "Your time zone and quiet hours are saved.",
        "refused": "Security messages must stay on for at least one channel.",
        "no_zone": "Mars/Olympus is not a time zone",
        "digests_saved": "Your digest choices are saved.",
    },
    "/ru": {
        "sign_in": "Войти",
        "title": "Настройки уведомлений",
        "saved": "Ваш выбор сохранён.",
        "quiet_saved": "Часовой пояс и тихие часы сохранены.",
        "refused": "Сообщения категории «Безопасность» должны оставаться включёнными",
        "no_zone": "Mars/Olympus — не часовой пояс",
        "digests_saved": "Настройки сводок сохранены.",
    },
    "/de": {
        "sign_in": "Anmelden",
        "title": "Benachrichtigungen",
        "saved": "Ihre Auswahl ist gespeichert.",
        "quiet_saved": "Ihre Zeitzone und Ruhezeiten sind gespeichert.",
        "refused": "Nachrichten der Kategorie „Sicherheit“ müssen auf mindestens einem Kanal",
        "no_zone": "Mars/Olympus ist keine Zeitzone",
        "digests_saved": "Ihre Einstellungen für Zusammenfassungen sind gespeichert.",
    },
}

prefix, words = in_each_language(WORDS)


def saved_in_place(page, section: str, *, button: str, saved: str) -> None:
    """Click a section's save button and see it saved by htmx: the request is htmx's, the
    section says saved, the page was not reloaded (the window keeps the mark the test set on
    it) and the keyboard's place survives the swap (the button has the focus again)."""
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.click(f"#{button}")
    assert answer.value.request.headers.get("hx-request") == "true"
    page.wait_for_selector(f"#{section} .section-saved:text-is('{saved}')")
    assert page.evaluate("window.__stayed") is True
    assert page.evaluate("document.activeElement.id") == button


def tab(chromium, **options):
    """A tab in a context of its own (a time zone, a width, JavaScript off), recording CSP
    violations as the harness's page does."""
    context = chromium.new_context(**options)
    context.add_init_script(RECORD_CSP_VIOLATIONS)
    return context, context.new_page()


def sign_in_through_the_centre(page, site, *, prefix: str, words: dict) -> None:
    page.goto(f"{site.url}{prefix}{CENTRE}")
    page.wait_for_url(re.compile(re.escape(f"{site.url}{prefix}/account/sign-in/?next=")))
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click(f"form[data-sign-in] button:text-is('{words['sign_in']}')")
    page.wait_for_url(f"{site.url}{prefix}{CENTRE}")
    assert page.text_content("h1") == words["title"]


def no_sideways_scroll(page) -> bool:
    return page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def test_sign_in_and_turn_a_category_off_in_place(site, chromium, ada, prefix, words):
    context, page = tab(chromium, timezone_id="Europe/Berlin")
    try:
        sign_in_through_the_centre(page, site, prefix=prefix, words=words)
        # A mark on the window: a whole-page load would wipe it, an htmx swap keeps it.
        page.evaluate("window.__stayed = true")
        page.uncheck("#id_on-account-email")
        saved_in_place(page, "choices", button="save-choices", saved=words["saved"])
        assert not page.is_checked("#id_on-account-email")
        assert preferences.of(ada).enabled("account", "email") is False

        # The last channel of a required category is refused, in place and in words.
        for channel in preferences.choosable_channels():
            page.uncheck(f"#id_on-security-{channel}")
        page.click("#choices button[type=submit]")
        page.wait_for_selector("#choices .errorlist")
        assert words["refused"] in page.text_content("#choices .errorlist")
        assert preferences.of(ada).enabled("security", "email") is True
        assert page.evaluate("window.__stayed") is True
        assert csp_violations(page) == []
    finally:
        context.close()


def test_the_time_zone_comes_from_the_browser_and_is_saved(site, chromium, ada, prefix, words):
    context, page = tab(chromium, timezone_id="Asia/Tokyo")
    try:
        sign_in_through_the_centre(page, site, prefix=prefix, words=words)
        assert page.input_value("#id_time_zone") == "Asia/Tokyo"
        assert page.is_visible("[data-time-zone-note]")
        assert not Recipient.objects.filter(user=ada).exists()  # offered, not yet saved
        page.fill("#id_quiet_start", "22:00")
        page.fill("#id_quiet_end", "07:00")
        page.click("#quiet button[type=submit]")
        page.wait_for_selector(f"#quiet .section-saved:text-is('{words['quiet_saved']}')")
        recipient = Recipient.objects.get(user=ada)
        assert recipient.time_zone == "Asia/Tokyo"
        assert (recipient.quiet_start.hour, recipient.quiet_end.hour) == (22, 7)

        # A zone the database does not know is refused, the typed value kept.
        page.fill("#id_time_zone", "Mars/Olympus")
        page.click("#quiet button[type=submit]")
        page.wait_for_selector("#quiet .errorlist")
        assert words["no_zone"] in page.text_content("#quiet .errorlist")
        assert page.input_value("#id_time_zone") == "Mars/Olympus"
        assert Recipient.objects.get(user=ada).time_zone == "Asia/Tokyo"

        # Saved once, the browser's zone is no longer offered over it.
        page.reload()
        assert page.input_value("#id_time_zone") == "Asia/Tokyo"
        assert page.is_hidden("[data-time-zone-note]")
        assert csp_violations(page) == []
    finally:
        context.close()


def digest_of(user) -> tuple | None:
    row = DigestChoice.objects.filter(user=user, category="account").first()
    return (row.cadence, row.hour, row.weekday) if row else None


def test_a_daily_digest_at_an_hour_is_chosen_and_saved_in_place(site, chromium, ada, prefix, words):
    Recipient.objects.create(user=ada, time_zone="Asia/Tokyo")
    context, page = tab(chromium, timezone_id="Asia/Tokyo")
    try:
        sign_in_through_the_centre(page, site, prefix=prefix, words=words)
        weekday, hour = "#id_digest-account-weekday", "#id_digest-account-hour"
        assert page.text_content("#digest-zone") == "Asia/Tokyo"
        # As it happens: neither a day nor an hour is asked, nor the note saying when they count.
        assert page.is_hidden(weekday) and page.is_hidden(hour)
        assert page.is_hidden("#digest-note-account")
        # A required category has no choice.
        assert page.locator("#id_digest-security").count() == 0
        page.evaluate("window.__stayed = true")

        page.select_option("#id_digest-account", "weekly")
        assert page.is_visible(weekday) and page.is_visible(hour)
        page.select_option("#id_digest-account", "daily")
        assert page.is_hidden(weekday) and page.is_visible(hour)
        page.select_option(hour, "7")
        saved_in_place(page, "digests", button="save-digests", saved=words["digests_saved"])
        assert digest_of(ada) == ("daily", 7, None)
        # The swapped section is shown as the choice needs it, and as saved.
        assert page.input_value("#id_digest-account") == "daily"
        assert page.input_value(hour) == "7"
        assert page.is_hidden(weekday) and page.is_visible(hour)

        # A zone saved in place is the one the digests' hours are said to be on.
        page.fill("#id_time_zone", "Europe/Berlin")
        page.click("#save-quiet")
        page.wait_for_selector("#digest-zone:text-is('Europe/Berlin')")
        assert page.locator("#digest-zone").count() == 1

        page.reload()
        assert page.input_value("#id_digest-account") == "daily"
        assert page.input_value(hour) == "7"
        assert csp_violations(page) == []
    finally:
        context.close()


def test_without_javascript_a_digest_shows_every_field_and_saves(site, chromium, ada):
    context, page = tab(chromium, java_script_enabled=False)
    try:
        sign_in_through_the_centre(page, site, prefix="", words=WORDS[""])
        weekday, hour = "#id_digest-account-weekday", "#id_digest-account-hour"
        # Every field is there, and the note says which choice uses which.
        assert page.is_visible(weekday) and page.is_visible(hour)
        assert page.is_visible("#digest-note-account")
        page.select_option("#id_digest-account", "weekly")
        page.select_option(weekday, "4")
        page.select_option(hour, "18")
        page.click("#save-digests")
        page.wait_for_url(f"{site.url}{CENTRE}#digests")
        assert WORDS[""]["digests_saved"] in page.text_content(".messages")
        assert digest_of(ada) == ("weekly", 18, 4)
        assert page.input_value(weekday) == "4"
    finally:
        context.close()


def test_without_javascript_a_section_posts_the_page_and_comes_back(site, chromium, ada):
    context, page = tab(chromium, java_script_enabled=False, timezone_id="Asia/Tokyo")
    try:
        sign_in_through_the_centre(page, site, prefix="/de", words=WORDS["/de"])
        # No script ran: the field keeps the stored default.
        assert page.input_value("#id_time_zone") == "UTC"
        page.fill("#id_time_zone", "Europe/Berlin")
        page.fill("#id_quiet_start", "21:30")
        page.fill("#id_quiet_end", "06:00")
        page.check("#id_quiet_email")
        page.click("#quiet button[type=submit]")
        page.wait_for_url(f"{site.url}/de{CENTRE}#quiet")
        assert WORDS["/de"]["quiet_saved"] in page.text_content(".messages")
        recipient = Recipient.objects.get(user=ada)
        assert (recipient.time_zone, recipient.quiet_email) == ("Europe/Berlin", True)
        assert page.input_value("#id_quiet_start") == "21:30"

        # A refusal answers with the whole page, the user's values in it.
        page.fill("#id_address-telegram", "not a chat")
        page.click("#addresses button[type=submit]")
        page.wait_for_selector("#addresses .errorlist")
        assert "Telegram" in page.text_content("#addresses .errorlist")
        assert page.input_value("#id_address-telegram") == "not a chat"
    finally:
        context.close()


@pytest.mark.parametrize("width", [390, 1440])
def test_nothing_scrolls_sideways(site, chromium, ada, prefix, words, width):
    # An address of one long word, which the page must break.
    ada.email = "ada.lovelace.analytical.engine.notes@" + "sub-domain." * 4 + "example.com"
    ada.save()
    context, page = tab(chromium, viewport={"width": width, "height": 900})
    try:
        sign_in_through_the_centre(page, site, prefix=prefix, words=words)
        assert ada.email in page.text_content("#addresses")
        assert no_sideways_scroll(page)
        grid_display = page.evaluate(
            "getComputedStyle(document.querySelector('.preference-grid tr')).display"
        )
        # A table on a wide screen; a card a category on a phone, each box named.
        assert grid_display == ("block" if width == 390 else "table-row")
        named = page.evaluate(
            "document.querySelector('.preference-grid .toggle-channel')"
            ".getBoundingClientRect().width > 1"
        )
        assert named is (width == 390)

        # Errors and a long address must not widen it either.
        page.fill("#id_address-webhook", "https://" + "long-name-" * 40 + ".example/hook")
        page.fill("#id_address-discord", "9" * 30)
        page.click("#addresses button[type=submit]")
        page.wait_for_selector("#addresses .errorlist")
        assert no_sideways_scroll(page)
        for channel in preferences.choosable_channels():
            page.uncheck(f"#id_on-security-{channel}")
        page.click("#choices button[type=submit]")
        page.wait_for_selector("#choices .errorlist")
        assert no_sideways_scroll(page)
        assert csp_violations(page) == []
        if SHOTS:  # for a person to look at (after the CSP check: Playwright's own styles)
            page.screenshot(
                path=f"{SHOTS}/centre{prefix.replace('/', '-')}-{width}.png", full_page=True
            )
    finally:
        context.close()
