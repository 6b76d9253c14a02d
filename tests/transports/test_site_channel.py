"""A channel of a site's own, defined outside the project's packages exactly as
docs/channels.md shows it (tests/sites/acme/slack.py) and configured with one line of
settings, is known everywhere a built-in one is: the staff form, the preference centre, quiet
hours, the checks, the admin's health, /metrics, and a drain that sends it to a real HTTP
server on loopback."""

from __future__ import annotations

import html
import io
import re
from datetime import datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.core import checks
from django.core.management import call_command
from prometheus_client.parser import text_string_to_metric_families

from notifications import worker
from notifications.enqueue import send_notification
from notifications.models import NotificationDelivery, Status
from recipients import preferences
from recipients.forms import ChannelAddressForm
from recipients.models import ChannelAddress, Recipient
from tests.dbclock import database_clock_at
from tests.httppeers import HTTPPeer, Reply, Request, json_reply

BASE_DIR = Path(__file__).resolve().parent.parent.parent
EXAMPLE = BASE_DIR / "tests" / "sites" / "acme" / "slack.py"
PATH = "tests.sites.acme.slack.SlackChannel"
TOKEN = "xoxb-1-test-token"
MEMBER = "U0123ABCDE"
REFUSAL = "A Slack member ID is U or W, then capitals and digits."
CENTRE = "/account/notifications/"
BERLIN = ZoneInfo("Europe/Berlin")
METRICS_TOKEN = "m" * 40


