"""recipients.preferences: what choose() stores and refuses, on real PostgreSQL, with two
saves of one user at once on two connections."""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction

from recipients import preferences
from recipients.models import ChannelAddress
from tests.helpers import backend_pid, poll, waits_for_a_lock


def security_only_on(user, *kept: str) -> None:
    """Turn the security category off on every choosable channel but kept."""
    preferences.choose(
        user,
        choices={
            ("security", channel): channel in kept for channel in preferences.choosable_channels()
        },
    )


def test_moving_a_required_category_to_another_channel_in_one_save_is_accepted(db, user):
    ChannelAddress.objects.create(user=user, channel="telegram", address="42")
    security_only_on(user, "email")
    preferences.choose(user, choices={("security", "email"): False, ("security", "telegram"): True})
    stored = preferences.of(user)
    assert not stored.enabled("security", "email")
    assert [ch for ch in preferences.choosable_channels() if stored.enabled("security", ch)] == [
        "telegram"
    ]


def test_two_saves_at_once_cannot_leave_a_required_category_on_no_channel(transactional_db, user):
    """Security is on email and telegram; one save turns email off in an open transaction
    while another turns telegram off on a second connection. Each alone is allowed; the
    second must wait for the first and then be refused, not check the choices the first has
    not committed yet."""
    security_only_on(user, "email", "telegram")
    second: dict = {}

    def turn_telegram_off():
        try:
            second["pid"] = backend_pid()
            preferences.choose(user, choices={("security", "telegram"): False})
        except ValidationError as exc:
            second["refused"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=turn_telegram_off)
    with transaction.atomic():
        preferences.choose(user, choices={("security", "email"): False})
        thread.start()
        # Waiting for this transaction's lock, or (with none to wait for) done already.
        assert poll(
            lambda: not thread.is_alive() or ("pid" in second and waits_for_a_lock(second["pid"]))
        )
    thread.join(timeout=30)
    assert not thread.is_alive()
    stored = preferences.of(user)
    assert [ch for ch in preferences.choosable_channels() if stored.enabled("security", ch)] == [
        "telegram"
    ]
    assert "must stay on" in str(second["refused"])


@pytest.mark.parametrize("kept", [(), ("telegram",)])
def test_a_save_leaving_a_required_category_on_no_channel_is_refused_storing_nothing(
    db, user, kept
):
    security_only_on(user, "email", *kept)
    before = preferences.of(user).choices
    with pytest.raises(ValidationError, match="must stay on"):
        preferences.choose(
            user,
            choices={("security", "email"): False, ("account", "email"): False}
            | {("security", ch): False for ch in kept},
        )
    assert preferences.of(user).choices == before
