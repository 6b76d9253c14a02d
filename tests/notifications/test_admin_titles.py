"""Each page's title says what its reader may do there: "View …" to a staff member who may
only look, "Change …" to one who may edit, in every language."""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils import translation

from core.admin_wording import Worded
from notifications import broadcasts
from recipients import audiences
from recipients.models import Audience, ChannelAddress, Recipient
from tests.helpers import finish, make_deliveries

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("collected_static")]

WORDED = [
    pytest.param(model_admin, id=model_admin.model._meta.label)
    for model_admin in admin.site._registry.values()
    if isinstance(model_admin, Worded)
]


@pytest.fixture
def rows(user):
    ids = make_deliveries(user, 2)
    finish(ids[:1], status="dead")
    finish(ids[1:], status="failed")
    ChannelAddress.objects.create(user=user, channel="telegram", address="1001")
    Recipient.objects.create(user=user)
    audiences.add(Audience.objects.create(name="Beta testers", key="beta"), [user])
    broadcasts.send_broadcast(audience=[user], type="welcome", params={"name": "Ada"})


def logged_in(person) -> Client:
    client = Client()
    client.force_login(person)
    return client


@pytest.fixture
def viewer(django_user_model):
    person = django_user_model.objects.create_user("viewer", is_staff=True)
    person.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    return logged_in(person)


@pytest.fixture
def editor(django_user_model):
    return logged_in(django_user_model.objects.create_superuser("boss", "b@example.com", "pw"))


def heading(client, url: str) -> str:
    body = client.get(url).content.decode()
    [found] = re.findall(r"<h1[^>]*>(.*?)</h1>", body, flags=re.S)
    return found.strip()


@pytest.mark.parametrize("language", ["en", "ru", "de"])
@pytest.mark.parametrize("model_admin", WORDED)
def test_a_view_only_staff_member_is_told_they_are_viewing(
    rows, viewer, editor, model_admin, language
):
    opts = model_admin.model._meta
    request = RequestFactory().get("/")
    request.user = get_user_model().objects.get(username="boss")
    pk = model_admin.get_queryset(request).order_by("pk").values_list("pk", flat=True)[0]
    prefix = "" if language == "en" else f"/{language}"
    change = prefix + reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[pk])
    listing = prefix + reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    with translation.override(language):
        view_title, list_title = str(model_admin.view_title), str(model_admin.list_title)
        change_title = str(model_admin.change_title or model_admin.view_title)
    assert heading(viewer, change) == view_title
    assert heading(viewer, listing) == list_title
    assert heading(editor, change) == change_title


@pytest.mark.parametrize(
    ("prefix", "view", "change"),
    [
        ("", "View channel address", "Change channel address"),
        ("/ru", "Просмотр адреса в канале", "Изменить адрес в канале"),
        ("/de", "Kanaladresse ansehen", "Kanaladresse ändern"),
    ],
)
def test_a_channel_address_page_says_view_or_change(rows, viewer, editor, prefix, view, change):
    address = ChannelAddress.objects.get()
    url = f"{prefix}/admin/recipients/channeladdress/{address.pk}/change/"
    assert heading(viewer, url) == view
    assert heading(editor, url) == change


@pytest.mark.parametrize(
    ("prefix", "name"), [("/de", "Handlungsbedarf (1)"), ("/ru", "Требуют внимания (1)")]
)
def test_needs_attention_is_named_naturally(rows, editor, prefix, name):
    assert name in editor.get(prefix + "/admin/").content.decode()
