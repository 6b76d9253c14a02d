from __future__ import annotations

import itertools
import re
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import translation

from notifications import dashboard, heartbeat, outbox, stats
from tests.helpers import execute, make_deliveries, mark_failed, mark_sent, update_delivery


@pytest.mark.parametrize(
    ("sent", "system", "recipient", "dead", "tag"),
    [
        (0, 0, 0, 0, "idle"),  # no activity
        (100, 0, 40, 0, "healthy"),  # recipients' failures do not count against the channel
        (96, 4, 0, 0, "healthy"),  # 4 / 100 = 4 % < 5 %
        (95, 5, 0, 0, "degraded"),  # 5 / 100 = 5 %
        (76, 24, 0, 0, "degraded"),  # 24 %
        (75, 25, 0, 0, "unhealthy"),  # 25 %
        (999, 1, 0, 1, "unhealthy"),  # any dead row
    ],
)
def test_health_tags(sent, system, recipient, dead, tag):
    health = stats.ChannelHealth("email", sent, system, recipient, dead)
    assert health.tag == tag


def test_channel_health_counts_the_last_day_by_cause(db, user):
    ids = make_deliveries(user, 5)
    claims = {c.id: c for c in outbox.claim(batch_size=5)}
    mark_sent(claims[ids[0]], provider_message_id="m")
    mark_sent(claims[ids[1]], provider_message_id="m")
    mark_failed(claims[ids[2]], code="HTTP_503", message="x", retryable=True)
    mark_failed(claims[ids[3]], code="BAD_ADDRESS", message="x", retryable=False)
    # ids[4] was attempted two days ago: outside the window.
    mark_sent(claims[ids[4]], provider_message_id="m")
    update_delivery(ids[4], "attempted_at = now() - interval '2 days'")
    health = {h.channel: h for h in stats.channel_health()}
    recording = health["recording"]
    assert (recording.sent, recording.system_failures, recording.recipient_failures) == (2, 1, 1)
    assert recording.tag == "unhealthy"  # 1 of 4 = 25 %
    assert health["email"].tag == "idle"


def test_the_hourly_chart_has_24_bars_and_stacks_outcomes(db, user):
    ids = make_deliveries(user, 3)
    claims = {c.id: c for c in outbox.claim(batch_size=3)}
    for delivery_id in ids[:2]:
        mark_sent(claims[delivery_id], provider_message_id="m")
    mark_failed(claims[ids[2]], code="BAD", message="x", retryable=False)
    hours = stats.hourly()
    assert len(hours) == 24
    assert hours[-1].counts == {"sent": 2, "retrying": 0, "failed": 1, "dead": 0}
    bars = dashboard.chart(hours)
    # The busiest hour fills the height: 2 sent + 1 failed = 160 px, stacked bottom-up.
    assert bars[-1].segments == [("sent", "53.33", "106.67"), ("failed", "0", "53.33")]
    assert all(bar.segments == [] for bar in bars[:-1])


@pytest.mark.parametrize(
    ("language", "labels"),
    [("en", ["3", "1.5", "0"]), ("ru", ["3", "1,5", "0"]), ("de", ["3", "1,5", "0"])],
)
def test_the_chart_has_a_count_axis_in_the_readers_numbers(admin_client, user, language, labels):
    make_deliveries(user, 3)
    for claimed in outbox.claim(batch_size=3):
        mark_sent(claimed, provider_message_id="m")
    prefix = "" if language == "en" else f"/{language}"
    body = admin_client.get(prefix + "/admin/").content.decode()
    [axis] = re.findall(r'<ol class="value-axis"[^>]*>(.*?)</ol>', body)
    assert re.findall(r'<li class="tick tick-(\w+)">([^<]*)</li>', axis) == list(
        zip(["top", "middle", "bottom"], labels, strict=True)
    )
    # Each label has its grid line across the bars, at the plain SVG y it stands for.
    assert re.findall(r'<line class="gridline"[^>]* y1="([^"]+)"', body) == ["0", "80", "160"]


