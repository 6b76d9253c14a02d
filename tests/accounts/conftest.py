from __future__ import annotations

import pytest

PASSWORD = "a-long-password-1"


@pytest.fixture(autouse=True)
def _quick_hashes(quick_hashes):
    """Every account test signs in with MD5 passwords (tests/conftest.py says why)."""


@pytest.fixture
def ada(django_user_model):
    """A reader (not staff) with an email address and a password."""
    return django_user_model.objects.create_user(
        "ada", email="ada@example.com", password=PASSWORD, first_name="Ada"
    )
