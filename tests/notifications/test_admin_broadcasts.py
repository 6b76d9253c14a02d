"""Broadcasts in the staff console: the list reads only broadcasts and their chunks, a
broadcast's page shows its progress per channel and its failed chunks, and Cancel is for
whoever holds notifications.cancel_broadcast, refused (403) to everyone else."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from notifications import broadcasts
from notifications.drain import LANE_NAMES
from notifications.models import (
    Broadcast,
    BroadcastChunk,
    BroadcastState,
    ChunkStatus,
    NotificationDelivery,
    Status,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("collected_static")]

LIST = "/admin/notifications/broadcast/"
PARAMS = {"name": "Ada"}


def page_of(broadcast) -> str:
    return reverse("admin:notifications_broadcast_change", args=[broadcast.pk])


def cancel_url(broadcast) -> str:
    return reverse("admin:notifications_broadcast_cancel", args=[broadcast.pk])


def people(django_user_model, prefix: str, count: int) -> list:
    return [
        django_user_model.objects.create_user(f"{prefix}{n}", email=f"{prefix}{n}@x.example")
        for n in range(count)
    ]


def staff_client(django_user_model, name: str, *codenames: str) -> Client:
    person = django_user_model.objects.create_user(name, is_staff=True)
    person.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(person)
    return client


VIEW = ("view_broadcast",)
VIEW_AND_CANCEL = ("view_broadcast", "cancel_broadcast")


@pytest.fixture
def half_done(django_user_model, settings):
    """Ten recipients in chunks of four, the first chunk expanded: 4 of 10, expanding."""
    settings.BROADCAST_CHUNK_SIZE = 4
    broadcast = broadcasts.send_broadcast(
        audience=people(django_user_model, "h", 10), type="welcome", params=PARAMS
    )
    assert broadcasts.expand_next(lanes=LANE_NAMES).recipients == 4
    return broadcast


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_list_shows_each_broadcasts_recipients_expanded_of_its_total_and_its_state(
    admin_client, half_done
):
    body = admin_client.get(LIST).content.decode()
    assert "4 of 10" in text(body)
    assert "welcome" in body and "a list of users" in body
    assert 'class="status-badge status-processing">expanding</span>' in body
    assert "Send a broadcast" in body  # a superuser may send (test_admin_send_broadcast.py)
    assert admin_client.get("/de" + LIST).status_code == 200
    assert "4 von 10" in text(admin_client.get("/de" + LIST).content.decode())


def test_the_list_costs_the_same_queries_for_two_broadcasts_as_for_thirty_and_reads_no_delivery(
    admin_client, django_user_model, settings
):
    settings.BROADCAST_CHUNK_SIZE = 2
    users = people(django_user_model, "q", 4)

    def queries() -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(LIST).status_code == 200
        return [q["sql"] for q in captured.captured_queries]

    for _ in range(2):
        broadcasts.send_broadcast(audience=users, type="welcome", params=PARAMS)
    while broadcasts.expand_next(lanes=LANE_NAMES):
        pass
    few = queries()
    for _ in range(28):
        broadcasts.send_broadcast(audience=users, type="welcome", params=PARAMS)
    many = queries()
    assert len(many) == len(few)
    # (The admin's menu counts dead deliveries on every page: that is not the list's.)
    assert not [sql for sql in many if "notification_deliveries" in sql and "broadcast" in sql]
    # The expanded counts come from the chunks, in the list's own statement.
    assert any("cardinality" in sql and "broadcast_chunks" in sql for sql in many)


def test_each_state_is_shown_and_filtered_by(admin_client, django_user_model, settings):
    settings.BROADCAST_CHUNK_SIZE = 2
    users = people(django_user_model, "s", 2)
    made = {}
    # The one left expanding is sent last: a drain takes the oldest chunk first.
    for state in sorted(BroadcastState, key=lambda s: s is BroadcastState.EXPANDING):
        made[state] = broadcasts.send_broadcast(audience=users, type="welcome", params=PARAMS)
        if state is not BroadcastState.EXPANDING:
            broadcasts.expand_next(lanes=LANE_NAMES)
    BroadcastChunk.objects.filter(broadcast=made[BroadcastState.FAILED]).update(
        status=ChunkStatus.FAILED, error="ValueError: boom"
    )
    broadcasts.cancel_broadcast(made[BroadcastState.CANCELLED])
    states = dict(Broadcast.objects.with_state().values_list("pk", "state"))
    assert states == {broadcast.pk: state for state, broadcast in made.items()}
    for state, broadcast in made.items():
        body = admin_client.get(f"{LIST}?state={state.value}").content.decode()
        assert f"{broadcast.pk}/change/" in body, state
        others = [b for s, b in made.items() if s is not state]
        assert not [b for b in others if f"{b.pk}/change/" in body], state
    body = admin_client.get(LIST).content.decode()
    assert "has failed chunks" in body


def test_a_broadcasts_page_shows_its_progress_per_channel_and_its_failed_chunks(
    admin_client, half_done
):
    NotificationDelivery.objects.filter(notification__broadcast=half_done, channel="inapp").update(
        status=Status.SENT
    )
    chunk = BroadcastChunk.objects.get(broadcast=half_done, number=2)
    chunk.status, chunk.attempts, chunk.error = ChunkStatus.FAILED, 5, "ValueError: gone"
    chunk.save()
    body = admin_client.get(page_of(half_done)).content.decode()
    rows = {
        row[0]: row[1:]
        for row in (
            text(r).split()
            for r in re.findall(
                r"<tr><th scope=\"row\">(?:email|inapp)</th>.*?</tr>", body, flags=re.S
            )
        )
    }
    # queued, held, processing, sent, failed, dead, cancelled, three skipped, digested
    assert rows == {
        "email": ["4", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0"],
        "inapp": ["0", "0", "0", "4", "0", "0", "0", "0", "0", "0", "0"],
    }
    plain = text(body)
    assert "recipients expanded 4 of 10" in plain
    assert "chunks left to expand 1" in plain and "chunks failed 1" in plain
    assert "chunk 2 (attempts: 5): ValueError: gone" in plain
    assert "skipped (opted out)" in plain
    assert "Cancel this broadcast…" in body


def test_a_superuser_cancels_after_confirming_and_is_told_what_it_did(admin_client, half_done):
    first = admin_client.post(cancel_url(half_done))
    assert first.status_code == 200
    assert "Yes, cancel the broadcast" in first.content.decode()
    assert Broadcast.objects.get(pk=half_done.pk).cancelled_at is None  # asked, not done
    response = admin_client.post(cancel_url(half_done), {"confirmed": "yes"}, follow=True)
    assert response.redirect_chain[-1][0] == page_of(half_done)
    said = text(response.content.decode())
    assert (
        "Broadcast cancelled. Deliveries withdrawn: 8; in flight, left to finish: 0; already "
        "finished: 0; maybe sent already (a drain claimed them and went quiet): 0."
    ) in said
    assert not NotificationDelivery.objects.filter(
        notification__broadcast=half_done, status=Status.PENDING
    ).exists()
    assert set(
        BroadcastChunk.objects.filter(broadcast=half_done).values_list("status", flat=True)
    ) == {ChunkStatus.DONE, ChunkStatus.CANCELLED}
    assert "Cancel this broadcast…" not in response.content.decode()  # nothing left to cancel
    (entry,) = LogEntry.objects.filter(object_id=str(half_done.pk))
    assert entry.change_message == "Cancelled the broadcast (no more of it will be sent)."

    again = admin_client.post(cancel_url(half_done), {"confirmed": "yes"}, follow=True)
    assert "This broadcast was already cancelled, on" in again.content.decode()
    assert LogEntry.objects.filter(object_id=str(half_done.pk)).count() == 1


def test_the_cancel_message_counts_in_the_staff_members_language(admin_client, half_done):
    response = admin_client.post("/ru" + cancel_url(half_done), {"confirmed": "yes"}, follow=True)
    assert "Рассылка отменена" in response.content.decode()


def test_a_view_only_staff_member_sees_no_cancel_and_is_refused_it(django_user_model, half_done):
    client = staff_client(django_user_model, "looker", *VIEW)
    page = client.get(page_of(half_done))
    assert page.status_code == 200
    assert "4 of 10" in text(page.content.decode())
    assert "Cancel this broadcast" not in page.content.decode()
    for data in ({}, {"confirmed": "yes"}):
        assert client.post(cancel_url(half_done), data).status_code == 403
    assert client.get(cancel_url(half_done)).status_code == 405
    assert Broadcast.objects.get(pk=half_done.pk).cancelled_at is None
    assert (
        NotificationDelivery.objects.filter(
            notification__broadcast=half_done, status=Status.PENDING
        ).count()
        == 8
    )
    # Nor may they change or delete it.
    assert client.post(page_of(half_done), {}).status_code == 403
    delete = reverse("admin:notifications_broadcast_delete", args=[half_done.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403


def test_a_staff_member_who_may_view_and_cancel_cancels(django_user_model, half_done):
    client = staff_client(django_user_model, "canceller", *VIEW_AND_CANCEL)
    # Only with the page's CSRF token: another site's form cannot cancel for them.
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(django_user_model.objects.get(username="canceller"))
    assert forged.post(cancel_url(half_done), {"confirmed": "yes"}).status_code == 403
    assert Broadcast.objects.get(pk=half_done.pk).cancelled_at is None
    page = client.get(page_of(half_done)).content.decode()
    assert f'action="{cancel_url(half_done)}"' in page
    response = client.post(cancel_url(half_done), {"confirmed": "yes"}, follow=True)
    assert "Deliveries withdrawn: 8" in text(response.content.decode())
    assert Broadcast.objects.get(pk=half_done.pk).cancelled_at is not None
    # Cancel is no licence to edit.
    assert client.post(page_of(half_done), {}).status_code == 403


def test_the_secret_parameters_of_a_broadcast_are_hidden(admin_client, django_user_model):
    from recipients import catalogue

    broadcast = broadcasts.send_broadcast(
        audience=people(django_user_model, "p", 1),
        type="account.password_reset",
        params={"url": "https://x.example/reset/abc-secret/", "site_name": "v10r", "username": "a"},
    )
    body = admin_client.get(page_of(broadcast)).content.decode()
    assert "abc-secret" not in body and catalogue.HIDDEN in body
