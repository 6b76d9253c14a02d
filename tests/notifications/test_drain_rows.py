"""The claim's rows as the drain reads them: each row's own parameters and catalogue key."""

from __future__ import annotations

from notifications import outbox
from notifications.models import Notification, NotificationDelivery

# Parameters unlike each other: a batch's are parsed together (outbox._claimed), so each must
# come back to its own row, commas, brackets and quotes inside strings included.
PARAMS = [
    {},
    {"label": "a, b], [c"},
    {"label": 'quote " and \\ backslash', "n": 3},
    {"nested": {"list": [1, 2.5, None, True], "text": "ёж 🦔"}},
    {"label": "{}", "empty": ""},
    {"big": 12345678901234567890, "neg": -0.5},
]


def queue(user, *, type: str, message_key: str = "", params=None) -> int:
    notification = Notification.objects.create(
        user=user, type=type, message_key=message_key, message_params=params or {}
    )
    return NotificationDelivery.objects.create(notification=notification, channel="recording").id


def test_each_claimed_row_carries_its_own_parameters(db, user):
    ids = {queue(user, type="test.note", params=params): params for params in PARAMS}
    claimed = outbox.claim(batch_size=len(PARAMS))
    assert {c.id: c.message_params for c in claimed} == ids


def test_the_claim_names_the_type_as_the_catalogue_key_unless_the_row_names_one(db, user):
    by_type = queue(user, type="test.note")
    named_apart = queue(user, type="signup", message_key="test.note")
    keys = {c.id: c.message_key for c in outbox.claim(batch_size=2)}
    assert keys == {by_type: "test.note", named_apart: "test.note"}