def test_the_admin_index_shows_the_dashboard(admin_client, user, settings):
    settings.V10R_PLATFORM = "container"
    make_deliveries(user, 3)
    [claimed] = outbox.claim(batch_size=1)
    mark_sent(claimed, provider_message_id="m")
    heartbeat.beat(worker="box:1", interval=timedelta(seconds=15), report={})
    body = admin_client.get("/admin/").content.decode()
    assert 'data-loop-state="running"' in body
    assert '<dd data-count="pending">2</dd>' in body
    assert '<dd data-count="due_now">2</dd>' in body
    # The chart's bars (placed with x), not the legend's keys: this hour's one sent segment.
    assert re.findall(r'<rect class="bar-(\w+)" x=', body) == ["sent"]
    assert 'data-channel="email"' in body


@pytest.mark.parametrize(
    ("prefix", "title", "health"),
    [
        ("/ru", "Очередь уведомлений", "Нет активности"),
        ("/de", "Benachrichtigungs-Warteschlange", "Keine Aktivität"),
    ],
)
def test_the_dashboard_speaks_the_admins_language(admin_client, prefix, title, health):
    body = admin_client.get(prefix + "/admin/").content.decode()
    assert title in body
    assert health in body


@pytest.mark.parametrize(
    ("prefix", "oldest"),
    [
        ("", "1\u00a0min 9\u00a0s"),
        ("/ru", "1\u00a0мин 9\u00a0с"),
        ("/de", "1\u00a0Min. 9\u00a0s"),
    ],
)
def test_the_oldest_pending_age_reads_as_a_duration(admin_client, user, prefix, oldest):
    [delivery_id] = make_deliveries(user, 1)
    update_delivery(delivery_id, "created_at = now() - interval '69 seconds'")
    body = admin_client.get(prefix + "/admin/").content.decode()
    assert f'<dd data-count="oldest">{oldest}</dd>' in body


@pytest.mark.parametrize(
    ("language", "title"),
    [
        ("en", "sent: 2, retrying: 0, failed: 1, dead: 0"),
        ("ru", "отправлено: 2, повтор: 0, не доставлено: 1, исчерпано: 0"),
        ("de", "gesendet: 2, Wiederholung: 0, fehlgeschlagen: 1, aufgegeben: 0"),
    ],
)
def test_a_bars_title_names_its_outcomes_in_the_admins_language(db, user, language, title):
    ids = make_deliveries(user, 3)
    claims = {c.id: c for c in outbox.claim(batch_size=3)}
    for delivery_id in ids[:2]:
        mark_sent(claims[delivery_id], provider_message_id="m")
    mark_failed(claims[ids[2]], code="BAD", message="x", retryable=False)
    with translation.override(language):
        bars = dashboard.chart(stats.hourly())
    assert bars[-1].title == f"{bars[-1].label}:00 — {title}"


def test_every_third_hour_is_labelled_below_the_chart(admin_client):
    body = admin_client.get("/admin/").content.decode()
    [axis] = re.findall(r'<ol class="hour-axis"[^>]*>(.*?)</ol>', body)
    labels = re.findall(r'<li class="hour-label">(\d\d)</li>', axis)
    hours = [int(label) for label in labels]
    assert len(hours) == 8
    assert all((later - earlier) % 24 == 3 for earlier, later in itertools.pairwise(hours))
    # Drawn in HTML, where the page's font size holds, not as SVG text that scales down.
    assert "<text" not in body.split('class="hourly"')[1].split("</figure>")[0]


@pytest.mark.django_db
def test_the_dashboard_shows_the_table_size_and_the_last_prune(admin_client, django_user_model):
    from notifications import retention
    from tests.helpers import execute, make_deliveries

    assert "Nothing has been pruned yet." in admin_client.get("/admin/").content.decode()
    ids = make_deliveries(django_user_model.objects.create_user("r"), 3, channel="email")
    execute(
        "UPDATE notifications.notification_deliveries SET status = 'sent',"
        " created_at = now() - interval '40 days' WHERE id = ANY(%s)",
        [ids],
    )
    retention.prune(retention.RetentionPolicy.from_settings(pause=0))
    page = admin_client.get("/admin/").content.decode()
    assert "The deliveries table takes" in page
    assert "deleted 3 deliveries" in page
    ru = admin_client.get("/ru/admin/").content.decode()
    assert "удалила 3 доставки" in ru


