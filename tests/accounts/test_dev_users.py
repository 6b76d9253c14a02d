"""`make run`'s demo users: created with DEBUG on only, printed as the superuser is, and able
to sign in with what was printed; each reads the site's emails in its own language."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from recipients.models import Recipient

pytestmark = pytest.mark.django_db


def run(**options) -> str:
    out = io.StringIO()
    call_command("ensure_dev_users", stdout=out, **options)
    return out.getvalue()


def test_demo_users_are_created_printed_and_sign_in_with_what_was_printed(client, settings):
    settings.DEBUG = True
    printed = run()
    [(names, password)] = re.findall(
        r"Demo users \(sign in at /account/sign-in/\): (.+) / (\S+)", printed
    )
    assert names.split(", ") == ["ada", "vera", "greta"]
    languages = dict(Recipient.objects.values_list("user__username", "language"))
    assert languages == {"ada": "en", "vera": "ru", "greta": "de"}
    settings.DEBUG = False  # the site's own pages, as the test client serves them
    for name in names.split(", "):
        response = client.post("/account/sign-in/", {"username": name, "password": password})
        assert response.status_code == 302, name
        client.post("/account/sign-out/")


def test_a_second_run_creates_nothing_and_says_the_same(settings, django_user_model):
    settings.DEBUG = True
    first = run()
    assert run() == first
    assert django_user_model.objects.count() == 3


def test_a_demo_user_whose_password_was_changed_is_named_apart(settings, django_user_model):
    settings.DEBUG = True
    run()
    vera = django_user_model.objects.get(username="vera")
    vera.set_password("her-own-password-9")
    vera.save()
    printed = run()
    assert "ada, greta / " in printed
    assert "passwords of their own (reset at /account/password-reset/): vera" in printed


def test_with_debug_off_it_refuses(settings, django_user_model):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG off"):
        run()
    assert not django_user_model.objects.exists()


def test_make_run_creates_them_beside_the_superuser():
    from pathlib import Path

    from v10r.management.commands import rundev

    # Read, not run: tests/v10r/test_rundev.py runs make run itself.
    source = Path(rundev.__file__).read_text()
    assert 'call_command("ensure_dev_users")' in source
