"""Web push end to end in Debian's Firefox ESR: a real subscription made by the preference
centre's button, a push sent by the real drain through the webpush channel, shown by the
service worker, and its click opening the notification's page.

Chromium cannot do this here (tests/browser/test_push.py says why); Firefox can, because its
push service is a pref: here a local one (tests/mozpush.py) that issues the endpoint, takes
the channel's HTTPS POST, checks its VAPID signature and hands it to Firefox over Mozilla's
WebSocket protocol. The notification is clicked in Firefox's own alert window, a click the
browser trusts, so the worker's notificationclick may open a window.
"""

from __future__ import annotations

import io
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command
from marionette_driver.by import By

import transports as channels
from core import vapid
from notifications import enqueue
from notifications.models import NotificationDelivery
from pwa import precache, views
from recipients import catalogue
from recipients.models import ChannelAddress, Recipient
from tests.browser.conftest import READER_PASSWORD
from tests.browser.firefox import Firefox
from tests.helpers import require
from tests.mozpush import ACK_DELIVERED, MozPushService

pytestmark = pytest.mark.browser

CENTRE = "/account/notifications/"
# Where the notification points: a page the centre is not, so the click must open a tab.
TARGET = "/de/account/inbox/"
# Each wait's deadline: generous, as the machine may be busy with other tests; a passing
# run waits a fraction of it.
SECONDS = 20


@pytest.fixture
def push_service(tmp_path):
    with MozPushService(tmp_path) as service:
        yield service


@pytest.fixture
def wired(settings, push_service):
    """A VAPID pair for the page and the channel, loopback allowed and the push service's
    certificate trusted, as tests/notifications/test_webpush.py wires its peer."""
    settings.WEBPUSH_VAPID_PUBLIC_KEY, settings.WEBPUSH_VAPID_PRIVATE_KEY = vapid.new_pair()
    settings.WEBPUSH_VAPID_SUBJECT = "mailto:ops@example.com"
    settings.WEBPUSH_ALLOW_LOOPBACK = True
    settings.WEBPUSH_CA_FILE = str(push_service.ca_file)
    # The push service's endpoints are on a free port, not 443.
    settings.WEBPUSH_ENDPOINT_PORTS = (443, urlsplit(push_service.url).port)
    caches = (channels._load, precache.worker_config, views.worker_source)
    for cached in caches:
        cached.cache_clear()
    yield push_service
    for channel in channels.configured().values():
        channel.close()
    for cached in caches:
        cached.cache_clear()


@pytest.fixture
def firefox(tmp_path, push_service):
    executable = require("firefox-esr", install="apt-get install firefox-esr")
    browser = Firefox(
        executable,
        tmp_path / "profile",
        {
            "dom.push.enabled": True,
            "dom.push.serverURL": push_service.websocket_url,
            # ws:// on loopback; Firefox otherwise insists on wss://.
            "dom.push.testing.allowInsecureServerURL": True,
            # Marionette's recommended prefs turn the push connection off.
            "dom.push.connection.enabled": True,
            # Firefox's own alert window, which Marionette can find and click, rather than
            # the desktop's notification daemon, which a headless run does not have.
            "alerts.useSystemBackend": False,
        },
        seconds=SECONDS,
    )
    yield browser
    browser.quit()


def sign_in_to_the_centre(firefox: Firefox, site) -> None:
    client = firefox.client
    client.navigate(site.url + "/account/sign-in/?next=" + CENTRE)
    client.find_element(By.ID, "id_username").send_keys("ada")
    client.find_element(By.ID, "id_password").send_keys(READER_PASSWORD)
    client.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    firefox.wait_for(
        lambda: client.get_url() == site.url + CENTRE, seconds=SECONDS, what="the centre"
    )


def push_state(firefox: Firefox) -> str:
    """The push section's state once the script has settled on one."""

    def settled():
        state = firefox.client.execute_script(
            """
            const line = document.querySelector("[data-push-state]:not([hidden])");
            return line && line.dataset.pushState;
            """
        )
        return state not in (None, "working", "needs-script") and state

    return firefox.wait_for(settled, seconds=SECONDS, what="settled push state")


