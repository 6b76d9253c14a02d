import json

import pytest
from django.contrib.auth.tokens import default_token_generator
from django.test import Client
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts import push_views
from recipients.models import WEBPUSH, ChannelAddress
from tests.accounts.conftest import NEW_PASSWORD, change_password
from tests.notifications.test_subscriptions import AUTH, browser_key

pytestmark = pytest.mark.django_db

SUBSCRIBE = "/account/push/subscribe/"
UNSUBSCRIBE = "/account/push/unsubscribe/"
ENDPOINT = "https://127.0.0.1:8443/push/abc"


@pytest.fixture(autouse=True)
def loopback_push_service(settings):
    # The machine has no DNS and no push service: the endpoint is on loopback, allowed as
    # tests and local development allow it.
    settings.WEBPUSH_ALLOW_LOOPBACK = True
    settings.WEBPUSH_ENDPOINT_PORTS = (443, 8443)


@pytest.fixture
def signed_in(client, ada):
    client.force_login(ada)
    return client


# One browser's key: each endpoint comes with the keys its browser made for it.
BROWSER_KEY = browser_key()


def subscription(endpoint=ENDPOINT, key=BROWSER_KEY) -> dict:
    # The shape PushSubscription.toJSON() gives.
    return {
        "endpoint": endpoint,
        "expirationTime": None,
        "keys": {"p256dh": key, "auth": AUTH},
    }


def post(client, url, body, *, content_type="application/json", **headers):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(url, data, content_type=content_type, headers=headers)


def test_subscribe_stores_the_browsers_subscription_with_its_user_agent(signed_in, ada):
    response = post(signed_in, SUBSCRIBE, subscription(), user_agent="Chromium test")
    assert response.status_code == 200, response.content
    assert response.json()["subscribed"] is True
    address = ChannelAddress.objects.get(user=ada, channel=WEBPUSH)
    assert address.address == ENDPOINT
    assert address.push_subscription.user_agent == "Chromium test"


def test_unsubscribe_removes_it_and_says_whether_there_was_one(signed_in, ada):
    post(signed_in, SUBSCRIBE, subscription())
    response = post(signed_in, UNSUBSCRIBE, {"endpoint": ENDPOINT})
    assert response.json() == {"subscribed": False, "removed": True}
    assert not ChannelAddress.objects.filter(user=ada, channel=WEBPUSH).exists()
    assert post(signed_in, UNSUBSCRIBE, {"endpoint": ENDPOINT}).json()["removed"] is False


def test_a_private_endpoint_is_a_400_saying_why(signed_in):
    response = post(signed_in, SUBSCRIBE, subscription("https://10.0.0.5/push"))
    assert response.status_code == 400
    assert "private network" in response.json()["error"]


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        ("endpoint=x", "application/x-www-form-urlencoded", "application/json"),
        ("{}", "text/plain", "application/json"),
        *(
            (body, "application/json", message)
            for body, message in [
                ("{not json", "not valid JSON"),
                (b"\xff\xfe\x00", "not valid JSON"),
                # The test client sends no content type with an empty body, as a browser's
                # fetch does.
                ("", "application/json"),
                ("[1, 2]", "must be a JSON object"),
                ('"text"', "must be a JSON object"),
                ("null", "must be a JSON object"),
                ("[" * 2000, "not valid JSON"),
                ("{}", "no keys"),
                ('{"endpoint": "https://127.0.0.1/x", "keys": []}', "no keys"),
                ('{"keys": {"p256dh": "x", "auth": "y"}}', "has no endpoint"),
                ('{"endpoint": {"a": 1}, "keys": {}}', "has no endpoint"),
                ('{"endpoint": "https://127.0.0.1/x", "keys": {}}', "p256dh"),
                ("1" * 4000, "must be a JSON object"),
                ('{"a": 1e999999}', "no keys"),
                ("NaN", "must be a JSON object"),
            ]
        ),
    ],
)
def test_hostile_subscribe_bodies_are_a_400_with_a_json_error(
    signed_in, body, content_type, message
):
    response = post(signed_in, SUBSCRIBE, body, content_type=content_type)
    assert response.status_code == 400, response.content
    assert message in response.json()["error"]
    assert not ChannelAddress.objects.exists()


@pytest.mark.parametrize("body", ["{}", '{"endpoint": 5}', '{"endpoint": ""}', "[]", "nope"])
def test_hostile_unsubscribe_bodies_are_a_400(signed_in, body):
    response = post(signed_in, UNSUBSCRIBE, body)
    assert response.status_code == 400
    assert response.json()["error"]


@pytest.mark.parametrize("url", [SUBSCRIBE, UNSUBSCRIBE])
def test_a_body_over_the_limit_is_a_413_before_it_is_read(signed_in, url):
    response = post(signed_in, url, json.dumps({"endpoint": "x" * push_views.MAX_BODY_BYTES}))
    assert response.status_code == 413
    assert response.json()["error"] == "The request is larger than 4096 bytes."


