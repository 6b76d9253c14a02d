"""The system check that holds every registration in the catalogue to known names, declared
parameters and one owner each, and names the app that registered what it refuses."""

from __future__ import annotations

import dataclasses

from django.core import checks
from django.utils import translation
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _

from recipients import catalogue
from recipients.checks import check_catalogue


def ids(messages) -> list[str]:
    return [message.id for message in messages]


def test_the_catalogue_as_shipped_passes_and_is_registered():
    assert check_catalogue() == []
    assert check_catalogue in checks.registry.registry.get_checks()


def test_each_entry_is_recorded_with_the_app_that_registered_it():
    assert catalogue.CATEGORY_APPS["security"] == "accounts"
    assert catalogue.MESSAGE_APPS["account.password_reset"] == "accounts"
    assert catalogue.MESSAGE_APPS["welcome"] == "accounts"


def test_a_message_naming_an_unknown_category_is_an_error_naming_its_app(monkeypatch):
    typo = dataclasses.replace(catalogue.MESSAGES["welcome"], category="acount")
    monkeypatch.setitem(catalogue.MESSAGES, "welcome", typo)
    [error] = check_catalogue()
    assert error.id == "recipients.E001"
    assert "'welcome'" in error.msg and "'acount'" in error.msg
    assert "registered by accounts" in error.msg
    assert "security" in error.hint


def test_a_default_for_an_unknown_channel_is_an_error_naming_its_app(monkeypatch):
    typo = dataclasses.replace(catalogue.CATEGORIES["account"], defaults={"webhok": False})
    monkeypatch.setitem(catalogue.CATEGORIES, "account", typo)
    [error] = check_catalogue()
    assert error.id == "recipients.E003"
    assert "'webhok'" in error.msg and "registered by accounts" in error.msg


def test_a_default_for_a_channel_this_site_does_not_run_is_no_error(settings):
    # V10R_CHANNELS may leave webhooks out; the account category's webhook default stays.
    settings.DELIVERY_CHANNELS = {"email": settings.DELIVERY_CHANNELS["email"]}
    assert "webhook" in catalogue.CATEGORIES["account"].defaults
    assert ids(check_catalogue()) == []


def test_a_placeholder_the_message_does_not_declare_is_an_error(monkeypatch):
    undeclared = dataclasses.replace(catalogue.MESSAGES["welcome"], params=frozenset())
    monkeypatch.setitem(catalogue.MESSAGES, "welcome", undeclared)
    errors = check_catalogue()
    # Once for each of the site's languages: each translation is read on its own.
    assert ids(errors) == ["recipients.E002"] * 3
    assert [
        f"parameter(s) name in {code!r}" in e.msg
        for e, code in zip(errors, ["en", "ru", "de"], strict=True)
    ] == [True] * 3
    assert all("registered by accounts" in e.msg for e in errors)


def _russian_typo() -> str:
    # What a translator's slip looks like: the Russian words name {nmae}, the English {name}.
    return "Привет, {nmae}" if translation.get_language() == "ru" else "Hello, {name}"


def test_a_translation_asking_for_a_parameter_no_sender_gives_is_an_error():
    message = catalogue.Message(
        subject=lazy(_russian_typo, str)(),
        body=_("Hello {name}."),
        category="account",
        params=frozenset({"name"}),
    )
    catalogue.register_message("test.translated", message, app="tests")
    try:
        [error] = check_catalogue()
    finally:
        catalogue.unregister_message("test.translated")
    assert error.id == "recipients.E002"
    assert "'test.translated' (registered by tests)" in error.msg
    assert "nmae" in error.msg and "'ru'" in error.msg


def test_a_secret_parameter_the_message_does_not_declare_is_an_error(monkeypatch):
    stray = dataclasses.replace(catalogue.MESSAGES["welcome"], secret=frozenset({"token"}))
    monkeypatch.setitem(catalogue.MESSAGES, "welcome", stray)
    [error] = check_catalogue()
    assert error.id == "recipients.E005" and "token" in error.msg


def test_a_second_registration_of_a_name_is_refused_and_names_both_apps(monkeypatch):
    monkeypatch.setattr(catalogue, "DUPLICATES", [])
    first = catalogue.CATEGORIES["security"]
    catalogue.register_category(
        "security", dataclasses.replace(first, required=False), app="billing"
    )
    assert catalogue.CATEGORIES["security"] is first  # the first registration stands
    [error] = check_catalogue()
    assert error.id == "recipients.E004"
    assert "'security' is registered by billing, but accounts registered it first" in error.msg


def test_the_same_entry_registered_again_by_its_own_app_changes_nothing(monkeypatch):
    monkeypatch.setattr(catalogue, "DUPLICATES", [])
    catalogue.register_message("welcome", catalogue.MESSAGES["welcome"], app="accounts")
    assert catalogue.DUPLICATES == []
    assert check_catalogue() == []