# The notifications the page's worker shows, as the page's registration lists them.
SHOWN = """
const [done] = arguments;
navigator.serviceWorker.ready
  .then((registration) => registration.getNotifications())
  .then((found) => done(found.map((n) => ({title: n.title, body: n.body, lang: n.lang,
                                           url: n.data && n.data.url}))));
"""


def test_a_push_from_the_drain_reaches_firefox_and_its_click_opens_the_page(
    wired, firefox, site, ada, settings
):
    push_service = wired
    client = firefox.client
    # Answered as a person answers the prompt with "Allow": the test cannot click a prompt
    # a headless browser does not draw.
    firefox.allow_notifications(site.url)
    sign_in_to_the_centre(firefox, site)
    centre = client.current_window_handle

    # The real button: permission, pushManager.subscribe() through the local push service,
    # and the subscription posted to the server.
    assert push_state(firefox) == "off"
    client.find_element(By.ID, "push-on").click()
    state = push_state(firefox)
    error = client.find_element(By.CSS_SELECTOR, "[data-push-error]").text
    assert state == "on", (state, error, push_service.received)
    (registration,) = push_service.registrations.values()
    # Firefox subscribed with the site's VAPID key: pushes must be signed with it.
    assert registration.key == vapid.b64url_decode(settings.WEBPUSH_VAPID_PUBLIC_KEY)
    (address,) = ChannelAddress.objects.filter(user=ada, channel="webpush")
    assert (address.address, address.is_active) == (registration.endpoint, True)
    assert "Firefox" in address.push_subscription.user_agent

    # The real send: the drain renders it in the recipient's language, the channel encrypts
    # it, signs it and POSTs it; the service forwards it; Firefox decrypts and shows it.
    Recipient.objects.update_or_create(user=ada, defaults={"language": "de"})
    sent = enqueue.send_notification(
        user=ada,
        type="queue.demo",
        params={"label": "Firefox"},
        channels=["webpush"],
        action_url=TARGET,
    )
    call_command("drain_outbox", "--once", stdout=io.StringIO())
    (delivery,) = NotificationDelivery.objects.filter(notification=sent.notification)
    assert (delivery.status, delivery.error_code) == ("sent", ""), delivery.error_message
    (push,) = push_service.pushes
    assert push.problems == []
    assert delivery.provider_message_id == f"{push_service.url}/message/{push.version}"
    push_service.wait_for(lambda: push.ack is not None, seconds=SECONDS, what="ack")
    assert push.ack == ACK_DELIVERED

    german = catalogue.render(key="queue.demo", params={"label": "Firefox"}, language="de")
    english = catalogue.render(key="queue.demo", params={"label": "Firefox"}, language="en")
    assert german.subject != english.subject
    shown = firefox.wait_for(
        lambda: client.execute_async_script(SHOWN, script_timeout=SECONDS * 1000),
        seconds=SECONDS,
        what="notification",
    )
    assert shown == [
        {"title": german.subject, "body": german.body, "lang": "de", "url": site.url + TARGET}
    ]

    # The click, in Firefox's alert window: the worker's notificationclick closes the
    # notification and, no tab being at the target, opens one there.
    alert = firefox.click_alert(german.subject, seconds=SECONDS)
    assert alert == {"title": german.subject, "body": german.body, "lang": "de"}

    def opened():
        tabs = [handle for handle in client.window_handles if handle != centre]
        for handle in tabs:
            client.switch_to_window(handle)
            if client.get_url() == site.url + TARGET:
                return handle
        return None

    firefox.wait_for(opened, seconds=SECONDS, what=f"a tab at {TARGET}")
    page = firefox.wait_for(
        lambda: client.execute_script(
            """
            if (document.readyState !== "complete") return null;
            return {lang: document.documentElement.lang, path: location.pathname};
            """
        ),
        seconds=SECONDS,
        what="the target page loaded",
    )
    assert page == {"lang": "de", "path": TARGET}
    # The worker closed the notification it was clicked on.
    client.switch_to_window(centre)
    firefox.wait_for(
        lambda: client.execute_async_script(SHOWN, script_timeout=SECONDS * 1000) == [],
        seconds=SECONDS,
        what="the notification closed",
    )