@pytest.mark.parametrize("url", [SUBSCRIBE, UNSUBSCRIBE])
def test_get_is_a_405(signed_in, url):
    assert signed_in.get(url).status_code == 405


@pytest.mark.parametrize("url", [SUBSCRIBE, UNSUBSCRIBE])
def test_the_anonymous_get_a_403_in_json(client, url):
    response = post(client, url, subscription())
    assert response.status_code == 403
    assert "Sign in" in response.json()["error"]
    assert not ChannelAddress.objects.exists()


def test_a_post_without_the_csrf_token_is_refused(ada):
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    response = post(client, SUBSCRIBE, subscription())
    assert response.status_code == 403
    assert not ChannelAddress.objects.exists()


def test_a_post_with_the_csrf_token_from_the_page_is_taken(ada):
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    client.get("/account/notifications/")
    token = client.cookies["csrftoken"].value
    response = post(client, SUBSCRIBE, subscription(), x_csrftoken=token)
    assert response.status_code == 200, response.content


def test_changes_past_the_limit_are_a_429_with_retry_after(signed_in, monkeypatch):
    monkeypatch.setattr(push_views, "LIMIT", 2)
    for _ in range(2):
        assert post(signed_in, UNSUBSCRIBE, {"endpoint": ENDPOINT}).status_code == 200
    refused = post(signed_in, UNSUBSCRIBE, {"endpoint": ENDPOINT})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert "Too many" in refused.json()["error"]


def test_the_centre_says_push_is_not_set_up_when_the_site_has_no_key(signed_in, settings):
    settings.WEBPUSH_VAPID_PUBLIC_KEY = ""
    page = signed_in.get("/account/notifications/").content.decode()
    assert "Push notifications are not set up on this site." in page
    assert "data-push-on" not in page


def test_the_centre_hands_the_script_the_key_and_the_endpoints(signed_in, settings):
    settings.WEBPUSH_VAPID_PUBLIC_KEY = browser_key()
    page = signed_in.get("/account/notifications/").content.decode()
    assert f'data-public-key="{settings.WEBPUSH_VAPID_PUBLIC_KEY}"' in page
    assert f'data-subscribe-url="{SUBSCRIBE}"' in page
    assert f'data-unsubscribe-url="{UNSUBSCRIBE}"' in page
    assert "accounts/push" in page and ".js" in page
    # Without the script, the section says what it needs; the buttons wait for it.
    assert "Turning push notifications on needs JavaScript." in page
    assert 'id="push-on" data-push-on hidden' in page


def test_forged_requests_refused_by_csrf_do_not_spend_the_users_changes(ada, monkeypatch):
    monkeypatch.setattr(push_views, "LIMIT", 2)
    forger = Client(enforce_csrf_checks=True)
    for _ in range(5):
        assert post(forger, UNSUBSCRIBE, {"endpoint": ENDPOINT}).status_code == 403
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    client.get("/account/notifications/")
    token = client.cookies["csrftoken"].value
    for _ in range(2):
        response = post(client, UNSUBSCRIBE, {"endpoint": ENDPOINT}, x_csrftoken=token)
        assert response.status_code == 200
    assert post(client, UNSUBSCRIBE, {"endpoint": ENDPOINT}, x_csrftoken=token).status_code == 429


STATUS = "/account/push/status/"
OTHER_ENDPOINT = "https://127.0.0.1:8443/push/def"


def test_status_says_whether_the_browsers_endpoint_is_the_users(signed_in):
    assert post(signed_in, STATUS, {"endpoint": ENDPOINT}).json() == {"subscribed": False}
    post(signed_in, SUBSCRIBE, subscription())
    assert post(signed_in, STATUS, {"endpoint": ENDPOINT}).json() == {"subscribed": True}
    # Looked up by its canonical spelling: the scheme in capitals is the same endpoint.
    same = ENDPOINT.replace("https:", "HTTPS:")
    assert post(signed_in, STATUS, {"endpoint": same}).json() == {"subscribed": True}
    post(signed_in, UNSUBSCRIBE, {"endpoint": ENDPOINT})
    assert post(signed_in, STATUS, {"endpoint": ENDPOINT}).json() == {"subscribed": False}


def test_status_of_an_endpoint_another_user_now_has_is_false(signed_in, ada, django_user_model):
    post(signed_in, SUBSCRIBE, subscription())
    grace = django_user_model.objects.create_user("grace", password="pw-grace-123")
    other = Client()
    other.force_login(grace)
    # The same browser, the next person signed in: the endpoint moves to them.
    post(other, SUBSCRIBE, subscription())
    assert post(other, STATUS, {"endpoint": ENDPOINT}).json() == {"subscribed": True}
    assert post(signed_in, STATUS, {"endpoint": ENDPOINT}).json() == {"subscribed": False}


