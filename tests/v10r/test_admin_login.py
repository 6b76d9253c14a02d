"""The admin's login counts failures: ten wrong passwords from one client, and even the right
one is refused for a while; fifty for one username, and only the clients that failed for it
(and each new one after a single guess) are refused."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from v10r.admin import LOGIN_FAILURES_PER_CLIENT, LOGIN_FAILURES_PER_USERNAME

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
PASSWORD = "a-long-password-1"


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


GUESSERS = [f"10.0.0.{i}" for i in range(LOGIN_FAILURES_PER_USERNAME // LOGIN_FAILURES_PER_CLIENT)]


def fill_the_usernames_count(client, *, addresses=GUESSERS, username="fixer"):
    """Spend the username's failures from a few addresses, each up to the client limit."""
    per_address = LOGIN_FAILURES_PER_USERNAME // len(addresses)
    for address in addresses:
        for _ in range(per_address):
            response = log_in(client, username=username, password="wrong", address=address)
            assert "Please enter the correct username" in response.content.decode()


def test_guessers_on_five_addresses_do_not_lock_the_owner_out(client, staff):
    fill_the_usernames_count(client)
    assert log_in(client, address="198.51.100.6").status_code == 302


def test_the_owner_signs_in_again_from_an_address_that_signed_in_before(client, staff):
    assert log_in(client, address="198.51.100.6").status_code == 302
    client.logout()
    fill_the_usernames_count(client)
    assert log_in(client, address="198.51.100.6").status_code == 302


def test_the_guessers_addresses_are_refused_once_the_usernames_count_is_full(client, staff):
    # Twice as many addresses, each well under its own limit: refused for this username
    # by the username's count, even with the right password.
    guessers = [f"10.0.1.{i}" for i in range(2 * len(GUESSERS))]
    fill_the_usernames_count(client, addresses=guessers)
    for address in guessers:
        refused = log_in(client, address=address)
        assert "Too many failed sign-ins. Try again in 15 min." in refused.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_new_address_gets_one_checked_guess_once_the_usernames_count_is_full(client, staff):
    fill_the_usernames_count(client)
    checked = log_in(client, password="wrong", address="203.0.113.7")
    assert "Please enter the correct username" in checked.content.decode()
    refused = log_in(client, address="203.0.113.7")
    assert "Too many failed sign-ins" in refused.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_full_usernames_count_does_not_stop_its_guessers_signing_in_as_someone_else(
    client, staff, django_user_model
):
    django_user_model.objects.create_user("other", password=PASSWORD, is_staff=True)
    guessers = [f"10.0.1.{i}" for i in range(2 * len(GUESSERS))]
    fill_the_usernames_count(client, addresses=guessers)
    assert log_in(client, username="other", address=guessers[0]).status_code == 302


def test_failures_on_one_username_do_not_lock_another(client, staff, django_user_model):
    django_user_model.objects.create_user("other", password=PASSWORD, is_staff=True)
    fill_the_usernames_count(client)
    assert log_in(client, username="other", address="203.0.113.99").status_code == 302


def test_the_refusal_is_in_the_admins_language(client, staff):
    for _ in range(LOGIN_FAILURES_PER_CLIENT):
        client.post("/de" + LOGIN, {"username": "fixer", "password": "wrong"})
    refused = client.post("/de" + LOGIN, {"username": "fixer", "password": PASSWORD})
    assert "Zu viele fehlgeschlagene Anmeldungen" in refused.content.decode()


def guess_at_once(guesses: int, *, address: str) -> list[str]:
    """Send guesses wrong passwords for "fixer" from address, all at the same moment, one
    thread each; return each login form's error code."""
    from django.db import connection
    from django.test import RequestFactory

    from v10r.admin import ThrottledLoginForm

    start = threading.Barrier(guesses)

    def guess(_: int) -> str:
        request = RequestFactory().post(LOGIN, REMOTE_ADDR=address)
        form = ThrottledLoginForm(request, data={"username": "fixer", "password": "wrong"})
        start.wait(timeout=30)
        try:
            form.is_valid()
            return form.errors.as_data()["__all__"][0].code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=guesses) as pool:
        return list(pool.map(guess, range(guesses)))


@pytest.mark.django_db(transaction=True)
def test_a_burst_of_concurrent_guesses_gets_no_more_password_checks_than_the_limit(staff):
    guesses = LOGIN_FAILURES_PER_CLIENT * 3
    codes = guess_at_once(guesses, address="192.0.2.99")
    assert codes.count("invalid_login") == LOGIN_FAILURES_PER_CLIENT
    assert codes.count("throttled") == guesses - LOGIN_FAILURES_PER_CLIENT


@pytest.mark.django_db(transaction=True)
def test_a_burst_from_a_new_address_gets_one_password_check_once_the_usernames_count_is_full(
    client, staff
):
    fill_the_usernames_count(client)
    guesses = LOGIN_FAILURES_PER_CLIENT
    codes = guess_at_once(guesses, address="203.0.113.8")
    assert codes.count("invalid_login") == 1
    assert codes.count("throttled") == guesses - 1


def test_one_client_refused_cannot_go_on_to_lock_the_username_out(client, staff):
    for _ in range(LOGIN_FAILURES_PER_USERNAME + 10):
        log_in(client, password="wrong", address="192.0.2.66")
    # Only the ten passwords actually checked counted against the username.
    assert log_in(client, address="198.51.100.5").status_code == 302
