"""/showcases/jobs/: the registry with its cadences in the visitor's words, the log, and the
demo job a visitor runs in the request, behind the same rate-limit door as Try it."""

from __future__ import annotations

import html
import re

import pytest

from jobs import registry
from jobs.models import JobRun, Status, Trigger
from showcases import demo_job, jobs_page
from tests.helpers import make_run, post_from

pytestmark = pytest.mark.django_db

PAGE = "/showcases/jobs/"
PREFIX = {"en": "", "ru": "/ru", "de": "/de"}
CADENCE_WORDS = {
    "en": ("Every 5 minutes", "At 17 minutes past the hour"),
    "ru": ("Каждые 5 минут", "Каждый час в 17 минут"),
    "de": ("Alle 5 Minuten", "Stündlich, 17 Minuten nach der vollen Stunde"),
}
RUN_BUTTON = {"en": "Run the demo job", "ru": "Запустить демо-задачу", "de": "Demo-Job ausführen"}


@pytest.mark.parametrize("language", ["en", "ru", "de"])
def test_the_page_lists_every_registered_job_with_its_cadence_in_the_visitors_words(
    client, language
):
    response = client.get(PREFIX[language] + PAGE)
    assert response.status_code == 200
    body = html.unescape(response.content.decode())
    for job in registry.jobs():
        assert f'data-job="{job.slug}"' in body
        assert f"<code>{job.cadence}</code>" in body
    for words in CADENCE_WORDS[language]:
        assert f"<span data-cadence-words>{words}</span>" in body
    assert RUN_BUTTON[language] in body


def test_the_page_and_the_workers_page_link_to_each_other(client):
    assert 'href="/showcases/workers/#queue-worker"' in client.get(PAGE).content.decode()
    assert 'href="/showcases/jobs/"' in client.get("/showcases/workers/").content.decode()
    assert 'href="/ru/showcases/jobs/"' in client.get("/ru/showcases/workers/").content.decode()


def test_the_demo_job_is_no_scheduled_job():
    # The sweep runs the registry: the demo must never run on a cadence.
    assert demo_job.SLUG not in {job.slug for job in registry.jobs()}


