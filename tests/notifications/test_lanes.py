"""DELIVERY_LANES: the system check that holds it to the claim's rules."""

from __future__ import annotations

import pytest

from notifications import checks, lanes, outbox

GOOD = {"high": {"rank": 0, "cap": None}, "normal": {"rank": 1}, "bulk": {"rank": 5, "cap": 3}}


def ids(settings, value) -> list[str]:
    settings.DELIVERY_LANES = value
    return [error.id for error in checks.check_lanes()]


def test_the_sites_lanes_and_a_good_mapping_pass(settings):
    assert checks.check_lanes() == []
    assert ids(settings, GOOD) == []
    assert [lane.name for lane in lanes.parse(GOOD)] == ["high", "normal", "bulk"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({}, ["notifications.E010"]),
        ([("normal", {"rank": 0})], ["notifications.E010"]),
        ({**GOOD, "low": 3}, ["notifications.E010"]),
        ({**GOOD, "low": {"rank": 9, "weight": 2}}, ["notifications.E010"]),
        ({**GOOD, "Low Lane": {"rank": 9}}, ["notifications.E011"]),
        ({**GOOD, "x" * 33: {"rank": 9}}, ["notifications.E011"]),
        ({**GOOD, "a'b": {"rank": 9}}, ["notifications.E011"]),
        ({**GOOD, "low": {"rank": 1}}, ["notifications.E012"]),
        ({**GOOD, "low": {"rank": "9"}}, ["notifications.E012"]),
        ({**GOOD, "low": {"rank": 9, "cap": 0}}, ["notifications.E013"]),
        ({**GOOD, "low": {"rank": 9, "cap": True}}, ["notifications.E013"]),
        (
            {f"l{i}": {"rank": i} for i in range(16)} | {"normal": {"rank": 99}},
            ["notifications.E014"],
        ),
        ({"high": {"rank": 0}}, ["notifications.E015"]),
    ],
)
def test_a_lane_mapping_the_claim_could_not_use_stops_start_up(settings, value, expected):
    assert ids(settings, value) == expected


def test_pending_rows_of_a_lane_no_longer_configured_join_the_default_lane_with_the_reaper(
    db, user, caplog
):
    from datetime import timedelta

    from notifications.models import NotificationDelivery
    from notifications.worker import Worker
    from tests.helpers import execute, make_deliveries

    lost = make_deliveries(user, 2, channel="recording")
    kept = make_deliveries(user, 1, channel="recording")
    execute(
        "UPDATE notifications.notification_deliveries SET lane = 'gone' WHERE id = ANY(%s)",
        [lost],
    )
    execute(
        "UPDATE notifications.notification_deliveries SET lane = 'high', status = 'sent'"
        " WHERE id = ANY(%s)",
        [kept],
    )
    assert outbox.claim(batch_size=10) == []  # the claim knows only the configured lanes
    assert outbox.adopt_lost_lanes() == 2
    assert "lanes DELIVERY_LANES does not name" in caplog.text
    by_id = dict(NotificationDelivery.objects.values_list("pk", "lane"))
    assert [by_id[i] for i in lost] == ["normal", "normal"] and by_id[kept[0]] == "high"
    assert outbox.adopt_lost_lanes() == 0
    assert {d.id for d in outbox.claim(batch_size=10)} == set(lost)
    # The drain does it with its reaper: a cron's worker reaps, so adopts, every time.
    again = make_deliveries(user, 1, channel="recording")
    execute(
        "UPDATE notifications.notification_deliveries SET lane = 'gone' WHERE id = ANY(%s)",
        [again],
    )
    worker = Worker(name="test-cron", interval=timedelta(0))
    try:
        assert worker.drain_once().sent == 1
    finally:
        worker.close()
