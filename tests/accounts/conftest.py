from __future__ import annotations

import pytest

PASSWORD = "a-long-password-1"
NEW_PASSWORD = "another-long-password-2"


def change_password(client, *, old: str = PASSWORD, **extra):
    """Post the account's change-password form as client, giving old as the password now and
    NEW_PASSWORD as the new one (twice, as the form asks)."""
    return client.post(
        "/account/password/",
        {"old_password": old, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
        **extra,
    )


@pytest.fixture
def ada(django_user_model):
    """A reader (not staff) with an email address and a password."""
    return django_user_model.objects.create_user(
        "ada", email="ada@example.com", password=PASSWORD, first_name="Ada"
    )
