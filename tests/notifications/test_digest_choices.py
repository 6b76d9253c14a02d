"""Digest choices: what preferences.choose_digests stores and what it refuses, in the reader's
language; and the staff console's recipients' settings, which show and change them with the
same rules (add, change and view-only staff)."""

from __future__ import annotations

import html
import threading

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.db import OperationalError, connection, transaction
from django.test import Client
from django.utils import translation

from recipients import preferences
from recipients.forms import describe_digest
from recipients.models import Cadence, DigestChoice, Recipient
from recipients.windows import Digest

pytestmark = pytest.mark.django_db

ADMIN = "/admin/recipients/recipient/"


@pytest.fixture
def ada(django_user_model):
    return django_user_model.objects.create_user("ada", email="ada@example.com")


def stored(user) -> dict[str, tuple]:
    return {
        row.category: (row.cadence, row.hour, row.weekday)
        for row in DigestChoice.objects.filter(user=user)
    }


# --- The writer ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("digest", "row"),
    [
        (Digest(Cadence.DAILY, 9), ("daily", 9, None)),
        (Digest(Cadence.WEEKLY, 18, 4), ("weekly", 18, 4)),
        (Digest(Cadence.WEEKLY, 0, 0), ("weekly", 0, 0)),
        (Digest(Cadence.DAILY, 23), ("daily", 23, None)),
        # What a cadence does not use is not stored: the form sends every field.
        (Digest(Cadence.HOURLY, 9, 3), ("hourly", None, None)),
        (Digest(Cadence.DAILY, 7, 3), ("daily", 7, None)),
    ],
)
def test_a_digest_is_stored_with_the_fields_its_cadence_uses(ada, digest, row):
    preferences.choose_digests(ada, digests={"account": digest})
    assert stored(ada) == {"account": row}
    # And enqueue reads it back as it was stored.
    assert preferences.of(ada).digest_for("account") == Digest(*row)


def test_choosing_again_changes_the_one_row(ada):
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.DAILY, 9)})
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.WEEKLY, 8, 6)})
    assert stored(ada) == {"account": ("weekly", 8, 6)}


@pytest.mark.parametrize("instant", [None, Digest(Cadence.INSTANT), Digest("instant", 9, 2)])
def test_as_it_happens_deletes_the_row(ada, instant):
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.DAILY, 9)})
    preferences.choose_digests(ada, digests={"account": instant})
    assert stored(ada) == {}
    assert preferences.of(ada).digest_for("account") is None


def test_a_required_category_may_be_left_as_it_happens(ada):
    preferences.choose_digests(ada, digests={"security": None})
    assert stored(ada) == {}


@pytest.mark.parametrize(
    ("category", "digest", "error"),
    [
        ("nonsense", Digest(Cadence.DAILY, 9), "Unknown category 'nonsense'."),
        # The showcase's rows are no one's choice.
        ("demo", Digest(Cadence.HOURLY), "Unknown category 'demo'."),
        ("nonsense", None, "Unknown category 'nonsense'."),
        (
            "security",
            Digest(Cadence.DAILY, 9),
            "Security messages are always sent at once, never in a digest.",
        ),
        (
            "account",
            Digest("monthly", 9),
            "Your account: Choose how often: as it happens, or an hourly, daily or weekly digest.",
        ),
        ("account", Digest(Cadence.DAILY), "Your account: Choose the hour the digest goes out."),
        ("account", Digest(Cadence.WEEKLY, None, 2), "Choose the hour the digest goes out."),
        ("account", Digest(Cadence.WEEKLY, 9), "Choose the day a weekly digest goes out."),
        ("account", Digest(Cadence.DAILY, 24), "The hour is a whole number from 0 to 23."),
        ("account", Digest(Cadence.DAILY, -1), "The hour is a whole number from 0 to 23."),
        ("account", Digest(Cadence.DAILY, "9"), "The hour is a whole number from 0 to 23."),
        ("account", Digest(Cadence.DAILY, 9.5), "The hour is a whole number from 0 to 23."),
        # Python counts True as 1; an hour it is not.
        ("account", Digest(Cadence.DAILY, True), "The hour is a whole number from 0 to 23."),
        ("account", Digest(Cadence.WEEKLY, 9, 7), "The day is a number from 0 (Monday) to 6"),
        ("account", Digest(Cadence.WEEKLY, 9, -1), "The day is a number from 0 (Monday) to 6"),
    ],
)
def test_a_digest_that_cannot_be_is_refused_in_words_and_nothing_is_stored(
    ada, category, digest, error
):
    with pytest.raises(ValidationError) as refused:
        preferences.choose_digests(
            ada, digests={"account": Digest(Cadence.HOURLY), category: digest}
        )
    assert any(error in message for message in refused.value.messages), refused.value.messages
    # The good choice beside it is not stored either: one transaction.
    assert stored(ada) == {}


