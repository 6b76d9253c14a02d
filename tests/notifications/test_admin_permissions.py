"""Who may change what in the staff console: every action and every view of every registered
admin, walked as a staff member who may only look."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.admin.options import ActionLocation
from django.contrib.auth.models import Group, Permission
from django.test import RequestFactory
from django.urls import reverse

from notifications import broadcasts
from notifications.drain import LANE_NAMES
from notifications.models import BroadcastChunk
from recipients import audiences
from recipients.models import Audience, ChannelAddress, Recipient, WebhookSecret
from tests.helpers import finish, make_deliveries, make_timed_run
from transports import signing

pytestmark = pytest.mark.django_db

# Django's own views of a ModelAdmin: POSTed like the custom ones, since they change rows too.
STANDARD = ("changelist", "add", "history", "delete", "change")

# Custom views a viewer may use, and why that is safe. The jobs page lists the jobs and their
# last runs: it reads, and writes nothing (Run now is a view of its own, behind jobs.run_job).
# An audience's members page lists them, a page at a time, and answers only GET (Import CSV and
# Remove are views of their own, behind recipients.change_audience).
# Anything not listed here must refuse a viewer: the probe too, which makes the site call a
# provider with its bot token (recipients.probe_channel).
OPEN_TO_VIEWERS = {"jobs_jobrun_schedule", "recipients_audience_members"}


@pytest.fixture
def world(user, django_user_model, settings):
    """At least one row behind every list, so each action has something to act on."""
    settings.BROADCAST_CHUNK_SIZE = 1
    others = [django_user_model.objects.create_user(f"other{n}") for n in range(2)]
    ids = make_deliveries(user, 3)
    finish(ids[:1], status="dead")
    finish(ids[1:2], status="failed")
    hook = ChannelAddress.objects.create(
        user=user, channel="webhook", address="https://hooks.example/v10r"
    )
    WebhookSecret.objects.create(
        address=hook, secret=signing.new_secret(), previous_secret=signing.new_secret()
    )
    ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
    Recipient.objects.create(user=user)
    Group.objects.create(name="support")
    audiences.add(Audience.objects.create(name="Beta testers", key="beta"), [user])
    # A broadcast half expanded, so that Cancel would have something to withdraw.
    broadcasts.send_broadcast(audience=[user, *others], type="welcome", params={"name": "Ada"})
    broadcasts.expand_next(lanes=LANE_NAMES)
    make_timed_run()
    return ids


@pytest.fixture
def viewer(client, django_user_model):
    person = django_user_model.objects.create_user("viewer", password="pw-123456789", is_staff=True)
    person.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    client.force_login(person)
    return client, person


def snapshot() -> dict[str, list[tuple]]:
    """Every row of every table the console reaches, as plain values."""
    models = {ma.model._meta.concrete_model for ma in admin.site._registry.values()}
    models |= {WebhookSecret, LogEntry, Permission, BroadcastChunk}
    return {
        model._meta.label: sorted(map(repr, model._base_manager.values_list())) for model in models
    }


def secrets() -> set[str]:
    return {s for row in WebhookSecret.objects.all() for s in row.secrets()}


def actions():
    for model_admin in admin.site._registry.values():
        for location in ActionLocation:
            for action in model_admin._get_base_actions(action_location=location):
                label = f"{model_admin.model._meta.label}:{action.name}:{location.value}"
                yield pytest.param(model_admin, action.name, location, id=label)


def custom_views():
    for model_admin in admin.site._registry.values():
        opts = model_admin.model._meta
        standard = {f"{opts.app_label}_{opts.model_name}_{view}" for view in STANDARD}
        for pattern in model_admin.get_urls():
            if pattern.name and pattern.name not in standard:
                yield pytest.param(model_admin, pattern, id=pattern.name)


def standard_views():
    for model_admin in admin.site._registry.values():
        for view in ("add", "change", "delete"):
            yield pytest.param(model_admin, view, id=f"{model_admin.model._meta.label}:{view}")


def some_pk(model_admin, user) -> int:
    request = RequestFactory().get("/")
    request.user = user
    return model_admin.get_queryset(request).order_by("pk").values_list("pk", flat=True)[0]


def assert_refused_and_harmless(response, *, before, known_secrets) -> None:
    assert snapshot() == before
    body = response.content.decode()
    for secret in known_secrets | secrets():
        assert secret not in body


@pytest.mark.parametrize(("model_admin", "name", "location"), list(actions()))
def test_a_view_only_staff_member_can_run_no_action_that_changes_anything(
    world, viewer, model_admin, name, location
):
    client, person = viewer
    request = RequestFactory().get("/")
    request.user = person
    opts = model_admin.model._meta
    # What each action's confirmation step would send, so an allowed one runs to the end.
    data = {"post": "yes", "confirmed": "yes"}
    if location is ActionLocation.CHANGE_LIST:
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        selected = list(model_admin.get_queryset(request).values_list("pk", flat=True))
        data |= {"action": name, "_selected_action": selected}
    else:
        pk = some_pk(model_admin, person)
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[pk])
        data |= {f"{location.value}-action": name, "_selected_action": [pk]}
    before, known = snapshot(), secrets()
    response = client.post(url, data, follow=True)
    assert response.status_code in {200, 403}
    assert_refused_and_harmless(response, before=before, known_secrets=known)
    offered = model_admin.get_actions(request, action_location=location)
    assert name not in offered, f"{name} is offered to a viewer"


@pytest.mark.parametrize(("model_admin", "pattern"), list(custom_views()))
def test_a_view_only_staff_member_is_refused_every_custom_view_that_changes_anything(
    world, viewer, model_admin, pattern
):
    client, person = viewer
    arguments = {}
    for name, converter in pattern.pattern.converters.items():
        # A row's id (a number, or a broadcast's uuid as Django's own views take it), else a
        # channel's name.
        is_row = converter.regex == "[0-9]+" or name == "object_id"
        arguments[name] = some_pk(model_admin, person) if is_row else "recording"
    url = reverse(f"admin:{pattern.name}", kwargs=arguments)
    before, known = snapshot(), secrets()
    response = client.post(url)
    if pattern.name not in OPEN_TO_VIEWERS:
        assert response.status_code == 403, f"{url} answered {response.status_code}"
    assert_refused_and_harmless(response, before=before, known_secrets=known)


@pytest.mark.parametrize(("model_admin", "view"), list(standard_views()))
def test_a_view_only_staff_member_cannot_add_change_or_delete(world, viewer, model_admin, view):
    client, person = viewer
    opts = model_admin.model._meta
    args = [] if view == "add" else [some_pk(model_admin, person)]
    before, known = snapshot(), secrets()
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 403
    assert_refused_and_harmless(response, before=before, known_secrets=known)


def test_the_walk_reaches_the_secret_actions_and_the_retry_views():
    """The walk above is only as good as what it finds."""
    names = {p.values[1] for p in actions()}
    views = {p.values[1].name for p in custom_views()}
    assert {"rotate_webhook_secret", "drop_previous_webhook_secret", "retry_selected"} <= names
    assert {"retry_failed", "delete_selected"} <= names
    assert {"notifications_needsattention_retry", "recipients_channel_probe"} <= views
    assert {"notifications_broadcast_cancel", "recipients_audience_members_remove"} <= views
    assert "notifications_broadcast_retry_chunks" in views
    # Send is the broadcasts' add view, which the walk of Django's own views reaches.
    assert "notifications.Broadcast:add" in {p.id for p in standard_views()}


def test_the_probe_buttons_are_offered_only_to_who_may_use_them(client, django_user_model):
    person = django_user_model.objects.create_user("looker", is_staff=True)
    person.user_permissions.add(Permission.objects.get(codename="view_notificationdelivery"))
    client.force_login(person)
    assert "data-probe=" not in client.get("/admin/").content.decode()
    assert client.post("/admin/recipients/channeladdress/probe/telegram/").status_code == 403
    # Seeing the addresses is not enough: the probe is an act of its own.
    person.user_permissions.add(Permission.objects.get(codename="view_channeladdress"))
    assert "data-probe=" not in client.get("/admin/").content.decode()
    person.user_permissions.add(Permission.objects.get(codename="probe_channel"))
    assert 'data-probe="telegram"' in client.get("/admin/").content.decode()