def plans_of(statements: list[str]) -> list[str]:
    """EXPLAIN each statement as sent, with sequential and bitmap scans forbidden: then only a
    plain Index Scan (which visits the table for every row) competes with an index-only one."""
    plans = []
    with transaction.atomic():
        execute("ANALYZE notifications.notification_deliveries")
        execute("SET LOCAL enable_seqscan = off")
        execute("SET LOCAL enable_bitmapscan = off")
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute("EXPLAIN " + sql)
                plans.append("\n".join(row[0] for row in cursor.fetchall()))
        transaction.set_rollback(True)
    return plans


def test_the_admins_counts_read_their_indexes_alone(admin_client, user):
    """At 10 M rows, visiting the table for each of a day's attempts made the dashboard 0.9 s
    (bench/claim_latency.py); each statement here is answered from its index."""
    ids = make_deliveries(user, 6)
    for claimed in outbox.claim(batch_size=3):
        mark_failed(claimed, code="BAD_ADDRESS", message="x", retryable=False)
    update_delivery(ids[5], "status = 'dead'")
    with CaptureQueriesContext(connection) as admin_index:
        assert admin_client.get("/admin/").status_code == 200
    with CaptureQueriesContext(connection) as failed_list:
        assert admin_client.get("/admin/notifications/faileddelivery/").status_code == 200
    captured = [q["sql"] for q in admin_index.captured_queries + failed_list.captured_queries]
    wanted = {
        "health": stats.CHANNEL_HEALTH_SQL,
        "hourly": stats.HOURLY_SQL,
        "skipped": stats.SKIPPED_SQL,
        "needs attention": next(s for s in captured if "COUNT(*)" in s and "'dead'" in s),
        "failure codes": next(s for s in captured if 'DISTINCT "notifications' in s),
    }
    for name, plan in zip(wanted, plans_of(list(wanted.values())), strict=True):
        assert "Index Only Scan" in plan, f"{name} visits the table:\n{plan}"


def test_the_oldest_pending_age_counts_the_rows_the_pending_count_counts(admin_client, user):
    [retrying, waiting] = make_deliveries(user, 2)
    update_delivery(retrying, "attempts = 1, created_at = now() - interval '79 seconds'")
    execute("DELETE FROM notifications.notification_deliveries WHERE id = %s", [waiting])
    body = admin_client.get("/admin/").content.decode()
    assert '<dd data-count="pending">0</dd>' in body
    assert '<dd data-count="retrying">1</dd>' in body
    assert '<dd data-count="oldest">—</dd>' in body
    [waiting] = make_deliveries(user, 1)
    update_delivery(waiting, "created_at = now() - interval '9 seconds'")
    body = admin_client.get("/admin/").content.decode()
    assert '<dd data-count="pending">1</dd>' in body
    assert '<dd data-count="oldest">9\u00a0s</dd>' in body


def test_the_oldest_pending_age_reads_the_pending_rows_index(db, user):
    make_deliveries(user, 3)
    [plan] = plans_of([stats.OLDEST_PENDING_SQL])
    assert "deliveries_waiting" in plan, plan


def test_the_dashboard_counts_skipped_rows_by_reason_with_a_link_to_each(admin_client, user):
    from notifications.enqueue import send_notification
    from recipients import preferences

    preferences.choose(user, choices={("account", "email"): False})
    for channels in (["email"], ["email"], ["telegram"]):
        send_notification(user=user, type="welcome", params={"name": "A"}, channels=channels)
    body = admin_client.get("/admin/").content.decode()
    assert '<dd data-count="skipped">3</dd>' in body
    found = re.findall(r'\?skip_reason=(\w+)" data-skipped-reason="\w+">([^<]+)</a> (\d+)', body)
    assert found == [
        ("opted_out", "opted out", "2"),
        ("no_address", "no address", "1"),
        ("channel_off", "address turned off", "0"),
    ]


def test_without_skipped_rows_the_dashboard_has_no_reasons_line(admin_client):
    body = admin_client.get("/admin/").content.decode()
    assert '<dd data-count="skipped">0</dd>' in body
    assert "data-skipped>" not in body
