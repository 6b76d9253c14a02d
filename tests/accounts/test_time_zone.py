"""The reader's time zone (accounts/time_zone.py): a signed-in user's saved one, else the
site's, activated for the request and read only when a time is shown."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest
from django.test import RequestFactory

from accounts.time_zone import ReaderZone
from recipients.models import Recipient

pytestmark = pytest.mark.django_db

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def zone_of(user) -> ReaderZone:
    request = RequestFactory().get("/")
    request.user = user
    return ReaderZone(request)


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 1, 15, 12, 0, tzinfo=UTC),  # winter: +01:00
        datetime(2026, 7, 15, 12, 0, tzinfo=UTC),  # summer: +02:00
        # 2026-10-25 01:30 UTC is 02:30 a second time in Berlin (the hour that repeats).
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
        # 2026-03-29 01:00 UTC: the clocks jump from 02:00 to 03:00.
        datetime(2026, 3, 29, 0, 59, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
    ],
)
def test_a_saved_zone_shows_every_moment_as_the_zone_itself_does(django_user_model, moment):
    ada = django_user_model.objects.create_user("ada")
    Recipient.objects.create(user=ada, time_zone="Europe/Berlin")
    zone = zone_of(ada)
    shown, expected = moment.astimezone(zone), moment.astimezone(BERLIN)
    assert shown.replace(tzinfo=None) == expected.replace(tzinfo=None)
    assert shown.fold == expected.fold
    assert shown.utcoffset() == expected.utcoffset()
    assert shown.tzname() == expected.tzname()
    assert shown - moment == timedelta(0)
    assert str(zone) == "Europe/Berlin"


def test_a_visitor_and_a_user_who_saved_none_have_the_sites_zone(django_user_model):
    from django.contrib.auth.models import AnonymousUser

    assert str(zone_of(AnonymousUser())) == "UTC"
    assert str(zone_of(django_user_model.objects.create_user("bob"))) == "UTC"


def test_a_zone_this_python_does_not_know_falls_back_to_the_sites(django_user_model):
    ada = django_user_model.objects.create_user("ada")
    Recipient.objects.create(user=ada, time_zone="Mars/Olympus")
    assert str(zone_of(ada)) == "UTC"


def test_the_admin_shows_times_in_the_staff_members_zone_and_says_which(admin_client, admin_user):
    assert 'data-time-zone="UTC"' in admin_client.get("/admin/").content.decode()
    Recipient.objects.create(user=admin_user, time_zone="America/New_York")
    body = admin_client.get("/de/admin/").content.decode()
    assert 'data-time-zone="America/New_York"' in body
    assert "Alle Zeiten in der Zeitzone America/New_York." in body


def test_a_copy_or_a_pickle_of_a_shown_time_carries_the_zone_not_the_request(django_user_model):
    import copy
    import pickle

    ada = django_user_model.objects.create_user("ada")
    Recipient.objects.create(user=ada, time_zone="Europe/Berlin")
    shown = datetime(2026, 7, 15, 12, 0, tzinfo=UTC).astimezone(zone_of(ada))
    for again in (copy.deepcopy(shown), pickle.loads(pickle.dumps(shown))):
        assert again.tzinfo is BERLIN
        assert again == shown and again.utcoffset() == timedelta(hours=2)