def test_check_digest_names_the_part_at_fault():
    with pytest.raises(ValidationError) as refused:
        preferences.check_digest("account", Digest(Cadence.WEEKLY, 30, 9))
    assert set(refused.value.message_dict) == {"hour", "weekday"}


@pytest.mark.parametrize(
    ("language", "error"),
    [
        ("ru", "Час — целое число от 0 до 23."),
        ("de", "Die Stunde ist eine ganze Zahl von 0 bis 23."),
    ],
)
def test_a_refusal_is_in_the_readers_language(ada, language, error):
    with translation.override(language), pytest.raises(ValidationError) as refused:
        preferences.choose_digests(ada, digests={"account": Digest(Cadence.DAILY, 99)})
    assert any(error in message for message in refused.value.messages)


@pytest.mark.django_db(transaction=True)
def test_a_save_waits_for_another_save_of_the_same_user(ada):
    # Another transaction holds the user's row, as choose() or choose_digests() does while it
    # writes: this save waits for it (here, until its lock_timeout), never beside it.
    outcome = {}

    def save_beside():
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '300ms'")
                preferences.choose_digests(ada, digests={"account": Digest(Cadence.HOURLY)})
            outcome["saved"] = True
        except OperationalError as exc:
            outcome["waited"] = str(exc)
        finally:
            connection.close()

    with transaction.atomic():
        type(ada).objects.select_for_update().filter(pk=ada.pk).exists()
        thread = threading.Thread(target=save_beside)
        thread.start()
        thread.join()
    assert "lock timeout" in outcome.get("waited", ""), outcome
    assert stored(ada) == {}
    # Once the lock is let go, the same save goes through.
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.HOURLY)})
    assert stored(ada) == {"account": ("hourly", None, None)}


@pytest.mark.parametrize(
    ("digest", "words"),
    [
        (None, "as it happens"),
        (Digest(Cadence.HOURLY), "hourly digest"),
        (Digest(Cadence.DAILY, 7), "daily digest at 07:00"),
        (Digest(Cadence.WEEKLY, 23, 6), "weekly digest on Sunday at 23:00"),
        (Digest(Cadence.WEEKLY, 0, 0), "weekly digest on Monday at 00:00"),
    ],
)
def test_a_digest_is_said_in_words(digest, words):
    assert describe_digest(digest) == words


# --- The staff console -----------------------------------------------------------------------


def staff(django_user_model, name: str, *codenames: str) -> Client:
    person = django_user_model.objects.create_user(name, is_staff=True)
    person.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(person)
    return client


@pytest.fixture
def editor(django_user_model):
    return staff(django_user_model, "editor", "view_recipient", "change_recipient")


@pytest.fixture
def adder(django_user_model):
    return staff(django_user_model, "adder", "view_recipient", "add_recipient")


@pytest.fixture
def viewer(django_user_model):
    return staff(django_user_model, "viewer", "view_recipient")


def boxes() -> dict[str, str]:
    """Each category's boxes ticked as its defaults are, as the form shows them."""
    return {
        f"on-{category}-{channel}": "on"
        for category in preferences.choosable_categories()
        for channel in preferences.choosable_channels()
        if preferences.Preferences().enabled(category, channel)
    }


def settings_form(**fields) -> dict:
    return {"language": "en", "time_zone": "Europe/Berlin", "quiet_start": "", "quiet_end": "",
            **boxes(), **fields}  # fmt: skip


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_the_change_form_shows_the_stored_digest_beside_the_boxes(editor, ada):
    Recipient.objects.create(user=ada, time_zone="Europe/Berlin")
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.WEEKLY, 18, 4)})
    page = text(editor.get(f"{ADMIN}{ada.pk}/change/"))
    assert '<option value="weekly" selected>' in page
    assert '<option value="4" selected>Friday</option>' in page
    assert '<option value="18" selected>18:00</option>' in page
    # A required category has no digest to choose, and says why.
    assert 'name="digest-security' not in page
    assert "Always sent at once, never in a digest." in page
    assert "A digest's hour is on the recipient's clock, in their time zone." in page


