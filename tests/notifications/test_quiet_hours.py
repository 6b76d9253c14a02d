"""Quiet hours' end, computed by the database in the recipient's zone, across both of 2026's
DST changes in Europe/Berlin and in a zone without DST."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from recipients import quiet
from tests.dbclock import database_clock_at

pytestmark = pytest.mark.django_db

BERLIN = ZoneInfo("Europe/Berlin")
TOKYO = ZoneInfo("Asia/Tokyo")  # no DST since 1951
NIGHT = {"start": time(22), "end": time(7)}


@pytest.fixture(autouse=True)
def clock_before_2026():
    # A due time the database clock has passed means now, so the clock starts before them all.
    with database_clock_at(datetime(2025, 12, 1, tzinfo=UTC)):
        yield


def held(zone: ZoneInfo, due: datetime | None, **window) -> datetime | None:
    return quiet.held_until(time_zone=zone.key, due=due, **(window or NIGHT))


def test_a_night_when_berlin_puts_its_clocks_back_lasts_nine_hours():
    due = datetime(2026, 10, 24, 23, tzinfo=BERLIN)  # 23:00 summer time, 21:00 UTC
    until = held(BERLIN, due)
    assert until == datetime(2026, 10, 25, 6, tzinfo=UTC)  # 07:00 winter time
    assert until.astimezone(BERLIN).hour == 7
    assert until - due == timedelta(hours=9)


def test_a_night_when_berlin_puts_its_clocks_forward_lasts_seven_hours():
    due = datetime(2026, 3, 28, 23, tzinfo=BERLIN)  # 23:00 winter time, 22:00 UTC
    until = held(BERLIN, due)
    assert until == datetime(2026, 3, 29, 5, tzinfo=UTC)  # 07:00 summer time
    assert until - due == timedelta(hours=7)


def test_a_night_in_a_zone_without_dst_lasts_its_eight_hours():
    due = datetime(2026, 10, 24, 23, tzinfo=TOKYO)
    assert held(TOKYO, due) == datetime(2026, 10, 25, 7, tzinfo=TOKYO)
    due = datetime(2026, 3, 28, 23, tzinfo=TOKYO)
    assert held(TOKYO, due) - due == timedelta(hours=8)


def test_after_midnight_the_window_ends_the_same_morning():
    due = datetime(2026, 10, 25, 3, 30, tzinfo=BERLIN)
    assert held(BERLIN, due) == datetime(2026, 10, 25, 7, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("hour", "minute"), [(7, 0), (12, 0), (21, 59)], ids=["at-its-end", "noon", "just-before"]
)
def test_a_delivery_due_outside_the_window_is_not_held(hour, minute):
    assert held(BERLIN, datetime(2026, 6, 1, hour, minute, tzinfo=BERLIN)) is None


def test_a_window_inside_one_day_ends_that_day():
    window = {"start": time(13), "end": time(15)}
    assert held(BERLIN, datetime(2026, 6, 1, 14, tzinfo=BERLIN), **window) == datetime(
        2026, 6, 1, 15, tzinfo=BERLIN
    )
    assert held(BERLIN, datetime(2026, 6, 1, 15, tzinfo=BERLIN), **window) is None
    assert held(BERLIN, datetime(2026, 6, 1, 12, 59, tzinfo=BERLIN), **window) is None


def test_a_window_ending_in_the_hour_the_clocks_skip_ends_after_the_jump():
    # 02:30 does not happen in Berlin on 29 March 2026: read on winter time, it is 03:30 summer.
    window = {"start": time(1), "end": time(2, 30)}
    until = held(BERLIN, datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN), **window)
    assert until == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert until.astimezone(BERLIN).time() == time(3, 30)


def test_a_window_ending_in_the_hour_that_happens_twice_ends_at_the_later_one():
    window = {"start": time(1), "end": time(2, 30)}
    until = held(BERLIN, datetime(2026, 10, 25, 1, 30, tzinfo=BERLIN), **window)
    assert until == datetime(2026, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 winter time
    assert until.astimezone(BERLIN).utcoffset() == timedelta(hours=1)


def test_a_year_of_instants_agrees_with_python_s_own_zone_rules():
    # Every 7 hours through 2026 (so every hour of the day is visited): the database's answer
    # against the same window worked out with zoneinfo. 07:00 never falls in a DST change in
    # Berlin, so the two have no ambiguous time to disagree on.
    due = datetime(2026, 1, 1, tzinfo=UTC)
    checked = held_count = 0
    while due.year == 2026:
        local = due.astimezone(BERLIN)
        if local.time() >= time(22):
            expected = datetime.combine(local.date() + timedelta(days=1), time(7), BERLIN)
        elif local.time() < time(7):
            expected = datetime.combine(local.date(), time(7), BERLIN)
        else:
            expected = None
        assert held(BERLIN, due) == expected, due
        checked += 1
        held_count += expected is not None
        due += timedelta(hours=7)
    assert checked > 1200
    assert 0.3 < held_count / checked < 0.4  # nine hours in 24, give or take the sampling


def test_without_a_due_time_the_database_clock_decides():
    with database_clock_at(datetime(2026, 10, 24, 23, tzinfo=BERLIN)):
        assert held(BERLIN, None) == datetime(2026, 10, 25, 7, tzinfo=BERLIN)
    with database_clock_at(datetime(2026, 10, 25, 7, 1, tzinfo=BERLIN)):
        assert held(BERLIN, None) is None


def test_a_due_time_already_past_means_now():
    with database_clock_at(datetime(2026, 6, 1, 23, tzinfo=BERLIN)):
        # Due at noon (outside the window), but noon has passed: it is 23:00, inside.
        assert held(BERLIN, datetime(2026, 6, 1, 12, tzinfo=BERLIN)) == datetime(
            2026, 6, 2, 7, tzinfo=BERLIN
        )


def test_an_unknown_zone_stored_anyway_is_read_as_utc_and_logged(caplog):
    caplog.set_level(logging.WARNING, logger="recipients.quiet")
    due = datetime(2026, 6, 1, 23, tzinfo=UTC)
    assert quiet.held_until(time_zone="Mars/Olympus", due=due, **NIGHT) == datetime(
        2026, 6, 2, 7, tzinfo=UTC
    )
    assert "Mars/Olympus" in caplog.text


def test_a_naive_due_time_or_an_empty_window_is_refused():
    with pytest.raises(ValueError, match="aware"):
        held(BERLIN, datetime(2026, 6, 1, 23))  # noqa: DTZ001 - the point
    with pytest.raises(ValueError, match="different"):
        held(BERLIN, None, start=time(7), end=time(7))
