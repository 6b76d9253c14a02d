"""The admin's login counts failures: ten wrong passwords from one client, and even the right
one is refused for a while."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from v10r.admin import LOGIN_FAILURES_PER_CLIENT, LOGIN_FAILURES_PER_USERNAME

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
PASSWORD = "a-long-password-1"


@pytest.fixture(autouse=True)
def quick_hashes(settings):
    # Sixty sign-ins at a real hasher's cost would take a minute; the throttle does not care.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("fixer", password=PASSWORD, is_staff=True)


def log_in(client, *, username="fixer", password=PASSWORD, address="192.0.2.10"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_the_right_password_signs_in(client, staff):
    assert log_in(client).status_code == 302


def test_after_ten_wrong_passwords_even_the_right_one_is_refused(client, staff):
    for _ in range(LOGIN_FAILURES_PER_CLIENT):
        response = log_in(client, password="wrong")
        assert "Please enter the correct username and password" in response.content.decode()
    refused = log_in(client)
    assert refused.status_code == 200
    assert "Too many failed sign-ins. Try again in 15 min." in refused.content.decode()
    assert "_auth_user_id" not in client.session


def test_another_client_is_not_locked_out_by_a_guesser(client, staff):
    for _ in range(LOGIN_FAILURES_PER_CLIENT):
        log_in(client, password="wrong", address="192.0.2.10")
    assert log_in(client, address="198.51.100.20").status_code == 302


def test_a_guesser_spread_over_many_addresses_is_slowed_per_username(client, staff):
    for i in range(LOGIN_FAILURES_PER_USERNAME):
        log_in(client, password="wrong", address=f"10.0.{i // 250}.{i % 250}")
    refused = log_in(client, address="203.0.113.99")
    assert "Too many failed sign-ins" in refused.content.decode()


def test_failures_on_one_username_do_not_lock_another(client, staff, django_user_model):
    django_user_model.objects.create_user("other", password=PASSWORD, is_staff=True)
    for i in range(LOGIN_FAILURES_PER_USERNAME):
        log_in(client, password="wrong", address=f"10.0.{i // 250}.{i % 250}")
    assert log_in(client, username="other", address="203.0.113.99").status_code == 302


def test_the_refusal_is_in_the_admins_language(client, staff):
    for _ in range(LOGIN_FAILURES_PER_CLIENT):
        client.post("/de" + LOGIN, {"username": "fixer", "password": "wrong"})
    refused = client.post("/de" + LOGIN, {"username": "fixer", "password": PASSWORD})
    assert "Zu viele fehlgeschlagene Anmeldungen" in refused.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_concurrent_guesses_gets_no_more_password_checks_than_the_limit(staff):
    from django.db import connection
    from django.test import RequestFactory

    from v10r.admin import ThrottledLoginForm

    guesses = LOGIN_FAILURES_PER_CLIENT * 3
    start = threading.Barrier(guesses)

    def guess(_: int) -> str:
        request = RequestFactory().post(LOGIN, REMOTE_ADDR="192.0.2.99")
        form = ThrottledLoginForm(request, data={"username": "fixer", "password": "wrong"})
        start.wait(timeout=30)
        try:
            form.is_valid()
            return form.errors.as_data()["__all__"][0].code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=guesses) as pool:
        codes = list(pool.map(guess, range(guesses)))
    assert codes.count("invalid_login") == LOGIN_FAILURES_PER_CLIENT
    assert codes.count("throttled") == guesses - LOGIN_FAILURES_PER_CLIENT


def test_one_client_refused_cannot_go_on_to_lock_the_username_out(client, staff):
    for _ in range(LOGIN_FAILURES_PER_USERNAME + 10):
        log_in(client, password="wrong", address="192.0.2.66")
    # Only the ten passwords actually checked counted against the username.
    assert log_in(client, address="198.51.100.5").status_code == 302
