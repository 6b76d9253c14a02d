"""/metrics: the Prometheus text format, who may read it, and numbers that reflect what drain
processes just did — summed over every process, since they come from PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from notifications import broadcasts, metrics, retention
from notifications.drain import LANE_NAMES
from notifications.models import (
    BroadcastChunk,
    ChunkStatus,
    DrainMetric,
    NotificationDelivery,
    Status,
)
from notifications.worker import Worker
from tests.helpers import (
    counts,
    database_url,
    execute,
    make_deliveries,
    poll,
    start_drain,
    stop,
)

TOKEN = "t" * 40


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []


def scrape(client) -> dict[str, dict]:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert response["Cache-Control"] == "no-store"
    families = text_string_to_metric_families(response.content.decode())
    return {family.name: family for family in families}


def sample(families, name: str, **labels) -> float:
    for family in families.values():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise AssertionError(f"no sample {name} {labels}")


@pytest.mark.django_db
def test_without_a_token_or_network_the_endpoint_does_not_exist(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = []
    assert client.get("/metrics").status_code == 404


@pytest.mark.django_db
def test_a_missing_or_wrong_token_is_refused_and_then_limited(client, metrics_on):
    assert client.get("/metrics").status_code == 401
    wrong = {"Authorization": "Bearer " + "x" * 40}
    statuses = [client.get("/metrics", headers=wrong).status_code for _ in range(25)]
    assert statuses[0] == 401 and statuses[-1] == 429
    assert client.post("/metrics").status_code == 405
    # The right token is still let in, whatever the case of the scheme's name.
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/metrics", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code != 200


@pytest.mark.django_db
def test_an_allowed_network_needs_no_token(client, settings):
    import ipaddress

    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    assert client.get("/metrics").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 401


@pytest.mark.django_db
def test_the_numbers_reflect_a_drain_that_just_happened(client, metrics_on, user, settings):
    make_deliveries(user, 7, channel="recording")
    make_deliveries(user, 2, channel="always_retryable")
    waiting = make_deliveries(user, 3, channel="recording")
    execute(
        "UPDATE notifications.notification_deliveries SET next_attempt_at = now() + interval"
        " '1 hour' WHERE id = ANY(%s)",
        [waiting],
    )
    before = scrape(client)
    assert sample(before, "v10r_outbox_deliveries", state="pending", channel="recording") == 10
    assert sample(before, "v10r_outbox_oldest_due_seconds") >= 0
    worker = Worker(name="test-host:1", interval=timedelta(seconds=15))
    try:
        worker.tick()
    finally:
        worker.close()
    after = scrape(client)
    assert sample(after, "v10r_outbox_sends_total", channel="recording", outcome="sent") == 7
    assert (
        sample(after, "v10r_outbox_sends_total", channel="always_retryable", outcome="retrying")
        == 2
    )
    assert (
        sample(after, "v10r_outbox_deliveries", state="retrying", channel="always_retryable") == 2
    )
    assert sample(after, "v10r_outbox_deliveries", state="sent", channel="") == 7
    assert sample(after, "v10r_outbox_claim_seconds_count") == 1
    assert sample(after, "v10r_outbox_claim_seconds_bucket", le="+Inf") == 1
    assert sample(after, "v10r_outbox_write_seconds_count") >= 1
    assert sample(after, "v10r_drain_heartbeat_age_seconds", worker="test-host:1") < 5
    assert sample(after, "v10r_drain_loops_running") == 1
    assert sample(after, "v10r_outbox_table_bytes") > 0


@pytest.mark.django_db
def test_the_last_prune_is_reported(client, metrics_on, user):
    ids = make_deliveries(user, 4, channel="recording")
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'sent',"
        " created_at = now() - interval '40 days' WHERE id = ANY(%s)",
        [ids],
    )
    retention.prune(retention.RetentionPolicy.from_settings(pause=0))
    families = scrape(client)
    assert sample(families, "v10r_outbox_prune_last_deleted", kind="sent") == 4
    assert sample(families, "v10r_outbox_prune_last_finished_timestamp_seconds") > 1.7e9


def test_two_drain_processes_add_up(transactional_db, client, metrics_on, user, smtp_server):
    make_deliveries(user, 400, channel="email")
    drains = [
        start_drain("--batch-size", "20", url=database_url(), smtp_port=smtp_server.port)
        for _ in range(2)
    ]
    try:
        done = poll(lambda: counts() == {"sent": 400}, seconds=120, every=0.5)
    finally:
        outputs = [stop(drain) for drain in drains]
    assert done, outputs
    families = scrape(client)
    # Each process flushed its own rows (on its heartbeats and as it stopped): together, all.
    assert sample(families, "v10r_outbox_sends_total", channel="email", outcome="sent") == 400
    assert DrainMetric.objects.values("worker").distinct().count() == 2
    assert sample(families, "v10r_outbox_claim_seconds_count") >= 400 / 20


def test_a_tally_puts_each_time_in_its_bucket():
    tally = metrics.Tally()
    for seconds in (0.0005, 0.001, 0.003, 7.0):
        tally.observe("claim_seconds", seconds)
    assert tally.values[("claim_seconds_bucket", "0.001")] == 2
    assert tally.values[("claim_seconds_bucket", "0.005")] == 1
    assert tally.values[("claim_seconds_bucket", "+Inf")] == 1
    assert tally.values[("claim_seconds_count", "")] == 4


@pytest.mark.django_db
def test_failed_and_dead_rows_are_counted_per_channel(client, metrics_on, user):
    from tests.helpers import finish

    finish(make_deliveries(user, 2, channel="recording"), status="failed")
    finish(make_deliveries(user, 3, channel="always_retryable"), status="dead")
    finish(make_deliveries(user, 1, channel="recording"), status="dead")
    families = scrape(client)
    assert sample(families, "v10r_outbox_deliveries", state="failed", channel="recording") == 2
    assert sample(families, "v10r_outbox_deliveries", state="dead", channel="recording") == 1
    assert sample(families, "v10r_outbox_deliveries", state="dead", channel="always_retryable") == 3


@pytest.mark.django_db
def test_a_stalled_loop_shows_a_growing_age_and_is_not_counted_as_running(client, metrics_on):
    execute(
        "INSERT INTO notifications.drain_heartbeats (worker, host, interval_seconds, started_at,"
        " ticked_at, last_report) VALUES"
        " ('stalled:1', 'stalled', 15, now() - interval '1 hour', now() - interval '10 minutes',"
        " '{}'), ('killed:2', 'killed', 15, now() - interval '3 hours',"
        " now() - interval '2 hours', '{}'), ('cron', 'serverless', 0,"
        " now() - interval '1 hour', now() - interval '10 minutes', '{}')"
    )
    families = scrape(client)
    assert 590 < sample(families, "v10r_drain_heartbeat_age_seconds", worker="stalled:1") < 700
    assert sample(families, "v10r_drain_loops_running") == 0
    # Neither a loop killed hours ago nor the cron trigger, quiet between its calls by design.
    for gone in ("killed:2", "cron"):
        with pytest.raises(AssertionError, match="no sample"):
            sample(families, "v10r_drain_heartbeat_age_seconds", worker=gone)


@pytest.mark.django_db
def test_the_counts_of_processes_gone_for_an_hour_are_folded_and_still_add_up(client, metrics_on):
    def flush(worker: str, sent: float, claims: list[float]) -> None:
        tally = metrics.Tally()
        tally.add("sends", "email|sent", sent)
        for seconds in claims:
            tally.observe("claim_seconds", seconds)
        tally.flush(worker=worker)

    flush("old-host:1", 5, [0.002, 0.3])
    flush("old-host:2", 7, [0.002])
    flush("live-host:3", 11, [0.02])
    execute(
        "UPDATE notifications.drain_metrics SET updated_at = now() - interval '2 hours'"
        " WHERE worker LIKE 'old-host:%%'"
    )
    before = scrape(client)
    assert metrics.fold_retired() == 5 + 4  # every row of the two old processes
    after = scrape(client)
    for name, labels in [
        ("v10r_outbox_sends_total", {"channel": "email", "outcome": "sent"}),
        ("v10r_outbox_claim_seconds_count", {}),
        ("v10r_outbox_claim_seconds_sum", {}),
        ("v10r_outbox_claim_seconds_bucket", {"le": "0.0025"}),
        ("v10r_outbox_claim_seconds_bucket", {"le": "+Inf"}),
    ]:
        # Exactly: sums are kept in whole microseconds, so no order of adding can lower them.
        assert sample(after, name, **labels) == sample(before, name, **labels)
    assert sample(after, "v10r_outbox_sends_total", channel="email", outcome="sent") == 23
    assert sample(after, "v10r_outbox_claim_seconds_sum") == 0.324
    workers = set(DrainMetric.objects.values_list("worker", flat=True))
    assert workers == {"live-host:3", metrics.RETIRED}
    # Folding again adds into the same retired rows, and a process coming back starts afresh.
    flush("old-host:1", 1, [])
    execute("UPDATE notifications.drain_metrics SET updated_at = now() - interval '2 hours'")
    metrics.fold_retired()
    assert set(DrainMetric.objects.values_list("worker", flat=True)) == {metrics.RETIRED}
    assert sample(scrape(client), "v10r_outbox_sends_total", channel="email", outcome="sent") == 24


@pytest.mark.django_db
def test_the_oldest_due_row_is_found_in_every_lane_even_one_no_longer_configured(
    client, metrics_on, user
):
    ages = {"high": 5, "low": 60, "gone": 3600, "normal": 0}
    for lane, minutes in ages.items():
        ids = make_deliveries(user, 2, channel="recording")
        execute(
            "UPDATE notifications.notification_deliveries SET lane = %s,"
            " next_attempt_at = now() - make_interval(mins => %s) WHERE id = ANY(%s)",
            [lane, minutes, ids],
        )
    # A row not yet due, older by its creation, counts for nothing.
    later = make_deliveries(user, 1, channel="recording")
    execute(
        "UPDATE notifications.notification_deliveries SET lane = 'a',"
        " next_attempt_at = now() + interval '1 day' WHERE id = ANY(%s)",
        [later],
    )
    oldest = sample(scrape(client), "v10r_outbox_oldest_due_seconds")
    assert 3600 * 60 <= oldest < 3600 * 60 + 60
    execute("UPDATE notifications.notification_deliveries SET status = 'sent' WHERE lane = 'gone'")
    oldest = sample(scrape(client), "v10r_outbox_oldest_due_seconds")
    assert 60 * 60 <= oldest < 60 * 60 + 60


@pytest.mark.django_db
def test_a_loop_inside_a_long_batch_still_counts_as_running(client, metrics_on):
    from notifications import heartbeat
    from notifications.models import DrainHeartbeat

    heartbeat.beat(worker="host-a:12", interval=timedelta(seconds=2), report={})
    allowed = heartbeat.stale_after(timedelta(seconds=2)).total_seconds()
    for age, running in [(allowed - 2, 1), (allowed + 2, 0)]:
        execute(
            "UPDATE notifications.drain_heartbeats"
            " SET ticked_at = now() - make_interval(secs => %s)",
            [age],
        )
        assert DrainHeartbeat.objects.count() == 1
        assert sample(scrape(client), "v10r_drain_loops_running") == running


@pytest.mark.django_db
def test_skipped_rows_are_counted_per_channel_and_reason(client, metrics_on, user):
    from notifications.enqueue import send_notification
    from recipients import preferences

    preferences.choose(user, choices={("account", "email"): False})
    for _ in range(2):
        send_notification(user=user, type="welcome", params={"name": "A"}, channels=["email"])
    send_notification(user=user, type="welcome", params={"name": "A"}, channels=["telegram"])
    families = scrape(client)
    skipped = "v10r_outbox_skipped_deliveries"
    assert sample(families, skipped, channel="email", reason="opted_out") == 2
    assert sample(families, skipped, channel="telegram", reason="no_address") == 1
    assert sample(families, "v10r_outbox_deliveries", state="skipped", channel="email") == 2
    assert sample(families, "v10r_outbox_deliveries", state="skipped", channel="telegram") == 1


@pytest.mark.django_db
def test_broadcasts_their_chunks_and_the_recent_ones_deliveries_are_counted(
    client, metrics_on, django_user_model, settings
):
    settings.BROADCAST_CHUNK_SIZE = 2
    users = [
        django_user_model.objects.create_user(f"m{n}", email=f"m{n}@x.example") for n in range(3)
    ]
    welcome = {"type": "welcome", "params": {"name": "Ada"}}
    # Expanded: one recipient, email queued and the inbox's row sent.
    done = broadcasts.send_broadcast(audience=users[:1], **welcome)
    broadcasts.expand_next(lanes=LANE_NAMES)
    NotificationDelivery.objects.filter(notification__broadcast=done, channel="inapp").update(
        status=Status.SENT
    )
    # Expanded two days ago: its rows are not counted any more.
    old = broadcasts.send_broadcast(audience=users[:1], **welcome)
    broadcasts.expand_next(lanes=LANE_NAMES)
    execute(
        "UPDATE notifications.broadcasts SET created_at = now() - interval '2 days' WHERE id = %s",
        [old.pk],
    )
    # Expanding: the first of its two chunks expanded (two recipients, two channels each).
    halfway = broadcasts.send_broadcast(audience=users, **welcome)
    assert broadcasts.expand_next(lanes=LANE_NAMES).broadcast_id == halfway.pk
    # Cancelled before any chunk was expanded; and one whose only chunk failed.
    broadcasts.cancel_broadcast(broadcasts.send_broadcast(audience=users, **welcome))
    failed = broadcasts.send_broadcast(audience=users[:1], **welcome)
    BroadcastChunk.objects.filter(broadcast=failed).update(status=ChunkStatus.FAILED)

    found = scrape(client)
    states = {"expanding": 1, "expanded": 2, "failed": 1, "cancelled": 1}
    for state, count in states.items():
        assert sample(found, "v10r_broadcasts", state=state) == count, state
    chunks = {"pending": 1, "expanding": 0, "done": 3, "cancelled": 2, "failed": 1}
    for status, count in chunks.items():
        assert sample(found, "v10r_broadcast_chunks", status=status) == count, status
    deliveries = {"pending": 1 + 4, "sent": 1, "failed": 0, "dead": 0, "cancelled": 0}
    for status, count in deliveries.items():
        assert sample(found, "v10r_broadcast_deliveries", status=status) == count, status
