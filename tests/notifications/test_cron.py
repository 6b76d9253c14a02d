from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.core.management import call_command
from prometheus_client.exposition import generate_latest

from notifications import checks, heartbeat, metrics
from notifications.models import DrainHeartbeat, NotificationDelivery, Status
from tests.helpers import make_deliveries

URL = "/cron/drain"
SECRET = "s3cret-cron-token-of-at-least-thirty-two-characters"


@pytest.fixture
def cron(settings):
    settings.CRON_SECRET = SECRET
    return {"HTTP_AUTHORIZATION": f"Bearer {SECRET}"}


def test_the_trigger_does_not_exist_without_a_secret(client, db, settings):
    settings.CRON_SECRET = ""
    assert client.post(URL, HTTP_AUTHORIZATION="Bearer anything").status_code == 404
    assert client.get(URL, HTTP_AUTHORIZATION="Bearer anything").status_code == 404


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


@pytest.mark.parametrize("method", ["get", "post"])
def test_get_and_post_both_drain_because_some_crons_only_send_get(client, db, cron, user, method):
    ids = make_deliveries(user, 2)
    response = getattr(client, method)(URL, **cron)
    assert response.status_code == 200
    report = response.json()["report"]
    assert (report["claimed"], report["sent"]) == (2, 2)
    assert set(
        NotificationDelivery.objects.filter(pk__in=ids).values_list("status", flat=True)
    ) == {Status.SENT}
    assert DrainHeartbeat.objects.get(worker="cron").last_report["sent"] == 2


@pytest.mark.parametrize("method", ["put", "delete", "patch"])
def test_other_methods_are_refused(client, db, cron, method):
    assert getattr(client, method)(URL, **cron).status_code == 405


def test_a_request_drains_batch_after_batch_while_rows_are_due(client, db, cron, user, settings):
    settings.DELIVERY_BATCH_SIZE = 4
    make_deliveries(user, 10)
    report = client.post(URL, **cron).json()["report"]
    assert (report["claimed"], report["sent"]) == (10, 10)
    assert not NotificationDelivery.objects.exclude(status=Status.SENT).exists()


def test_a_drain_out_of_time_hands_unsent_rows_back_and_answers(client, db, cron, user, settings):
    # Each send takes 0.2 s and may take 0.5 s: within 2 s, one at a time, only the sends that
    # start before 1.5 s are allowed to start (about seven); the rest go back to the queue.
    settings.CRON_DRAIN_SECONDS = 2.0
    settings.DELIVERY_CONCURRENCY = 1
    settings.DELIVERY_BATCH_SIZE = 20
    ids = make_deliveries(user, 20, channel="slow")
    response = client.post(URL, **cron)
    assert response.status_code == 200
    report = response.json()["report"]
    assert report["claimed"] == 20
    assert report["sent"] >= 1
    assert report["released"] >= 1
    assert report["sent"] + report["released"] == 20
    rows = NotificationDelivery.objects.filter(pk__in=ids)
    assert not rows.filter(status=Status.PROCESSING).exists()
    released = rows.filter(status=Status.PENDING)
    assert released.count() == report["released"]
    # Handed back with the send given back to the budget, due again at once.
    for delivery in released:
        assert delivery.attempts == 1
        assert delivery.attempts - delivery.attempt_base == 0
    assert released.count() == NotificationDelivery.objects.due().filter(pk__in=ids).count()


def test_the_trigger_is_rate_limited(client, db, cron):
    codes = [client.post(URL, **cron).status_code for _ in range(13)]
    assert codes == [200] * 12 + [429]
    response = client.post(URL, **cron)
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "At most 12 drains a minute" in response.json()["error"]


def test_wrong_guesses_are_limited_per_client_and_the_right_secret_is_never_refused(
    client, db, cron
):
    guesser = {"REMOTE_ADDR": "203.0.113.7"}
    codes = [
        client.post(URL, HTTP_AUTHORIZATION="Bearer guess", **guesser).status_code for _ in range(6)
    ]
    assert codes == [401] * 5 + [429]
    refused = client.post(URL, HTTP_AUTHORIZATION="Bearer guess", **guesser)
    assert "Too many wrong secrets" in refused.json()["error"]
    assert 1 <= int(refused["Retry-After"]) <= 15 * 60
    # The cron itself, from that very address, still drains: guessers cannot lock it out.
    assert client.post(URL, **cron, **guesser).status_code == 200
    assert (
        client.post(URL, HTTP_AUTHORIZATION="Bearer guess", REMOTE_ADDR="198.51.100.1").status_code
        == 401
    )


def test_a_cron_budget_shorter_than_a_send_is_a_start_up_error(settings):
    settings.CRON_SECRET = SECRET
    settings.CRON_DRAIN_SECONDS = 5  # the email channel's worst case is EMAIL_TIMEOUT + 1 s
    errors = checks.check_lease_and_tick()
    assert [e.id for e in errors] == ["notifications.E004"]
    assert "email (11 s)" in errors[0].msg
    assert checks.cron_budget_problem(budget=timedelta(seconds=20)) is None


# transactional_db: the command's run starts with close_old_connections(), which closes a
# connection left inside a test's transaction.
def test_drain_outbox_once_run_by_hand_is_a_command_run_not_the_cron(
    transactional_db, user, caplog
):
    make_deliveries(user, 3)
    with caplog.at_level(logging.INFO, logger="notifications.drain_outbox"):
        call_command("drain_outbox", "--once", "--batch-size=2")
    # The options given apply to the one batch, as they do to the loop's.
    assert NotificationDelivery.objects.filter(status=Status.SENT).count() == 2
    assert DrainHeartbeat.objects.get(worker=heartbeat.COMMAND_WORKER).last_report["sent"] == 2
    assert not DrainHeartbeat.objects.filter(worker=heartbeat.CRON_WORKER).exists()
    assert "drain_outbox command: batch=2" in caplog.text
    assert "cron" not in caplog.text
    # Neither the cron's last run nor a loop: the pages and /metrics say nothing of it.
    loop = heartbeat.status()
    assert (loop.last_cron, loop.last_tick) == (None, None)
    assert 'worker="command"' not in generate_latest(metrics.registry()).decode()


def test_only_the_cron_endpoint_heartbeats_as_the_cron(client, transactional_db, cron, user):
    make_deliveries(user, 1)
    assert client.post(URL, **cron).status_code == 200
    call_command("drain_outbox", "--once")
    assert set(DrainHeartbeat.objects.values_list("worker", flat=True)) == {"cron", "command"}
    cron_row = DrainHeartbeat.objects.get(worker="cron")
    assert heartbeat.status().last_cron == cron_row.ticked_at
