"""A message's secret parameters (a password-reset link) reach the recipient, never staff."""

from __future__ import annotations

import pytest
from django.urls import reverse

from notifications.enqueue import send_notification
from recipients import catalogue

LINK = "https://example.test/account/password-reset/MQ/abc-0123456789abcdef/"


@pytest.mark.django_db
def test_the_reset_link_is_hidden_on_the_notifications_page_even_from_a_superuser(
    admin_client, user
):
    notification = send_notification(
        user=user,
        type="account.password_reset",
        params={"url": LINK, "site_name": "v10r", "username": user.get_username()},
        channels=["email"],
    ).notification
    page = admin_client.get(
        reverse("admin:notifications_notification_change", args=[notification.pk])
    )
    assert page.status_code == 200
    text = page.content.decode()
    assert "abc-0123456789abcdef" not in text
    assert catalogue.HIDDEN in text
    # What is not secret is shown as stored.
    assert user.get_username() in text


def test_only_the_secret_parameters_are_hidden_and_every_one_of_an_unknown_key():
    params = {"url": LINK, "site_name": "v10r", "username": "ada"}
    assert catalogue.shown_params(key="account.password_reset", params=params) == {
        "url": catalogue.HIDDEN,
        "site_name": "v10r",
        "username": "ada",
    }
    assert catalogue.shown_params(key="welcome", params={"name": "Ada"}) == {"name": "Ada"}
    assert catalogue.shown_params(key="gone.key", params={"x": 1}) == {"x": catalogue.HIDDEN}
