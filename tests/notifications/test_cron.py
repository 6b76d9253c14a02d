from __future__ import annotations

import pytest

from notifications.models import DrainHeartbeat, NotificationDelivery, Status
from tests.notifications.conftest import make_deliveries

URL = "/cron/drain"
SECRET = "s3cret-cron-token-with-some-length"


@pytest.fixture
def cron(settings):
    settings.CRON_SECRET = SECRET
    return {"HTTP_AUTHORIZATION": f"Bearer {SECRET}"}


def test_the_trigger_does_not_exist_without_a_secret(client, db, settings):
    settings.CRON_SECRET = ""
    assert client.post(URL, HTTP_AUTHORIZATION="Bearer anything").status_code == 404


@pytest.mark.parametrize(
    "header",
    [None, "Bearer wrong", f"Basic {SECRET}", f"Bearer {SECRET}x", "Bearer"],
)
def test_a_wrong_or_missing_secret_is_refused(client, db, cron, header):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.post(URL, **extra)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="cron"'
    assert "Authorization: Bearer" in response.json()["error"]


def test_only_post_drains(client, db, cron):
    assert client.get(URL, **cron).status_code == 405


def test_an_authorised_post_drains_a_batch_and_returns_the_report(client, db, cron, user):
    ids = make_deliveries(user, 2)
    response = client.post(URL, **cron)
    assert response.status_code == 200
    report = response.json()["report"]
    assert (report["claimed"], report["sent"]) == (2, 2)
    assert set(
        NotificationDelivery.objects.filter(pk__in=ids).values_list("status", flat=True)
    ) == {Status.SENT}
    assert DrainHeartbeat.objects.get(worker="cron").last_report["sent"] == 2


def test_the_trigger_is_rate_limited(client, db, cron):
    codes = [client.post(URL, **cron).status_code for _ in range(13)]
    assert codes == [200] * 12 + [429]
    response = client.post(URL, **cron)
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "At most 12 drains a minute" in response.json()["error"]