@pytest.mark.parametrize(
    "body",
    ["{}", '{"endpoint": 5}', '{"endpoint": ""}', '{"endpoint": null}', "[]", "nope"],
)
def test_hostile_status_bodies_are_a_400(signed_in, body):
    response = post(signed_in, STATUS, body)
    assert response.status_code == 400
    assert response.json()["error"]


def test_status_of_a_url_no_subscription_could_have_is_false(signed_in):
    for endpoint in ["http://example.com/x", "https://10.0.0.5/push", "not a url", "x" * 3000]:
        response = post(signed_in, STATUS, {"endpoint": endpoint})
        assert response.status_code == 200
        assert response.json() == {"subscribed": False}


def test_status_is_not_counted_against_the_users_changes(signed_in, monkeypatch):
    monkeypatch.setattr(push_views, "LIMIT", 2)
    for _ in range(5):
        assert post(signed_in, STATUS, {"endpoint": ENDPOINT}).status_code == 200
    assert post(signed_in, SUBSCRIBE, subscription()).status_code == 200


def test_status_refuses_get_and_the_anonymous(client, signed_in):
    assert signed_in.get(STATUS).status_code == 405
    refused = post(Client(), STATUS, {"endpoint": ENDPOINT})
    assert refused.status_code == 403
    assert refused.json()["error"]


def test_the_centre_hands_the_script_the_status_url(signed_in, settings):
    settings.WEBPUSH_VAPID_PUBLIC_KEY = browser_key()
    page = signed_in.get("/account/notifications/").content.decode()
    assert f'data-status-url="{STATUS}"' in page


def signed_in_browser(user) -> Client:
    # A browser of its own: its own session, so its own remembered endpoint.
    client = Client()
    client.force_login(user)
    return client


def test_signing_out_turns_off_the_subscription_this_session_made(ada):
    laptop, phone = signed_in_browser(ada), signed_in_browser(ada)
    assert post(laptop, SUBSCRIBE, subscription()).status_code == 200
    assert post(phone, SUBSCRIBE, subscription(OTHER_ENDPOINT)).status_code == 200
    response = laptop.post("/account/sign-out/")
    assert response.status_code in (200, 302)
    left = ChannelAddress.objects.filter(user=ada, channel=WEBPUSH, is_active=True)
    # The laptop's is gone; the phone, signed in elsewhere, keeps its own.
    assert list(left.values_list("address", flat=True)) == [OTHER_ENDPOINT]


def test_signing_out_after_the_endpoint_moved_leaves_the_new_owners_alone(ada, django_user_model):
    grace = django_user_model.objects.create_user("grace", password="pw-grace-123")
    first, second = signed_in_browser(ada), signed_in_browser(grace)
    post(first, SUBSCRIBE, subscription())
    post(second, SUBSCRIBE, subscription())
    first.post("/account/sign-out/")
    owner = ChannelAddress.objects.get(channel=WEBPUSH, address=ENDPOINT, is_active=True)
    assert owner.user == grace


def test_signing_out_without_a_subscription_changes_nothing(ada):
    browser = signed_in_browser(ada)
    post(signed_in_browser(ada), SUBSCRIBE, subscription())
    browser.post("/account/sign-out/")
    assert ChannelAddress.objects.filter(user=ada, channel=WEBPUSH, is_active=True).count() == 1


def active_endpoints(user) -> set[str]:
    rows = ChannelAddress.objects.filter(user=user, channel=WEBPUSH, is_active=True)
    return set(rows.values_list("address", flat=True))


def test_a_new_password_keeps_this_browsers_push_and_ends_the_others(ada):
    laptop, phone = signed_in_browser(ada), signed_in_browser(ada)
    post(laptop, SUBSCRIBE, subscription())
    post(phone, SUBSCRIBE, subscription(OTHER_ENDPOINT))
    changed = change_password(laptop)
    assert changed["Location"] == "/account/password/changed/"
    assert active_endpoints(ada) == {ENDPOINT}


def test_a_password_set_by_reset_ends_every_browsers_push(ada):
    post(signed_in_browser(ada), SUBSCRIBE, subscription())
    post(signed_in_browser(ada), SUBSCRIBE, subscription(OTHER_ENDPOINT))
    uid = urlsafe_base64_encode(force_bytes(ada.pk))
    token = default_token_generator.make_token(ada)
    browser = Client()
    form_page = browser.get(f"/account/password-reset/{uid}/{token}/", follow=True)
    done = browser.post(
        form_page.redirect_chain[-1][0],
        {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert done["Location"] == "/account/password-reset/done/"
    assert active_endpoints(ada) == set()
