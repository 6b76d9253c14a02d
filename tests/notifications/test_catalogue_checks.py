"""The system check that holds the catalogue's categories and their defaults to known names."""

from __future__ import annotations

import dataclasses

from django.core import checks

from notifications.checks import check_catalogue
from recipients import catalogue


def ids(messages) -> list[str]:
    return [message.id for message in messages]


def test_the_catalogue_as_shipped_passes_and_is_registered():
    assert check_catalogue() == []
    assert check_catalogue in checks.registry.registry.get_checks()


def test_a_message_naming_an_unknown_category_is_an_error(monkeypatch):
    typo = dataclasses.replace(catalogue.MESSAGES["welcome"], category="acount")
    monkeypatch.setitem(catalogue.MESSAGES, "welcome", typo)
    [error] = check_catalogue()
    assert error.id == "notifications.E020"
    assert "'welcome'" in error.msg and "'acount'" in error.msg
    assert "security" in error.hint


def test_a_default_for_an_unknown_channel_is_an_error(monkeypatch):
    typo = dataclasses.replace(catalogue.CATEGORIES["account"], defaults={"webhok": False})
    monkeypatch.setitem(catalogue.CATEGORIES, "account", typo)
    [error] = check_catalogue()
    assert error.id == "notifications.E021"
    assert "'webhok'" in error.msg


def test_a_default_for_a_channel_this_site_does_not_run_is_no_error(settings):
    # V10R_CHANNELS may leave webhooks out; the account category's webhook default stays.
    settings.DELIVERY_CHANNELS = {"email": settings.DELIVERY_CHANNELS["email"]}
    assert "webhook" in catalogue.CATEGORIES["account"].defaults
    assert ids(check_catalogue()) == []