def test_running_the_demo_job_runs_it_once_as_the_visitors_and_shows_the_run_at_once(client):
    response = client.post(PAGE + "demo/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    [run] = JobRun.objects.filter(slug=demo_job.SLUG)
    assert (run.trigger, run.status) == (Trigger.VISITOR, Status.SUCCEEDED)
    assert set(run.result) == {
        "pending",
        "processing",
        "retrying",
        "sent",
        "failed",
        "dead",
        "cancelled",
        "skipped",
    }
    body = response.content.decode()
    assert f'data-run-id="{run.pk}"' in body
    assert 'data-run-trigger="visitor"' in body
    assert "feed-item is-new" in body
    # The answer is the log fragment, not the page.
    assert "<html" not in body
    assert client.get(PAGE + "log/").content.decode().count(f'data-run-id="{run.pk}"') == 1


def test_without_javascript_the_demo_job_runs_and_the_page_comes_back(client):
    response = client.post(PAGE + "demo/")
    assert response.status_code == 302
    assert response["Location"] == PAGE + "#log"
    assert JobRun.objects.filter(slug=demo_job.SLUG, trigger=Trigger.VISITOR).count() == 1


def test_the_demo_job_runs_under_its_hard_budget():
    assert demo_job.DEMO.time_limit == demo_job.BUDGET
    assert demo_job.BUDGET.total_seconds() <= 5


def test_past_the_limit_a_run_is_refused_with_429_and_retry_after_and_nothing_runs(
    client, monkeypatch
):
    monkeypatch.setattr(jobs_page, "DEMO_LIMIT", 3)
    codes = [client.post(PAGE + "demo/", HTTP_HX_REQUEST="true").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    refused = client.post(PAGE + "demo/", HTTP_HX_REQUEST="true")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused["X-Jobs-Fragment"] == "refused"
    assert "Too many runs; wait" in refused.content.decode()
    assert JobRun.objects.filter(slug=demo_job.SLUG).count() == 3


def test_the_limit_is_counted_per_ipv6_64_as_try_it_is(client, settings, monkeypatch):
    monkeypatch.setattr(jobs_page, "DEMO_LIMIT", 1)
    settings.V10R_TRUSTED_PROXIES = 1

    def run_from(visitor: str) -> int:
        return post_from(client, PAGE + "demo/", visitor=visitor)

    assert run_from("2001:db8:1:2::1") == 200
    assert run_from("2001:db8:1:2::ffff") == 429  # the same /64
    assert run_from("2001:db8:1:3::1") == 200


def test_a_refused_run_without_javascript_gets_the_whole_page_with_the_reason(client, monkeypatch):
    monkeypatch.setattr(jobs_page, "DEMO_LIMIT", 1)
    client.post(PAGE + "demo/")
    refused = client.post(PAGE + "demo/")
    assert refused.status_code == 429
    body = refused.content.decode()
    assert "<h1>Jobs</h1>" in body
    assert "Too many runs; wait" in body


@pytest.mark.parametrize("path", ["demo/"])
def test_a_get_on_the_run_endpoint_is_405_and_runs_nothing(client, path):
    assert client.get(PAGE + path).status_code == 405
    assert not JobRun.objects.filter(slug=demo_job.SLUG).exists()


def test_the_page_and_the_log_refuse_a_post(client):
    assert client.post(PAGE).status_code == 405
    assert client.post(PAGE + "log/").status_code == 405


def test_the_demo_endpoint_needs_the_csrf_token():
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    assert strict.post(PAGE + "demo/", HTTP_HX_REQUEST="true").status_code == 403
    assert not JobRun.objects.filter(slug=demo_job.SLUG).exists()


@pytest.mark.parametrize(
    "data",
    [{"fail": "1"}, {"slug": "prune-outbox"}, {"x": "\x00" * 50}, {"arguments": "{]"}],
)
def test_junk_in_the_post_changes_nothing_and_is_no_500(client, data):
    response = client.post(PAGE + "demo/", data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert list(JobRun.objects.values_list("slug", flat=True)) == [demo_job.SLUG]


def test_junk_query_strings_and_paths_are_no_500(client):
    assert client.get(PAGE + "?page=1&x=" + "a" * 5000).status_code == 200
    # A NUL no text column could hold: refused for every view (core.middleware).
    assert client.get(PAGE + "?page=%00").status_code == 400
    assert client.get(PAGE + "log/?junk=%ff").status_code == 200
    assert client.get(PAGE + "nothing-here/").status_code == 404


def test_the_log_shows_runs_of_every_trigger_with_their_trigger(client):
    client.post(PAGE + "demo/", HTTP_HX_REQUEST="true")
    make_run(slug="housekeeping", status=Status.SUCCEEDED, deadline_at="2026-01-01T00:02:00Z")
    body = client.get("/ru" + PAGE + "log/").content.decode()
    assert 'data-run-trigger="scheduler"' in body
    assert "посетитель" in body and "планировщик" in body


def test_on_a_persistent_host_the_page_names_the_scheduler(client, settings):
    settings.V10R_PLATFORM = "container"
    body = client.get(PAGE).content.decode()
    assert 'data-platform="persistent"' in body
    assert "run_jobs --every 60" in body
    assert "/cron/jobs/due" not in body


def test_on_serverless_the_page_says_only_the_platforms_cron_pushes(client, settings):
    settings.V10R_PLATFORM = "vercel"
    settings.CRON_SECRET = ""
    body = client.get(PAGE).content.decode()
    assert 'data-platform="serverless"' in body
    assert "run_jobs --every 60" not in body
    assert "CRON_SECRET is not set here" in body
    settings.CRON_SECRET = "x" * 40
    assert "CRON_SECRET is not set here" not in client.get(PAGE).content.decode()


@pytest.mark.parametrize(
    ("language", "seconds", "said"),
    [
        ("en", 0.0042, "4\u00a0ms"),
        ("ru", 0.0042, "4\u00a0мс"),
        ("de", 0.25, "250\u00a0ms"),
        ("en", 1.4, "1\u00a0s"),
        ("ru", 69, "1\u00a0мин 9\u00a0с"),
    ],
)
def test_a_runs_duration_is_in_milliseconds_under_a_second(language, seconds, said):
    from datetime import timedelta

    from django.utils import translation

    from showcases.templatetags.showcases import run_duration

    with translation.override(language):
        assert run_duration(timedelta(seconds=seconds)) == said
    assert run_duration(None) == ""


def test_the_demo_runs_budget_is_said_in_whole_seconds(client):
    body = html.unescape(client.get("/ru" + PAGE).content.decode())
    assert "с пределом времени 2 с" in body


@pytest.mark.parametrize(
    ("status", "fields", "said"),
    [
        (Status.TIMED_OUT, {"error": "Ran past its time limit of 2 s."}, "превысил предел времени"),
        (Status.SKIPPED, {"result": {"reason": "already running"}}, "уже выполнялась"),
        (Status.SKIPPED, {"result": {"reason": "already ran for this slot"}}, "в этом слоте"),
    ],
)
def test_why_a_run_timed_out_or_was_skipped_is_said_in_the_visitors_language(
    client, status, fields, said
):
    # The log stores these in English, for operators; the public page says them itself.
    make_run(slug="housekeeping", status=status, deadline_at="2026-01-01T00:02:00Z", **fields)
    body = html.unescape(client.get("/ru" + PAGE + "log/").content.decode())
    assert said in body
    assert "Ran past" not in body and "already r" not in body


def test_the_demo_runs_result_names_the_states_in_the_visitors_language(client):
    client.post("/ru" + PAGE + "demo/", HTTP_HX_REQUEST="true")
    body = html.unescape(client.get("/ru" + PAGE + "log/").content.decode())
    result = body.split("data-run-result>")[1].split("</code>")[0]
    # In the states' own order, as the workers page counts them.
    assert result.startswith("ожидает: 0, повтор: 0, в работе: 0, отправлено: 0, ")
    assert "pending" not in result and "sent" not in result


PLATFORM_LINES = {
    # id: (English, Russian, German), each the start of the line that names the host.
    "container": (
        "This site runs in a container,",
        "Сайт работает в контейнере,",
        "Diese Website läuft in einem Container,",
    ),
    "machine": (
        "This site runs on a machine of its own (a server or a computer, no serverless",
        "Сайт работает на собственной машине",
        "Diese Website läuft auf einem eigenen Rechner",
    ),
    "fly": (
        "This site runs on Fly.io, a host that keeps processes alive",
        "Сайт работает на Fly.io — хостинге",
        "Diese Website läuft auf Fly.io, einem Host",
    ),
}


@pytest.mark.parametrize("platform_id", sorted(PLATFORM_LINES))
def test_the_platform_line_says_what_the_host_is_in_the_visitors_language(
    client, settings, platform_id
):
    settings.V10R_PLATFORM = platform_id
    for prefix, line in zip(("", "/ru", "/de"), PLATFORM_LINES[platform_id], strict=True):
        body = " ".join(html.unescape(client.get(prefix + PAGE).content.decode()).split())
        assert f'data-platform-id="{platform_id}">{line}' in body
        # No host is called by a product name it does not have.
        assert not any(name in body for name in ("on Container", "на Container", "auf Container"))
        # The scheduler's command follows, in the same language.
        tail = {"": "wakes once a minute", "/ru": "просыпается раз в минуту"}
        assert tail.get(prefix, "wacht einmal pro Minute auf") in body


def test_a_host_without_a_platforms_or_a_containers_marks_is_a_machine_not_a_container(
    client, settings, monkeypatch
):
    from core import platform

    settings.V10R_PLATFORM = ""
    for variable in ("VERCEL", "FLY_APP_NAME", "RAILWAY_ENVIRONMENT"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(platform, "in_container", lambda **_: False)
    assert 'data-platform-id="machine"' in client.get(PAGE).content.decode()
    monkeypatch.setattr(platform, "in_container", lambda **_: True)
    assert 'data-platform-id="container"' in client.get(PAGE).content.decode()


def test_a_signed_in_reader_sees_the_runs_in_their_zone_and_is_told_which(
    client, django_user_model
):
    from recipients.models import Recipient

    reader = django_user_model.objects.create_user("ada")
    Recipient.objects.create(user=reader, time_zone="Asia/Tokyo")
    make_run(
        slug="housekeeping",
        status=Status.SUCCEEDED,
        started_at="2026-01-01T00:00:00Z",
        deadline_at="2026-01-01T00:02:00Z",
    )
    anonymous = client.get(PAGE).content.decode()
    assert 'data-time-zone="UTC"' in anonymous
    assert 'datetime="2026-01-01T00:00:00+00:00"' in anonymous
    client.force_login(reader)
    signed_in = client.get(PAGE).content.decode()
    assert 'data-time-zone="Asia/Tokyo"' in signed_in
    assert 'datetime="2026-01-01T09:00:00+09:00"' in signed_in


def test_visitors_together_are_capped_site_wide_with_429_and_retry_after(client, monkeypatch):
    monkeypatch.setattr(demo_job, "SITE_LIMIT", 2)
    # Each visitor from an address of its own, every one well within its own limit.
    codes = [
        client.post(PAGE + "demo/", HTTP_HX_REQUEST="true", REMOTE_ADDR=f"192.0.2.{n}")
        for n in range(1, 4)
    ]
    assert [response.status_code for response in codes] == [200, 200, 429]
    refused = codes[-1]
    assert 55 <= int(refused["Retry-After"]) <= 60  # until the first run is a minute old
    assert refused["X-Jobs-Fragment"] == "refused"
    assert (
        "Visitors have run the demo job 2 times in the last minute, as often as the site "
        "allows; try again in"
    ) in html.unescape(refused.content.decode())
    assert JobRun.objects.filter(slug=demo_job.SLUG).count() == 2


def test_runs_older_than_the_window_leave_room_for_new_ones(client, monkeypatch):
    monkeypatch.setattr(demo_job, "SITE_LIMIT", 2)
    for _ in range(2):
        make_run(slug=demo_job.SLUG, trigger=Trigger.VISITOR, status=Status.SUCCEEDED)
    assert demo_job.site_wait_seconds() == 0  # started in January: long out of the window
    assert client.post(PAGE + "demo/", HTTP_HX_REQUEST="true").status_code == 200


def test_the_log_keeps_the_sites_own_runs_in_view_under_a_flood_of_demo_runs(client):
    own = [
        make_run(
            slug=slug,
            status=Status.SUCCEEDED,
            started_at=f"2026-01-01T00:{minute:02d}:00Z",
            deadline_at="2026-01-01T01:00:00Z",
        )
        for minute, slug in enumerate(["housekeeping", "prune-outbox"] * 6)
    ]
    for second in range(50):  # all newer than every one of the site's
        make_run(
            slug=demo_job.SLUG,
            trigger=Trigger.VISITOR,
            status=Status.SUCCEEDED,
            started_at=f"2026-01-01T00:30:{second:02d}Z",
        )
    body = client.get(PAGE + "log/").content.decode()
    shown = [int(found) for found in re.findall(r'data-run-id="(\d+)"', body)]
    assert {run.pk for run in own} <= set(shown)
    assert body.count(f'data-run-slug="{demo_job.SLUG}"') == jobs_page.DEMO_SHOWN
    # Newest first, the visitors' latest on top.
    assert shown[0] == JobRun.objects.filter(slug=demo_job.SLUG).first().pk


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("ru", "Посетители исчерпали общий лимит запусков демо-задачи (1 в минуту)"),
        ("de", "Besucher haben den Demo-Job in der letzten Minute 1-mal ausgeführt"),
    ],
)
def test_the_site_wide_cap_is_said_in_the_visitors_language(client, monkeypatch, language, said):
    monkeypatch.setattr(demo_job, "SITE_LIMIT", 1)
    url = PREFIX[language] + PAGE + "demo/"
    assert client.post(url, HTTP_HX_REQUEST="true", REMOTE_ADDR="192.0.2.1").status_code == 200
    refused = client.post(url, HTTP_HX_REQUEST="true", REMOTE_ADDR="192.0.2.2")
    assert refused.status_code == 429
    assert said in html.unescape(refused.content.decode())