def test_staff_choose_a_daily_digest_for_a_recipient(editor, ada):
    Recipient.objects.create(user=ada)
    data = settings_form(**{"digest-account": "daily", "digest-account-hour": "7"})
    response = editor.post(f"{ADMIN}{ada.pk}/change/", data)
    assert response.status_code == 302, text(response)
    assert stored(ada) == {"account": ("daily", 7, None)}
    # Back to as it happens: the row goes.
    response = editor.post(
        f"{ADMIN}{ada.pk}/change/", settings_form(**{"digest-account": "instant"})
    )
    assert response.status_code == 302, text(response)
    assert stored(ada) == {}


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"digest-account": "weekly", "digest-account-hour": "9"}, "Choose the day a weekly"),
        ({"digest-account": "daily"}, "Choose the hour the digest goes out."),
        ({"digest-account": "daily", "digest-account-hour": "24"}, "whole number from 0 to 23"),
        ({"digest-account": "daily", "digest-account-hour": "nine"}, "whole number from 0 to 23"),
        (
            {"digest-account": "weekly", "digest-account-hour": "9", "digest-account-weekday": "7"},
            "The day is a number from 0 (Monday) to 6 (Sunday).",
        ),
        ({"digest-account": "monthly"}, "Select a valid choice."),
    ],
)
def test_the_console_refuses_a_digest_as_the_centre_does_and_saves_nothing(
    editor, ada, fields, error
):
    Recipient.objects.create(user=ada)
    response = editor.post(f"{ADMIN}{ada.pk}/change/", settings_form(**fields))
    assert response.status_code == 200
    assert error in text(response)
    assert stored(ada) == {}
    # The rest of the form is not saved either.
    assert Recipient.objects.get(user=ada).time_zone == "UTC"


def test_a_staff_save_leaves_a_digest_chosen_while_the_form_was_open(editor, ada):
    Recipient.objects.create(user=ada)
    page = editor.get(f"{ADMIN}{ada.pk}/change/").content.decode()
    assert 'name="initial-digest-account" value="instant"' in page
    loaded = {"initial-digest-account": "instant", "initial-digest-account-hour": "9",
              "initial-digest-account-weekday": "0"}  # fmt: skip
    # Meanwhile the recipient chose a daily digest on the preference centre.
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.DAILY, 8)})
    data = settings_form(**loaded, **{"digest-account": "instant", "digest-account-hour": "9"})
    response = editor.post(f"{ADMIN}{ada.pk}/change/", data)
    assert response.status_code == 302, text(response)
    assert stored(ada) == {"account": ("daily", 8, None)}


def test_staff_who_may_add_set_a_digest_for_a_new_recipient(adder, ada):
    data = {"user": ada.pk, **settings_form(**{"digest-account": "hourly"})}
    response = adder.post(f"{ADMIN}add/", data)
    assert response.status_code == 302, text(response)
    assert Recipient.objects.get(user=ada).time_zone == "Europe/Berlin"
    assert stored(ada) == {"account": ("hourly", None, None)}


def test_staff_who_may_add_but_not_change_cannot_change_a_digest(adder, ada):
    Recipient.objects.create(user=ada)
    data = settings_form(**{"digest-account": "hourly"})
    assert adder.post(f"{ADMIN}{ada.pk}/change/", data).status_code == 403
    assert stored(ada) == {}


@pytest.mark.parametrize(
    ("prefix", "said"),
    [
        ("", "Your account: weekly digest on Friday at 18:00"),
        ("/de", "Ihr Konto: wöchentliche Zusammenfassung am Freitag um 18:00"),
        ("/ru", "Ваша учётная запись: сводка раз в неделю: Пятница, 18:00"),
    ],
)
def test_view_only_staff_read_the_digests_in_words_and_cannot_change_them(
    viewer, ada, prefix, said
):
    Recipient.objects.create(user=ada)
    preferences.choose_digests(ada, digests={"account": Digest(Cadence.WEEKLY, 18, 4)})
    page = viewer.get(f"{prefix}{ADMIN}{ada.pk}/change/")
    assert page.status_code == 200
    body = text(page)
    assert said in body
    assert 'name="digest-account"' not in body
    data = settings_form(**{"digest-account": "instant"})
    assert viewer.post(f"{ADMIN}{ada.pk}/change/", data).status_code == 403
    assert stored(ada) == {"account": ("weekly", 18, 4)}


def test_view_only_staff_read_as_it_happens_and_always_at_once(viewer, ada):
    Recipient.objects.create(user=ada)
    body = text(viewer.get(f"{ADMIN}{ada.pk}/change/"))
    assert "Your account: as it happens" in body
    assert "Security: Always sent at once, never in a digest." in body
