"""Numbers a browser reads (SVG geometry, CSS, data attributes, JSON) are written the one way
it understands, whatever the reader's language: "660,0" is no coordinate at all, and a German
or Russian chart drawn from it is empty. Numbers people read are the language's own."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.urls import reverse

from notifications import broadcasts, outbox
from recipients import audiences
from recipients.models import Audience, ChannelAddress, Recipient
from tests.helpers import finish, make_deliveries, make_timed_run, mark_failed, mark_sent

# Attributes written for people, where a number takes the reader's decimal comma.
FOR_PEOPLE = {"title", "aria-label", "aria-description", "alt", "placeholder", "content", "value"}
COMMA_DECIMAL = re.compile(r"\d,\d")


class MarkupNumbers(HTMLParser):
    """Collects every attribute, inline style and JSON block a browser parses as numbers."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._json = False
        self._style = False

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value and name not in FOR_PEOPLE and COMMA_DECIMAL.search(value):
                self.found.append(f"<{tag} {name}={value!r}>")
        self._json = tag == "script" and dict(attrs).get("type") == "application/json"
        self._style = tag == "style"

    def handle_endtag(self, tag):
        self._json = self._style = False

    def handle_data(self, data):
        if self._style and COMMA_DECIMAL.search(data):
            self.found.append(f"<style>{data[:80]!r}")
        if self._json:
            try:
                json.loads(data)
            except ValueError:
                self.found.append(f"<script type=application/json>{data[:80]!r}")


def markup_numbers(body: str) -> list[str]:
    parser = MarkupNumbers()
    parser.feed(body)
    return parser.found


@pytest.fixture
def busy(user):
    """An hour of one sent, one failed and one dead delivery: the chart's segments are thirds
    of its height, never whole pixels; and a row behind every admin list."""
    ids = make_deliveries(user, 3)
    claims = {c.id: c for c in outbox.claim(batch_size=2)}
    mark_sent(claims[ids[0]], provider_message_id="m")
    mark_failed(claims[ids[1]], code="BAD_ADDRESS", message="x", retryable=False)
    finish(ids[2:], status="dead")
    ChannelAddress.objects.create(user=user, channel="webhook", address="https://hooks.example/")
    Recipient.objects.create(user=user)
    Group.objects.create(name="support")
    audiences.add(Audience.objects.create(name="Beta testers", key="beta"), [user])
    broadcasts.send_broadcast(audience=[user], type="welcome", params={"name": "Ada"})
    make_timed_run()
    return ids


def pages() -> list[str]:
    """The public pages, the admin's index, and every admin's list and one row's page."""
    # The showcase's page too, on a site that has it (V10R_SHOWCASES).
    showcase = [reverse("showcases:workers")] if apps.is_installed("showcases") else []
    urls = ["/", *showcase, reverse("admin:index")]
    for model_admin in admin.site._registry.values():
        opts = model_admin.model._meta
        urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        first = model_admin.get_queryset(superuser_request()).order_by("pk").first()
        assert first is not None, f"no {opts.label} row to show"
        urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[first.pk]))
    return urls


def superuser_request():
    request = RequestFactory().get("/")
    request.user = get_user_model().objects.filter(is_superuser=True).get()
    return request


def test_the_checker_finds_a_comma_decimal_in_an_attribute():
    assert markup_numbers('<rect x="660,0" title="1,5 s">') == ["<rect x='660,0'>"]
    assert markup_numbers('<p style="width: 0,5em">') == ["<p style='width: 0,5em'>"]
    assert markup_numbers('<script type="application/json">{"a": 1,5}</script>') != []


@pytest.mark.parametrize("language", ["en", "ru", "de"])
def test_no_page_prints_a_localised_number_into_markup(admin_client, busy, language):
    prefix = "" if language == "en" else f"/{language}"
    for url in pages():
        response = admin_client.get(prefix + url)
        assert response.status_code == 200, url
        assert markup_numbers(response.content.decode()) == [], url
        assert language in response.get("Content-Language", language)


@pytest.mark.parametrize("language", ["en", "ru", "de"])
def test_the_hourly_chart_is_drawn_with_plain_coordinates(admin_client, busy, language):
    prefix = "" if language == "en" else f"/{language}"
    body = admin_client.get(prefix + "/admin/").content.decode()
    rects = re.findall(r'<rect class="bar-\w+" x="([^"]+)" y="([^"]+)" width="([^"]+)"', body)
    assert len(rects) == 3  # this hour's sent, failed and dead
    assert any("." in value for values in rects for value in values)  # thirds: 53.33
    for values in rects:
        for value in values:
            float(value)  # a comma would not parse