class SlackPeer(HTTPPeer):
    """Slack's Web API, as much of it as the channel speaks: chat.postMessage with a bearer
    token, answering {"ok": true, "ts": …} or {"ok": false, "error": …} as Slack does."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        super().__init__()

    def ok(self, request: Request) -> Reply:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return json_reply(200, {"ok": False, "error": "invalid_auth"})
        if request.path != "/api/chat.postMessage":
            return json_reply(404, {"ok": False, "error": "unknown_method"})
        with self.lock:
            self.messages.append(request.json())
            ts = f"1765130000.{len(self.messages):06d}"
        return json_reply(200, {"ok": True, "channel": "D0123ABCDE", "ts": ts})


@pytest.fixture
def slack_api():
    with SlackPeer() as peer:
        yield peer


@pytest.fixture
def slack(settings, slack_api, rebuilt_channels):
    """The site's settings: the channel's one line, its token, and its API on loopback."""
    settings.DELIVERY_CHANNELS = {**settings.DELIVERY_CHANNELS, "slack": PATH}
    settings.SLACK_BOT_TOKEN = TOKEN
    settings.SLACK_API_BASE_URL = f"{slack_api.url}/api"
    rebuilt_channels()
    return slack_api


@pytest.fixture
def ada(django_user_model):
    return django_user_model.objects.create_user("ada", email="ada@example.com", password="x" * 12)


# --- The doc shows the module that runs --------------------------------------------------------


def test_the_doc_shows_the_example_module_exactly():
    doc = (BASE_DIR / "docs" / "channels.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    assert EXAMPLE.read_text() in blocks


# --- The staff form ----------------------------------------------------------------------------


def address_form(user, address: str) -> ChannelAddressForm:
    return ChannelAddressForm(
        data={"user": user.pk, "channel": "slack", "address": address, "is_active": "on"}
    )


def test_the_staff_form_offers_it_by_its_label_and_refuses_a_bad_address_in_its_words(
    db, slack, ada
):
    form = address_form(ada, "hello, world!")
    assert ("slack", "Slack") in form.fields["channel"].choices
    assert "Slack — Slack member ID" in form.fields["address"].help_text
    assert not form.is_valid()
    assert form.errors["address"] == [REFUSAL]
    good = address_form(ada, f" {MEMBER} ")
    assert good.is_valid(), good.errors
    assert good.save().address == MEMBER


def test_the_admin_add_page_refuses_it_too(admin_client, slack, ada):
    response = admin_client.post(
        "/admin/recipients/channeladdress/add/",
        {"user": ada.pk, "channel": "slack", "address": "hello, world!", "is_active": "on"},
    )
    assert response.status_code == 200
    assert REFUSAL in html.unescape(response.content.decode())
    assert not ChannelAddress.objects.exists()


# --- The preference centre ---------------------------------------------------------------------


@pytest.fixture
def signed_in(client, ada):
    client.force_login(ada)
    return client


def page(client) -> str:
    return html.unescape(client.get(CENTRE).content.decode())


def test_the_centre_shows_its_label_and_its_address_field_in_its_words(db, slack, signed_in):
    shown = page(signed_in)
    assert '<th scope="col">Slack</th>' in shown
    assert 'name="address-slack"' in shown
    assert "Slack member ID" in shown
    assert "In Slack: your profile, ⋮, “Copy member ID”. It starts with U or W." in shown
    # The quiet-hours section names it among the channels that interrupt.
    assert re.search(r"messages on the channels that interrupt \([^)]*\bSlack\b", shown)


def grid(*, off=()) -> dict[str, str]:
    """Every box as the page shows it by default, but those in off."""
    return {
        f"on-{category}-{channel}": "on"
        for category in preferences.choosable_categories()
        for channel in preferences.choosable_channels()
        if preferences.Preferences().enabled(category, channel) and (category, channel) not in off
    }


def test_a_category_is_switched_off_and_on_for_it_on_the_centre(db, slack, signed_in, ada):
    assert "slack" in preferences.choosable_channels()
    assert preferences.of(ada).enabled("account", "slack")
    saved = signed_in.post(CENTRE, {"section": "choices", **grid(off=[("account", "slack")])})
    assert saved.status_code == 302
    assert not preferences.of(ada).enabled("account", "slack")
    assert signed_in.post(CENTRE, {"section": "choices", **grid()}).status_code == 302
    assert preferences.of(ada).enabled("account", "slack")


def test_the_centre_refuses_a_bad_address_and_keeps_a_good_one(db, slack, signed_in, ada):
    refused = signed_in.post(CENTRE, {"section": "addresses", "address-slack": "hello, world!"})
    assert refused.status_code == 200
    assert REFUSAL in html.unescape(refused.content.decode())
    assert not ChannelAddress.objects.exists()
    kept = signed_in.post(CENTRE, {"section": "addresses", "address-slack": MEMBER})
    assert kept.status_code == 302
    assert list(ChannelAddress.objects.values_list("user", "channel", "address")) == [
        (ada.pk, "slack", MEMBER)
    ]


# --- Quiet hours and a drain -------------------------------------------------------------------


def test_quiet_hours_hold_it_and_the_drain_sends_it_when_they_end(db, slack, ada):
    Recipient.objects.create(
        user=ada, time_zone="Europe/Berlin", quiet_start=time(22), quiet_end=time(7)
    )
    ChannelAddress.objects.create(user=ada, channel="slack", address=MEMBER)
    evening = datetime(2026, 12, 2, 23, tzinfo=BERLIN)
    morning = datetime(2026, 12, 3, 7, tzinfo=BERLIN)
    with database_clock_at(evening):
        enqueued = send_notification(
            user=ada, type="welcome", params={"name": "Ada"}, channels=["slack"]
        )
    assert enqueued.queued == ("slack",)
    assert NotificationDelivery.objects.get().held_until == morning
    with database_clock_at(morning - timedelta(minutes=1)):
        assert worker.drain_once().sent == 0
    with database_clock_at(morning):
        assert worker.drain_once().sent == 1
    [message] = slack.messages
    assert message["channel"] == MEMBER


def test_drain_outbox_sends_it_to_the_api_and_keeps_slacks_message_id(transactional_db, slack, ada):
    ChannelAddress.objects.create(user=ada, channel="slack", address=MEMBER)
    send_notification(user=ada, type="welcome", params={"name": "Ada"}, channels=["slack"])
    call_command("drain_outbox", "--once", stdout=io.StringIO())
    delivery = NotificationDelivery.objects.get()
    assert (delivery.status, delivery.provider_message_id) == (Status.SENT, "1765130000.000001")
    [message] = slack.messages
    assert message["channel"] == MEMBER
    assert "Ada" in message["text"]


def test_an_address_slack_says_is_gone_is_switched_off_by_the_drain(db, slack, ada, monkeypatch):
    monkeypatch.setattr(
        SlackPeer,
        "ok",
        lambda self, request: json_reply(200, {"ok": False, "error": "user_not_found"}),
    )
    address = ChannelAddress.objects.create(user=ada, channel="slack", address=MEMBER)
    send_notification(user=ada, type="welcome", params={"name": "Ada"}, channels=["slack"])
    worker.drain_once()
    delivery = NotificationDelivery.objects.get()
    assert (delivery.status, delivery.error_code) == (Status.FAILED, "SLACK_REFUSED")
    address.refresh_from_db()
    assert not address.is_active
    assert "user_not_found" in address.deactivated_reason


# --- The checks, the admin's health and /metrics -----------------------------------------------


def test_the_checks_warn_of_its_missing_token_naming_it(db, slack, settings, rebuilt_channels):
    assert not [m for m in checks.run_checks() if "slack" in m.msg]
    settings.SLACK_BOT_TOKEN = ""
    rebuilt_channels()
    [warning] = [m for m in checks.run_checks() if m.id == "transports.W001" and "slack" in m.msg]
    assert "SLACK_BOT_TOKEN is not set" in warning.msg
    assert warning.level == checks.WARNING


def test_the_admins_health_table_lists_it_by_its_label(admin_client, slack):
    body = admin_client.get("/admin/").content.decode()
    row = re.search(r'<tr data-channel="slack">.*?</tr>', body, flags=re.DOTALL)
    assert row is not None
    assert '<th scope="row">Slack</th>' in row.group()
    assert "No activity" in row.group()
    # It has no identity endpoint to probe (Channel.probes), so no button.
    assert 'data-probe="slack"' not in body


def test_metrics_show_it_before_and_after_its_first_row(db, client, slack, ada, settings):
    settings.METRICS_TOKEN = METRICS_TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []

    def sample(name: str, **labels) -> float:
        response = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        for family in text_string_to_metric_families(response.content.decode()):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    return s.value
        raise AssertionError(f"no sample {name} {labels}")

    assert sample("v10r_outbox_deliveries", state="pending", channel="slack") == 0
    ChannelAddress.objects.create(user=ada, channel="slack", address=MEMBER)
    send_notification(user=ada, type="welcome", params={"name": "Ada"}, channels=["slack"])
    assert sample("v10r_outbox_deliveries", state="pending", channel="slack") == 1
