from __future__ import annotations

import pytest

PASSWORD = "a-long-password-1"


@pytest.fixture(autouse=True)
def quick_hashes(settings):
    # Dozens of sign-ins at a real hasher's cost would take a minute; the throttle does not care.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def ada(django_user_model):
    """A reader (not staff) with an email address and a password."""
    return django_user_model.objects.create_user(
        "ada", email="ada@example.com", password=PASSWORD, first_name="Ada"
    )
