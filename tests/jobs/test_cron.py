"""/cron/jobs/due and /cron/jobs/<slug>: the cron secret, the same limits as /cron/drain."""

from __future__ import annotations

import pytest

from core import cron
from jobs.models import JobRun, Status, Trigger
from tests.helpers import make_run
from tests.jobs import sample

SECRET = "s3cret-cron-token-of-at-least-thirty-two-characters"
COUNT = sample.make("test-count", sample.count)


@pytest.fixture
def auth(settings):
    settings.CRON_SECRET = SECRET
    return {"HTTP_AUTHORIZATION": f"Bearer {SECRET}"}


@pytest.mark.parametrize("url", ["/cron/jobs/due", "/cron/jobs/test-count"])
def test_the_job_triggers_do_not_exist_without_a_secret(client, db, settings, url):
    settings.CRON_SECRET = ""
    assert client.post(url, HTTP_AUTHORIZATION="Bearer anything").status_code == 404


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {SECRET}", "Bearer"])
def test_a_wrong_or_missing_secret_is_refused_and_runs_nothing(client, db, auth, only, header):
    only(COUNT)
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.post("/cron/jobs/test-count", **extra)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="cron"'
    assert not JobRun.objects.exists()


def test_wrong_secrets_lock_a_client_out_across_the_drain_and_the_jobs(client, db, auth):
    for _ in range(cron.GUESS_LIMIT - 1):
        assert client.post("/cron/drain", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/cron/jobs/due", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    locked = client.get("/cron/jobs/due", HTTP_AUTHORIZATION="Bearer wrong")
    assert locked.status_code == 429
    assert "Too many wrong secrets" in locked.json()["error"]
    # The right secret is never refused for the wrong ones.
    assert client.get("/cron/jobs/due", **auth).status_code == 200


@pytest.mark.parametrize("method", ["get", "post"])
def test_get_and_post_both_run_a_job_and_record_the_cron_trigger(client, db, auth, only, method):
    only(COUNT)
    response = getattr(client, method)("/cron/jobs/test-count", **auth)
    assert response.status_code == 200
    body = response.json()
    assert (body["slug"], body["status"], body["result"]) == (
        "test-count",
        "succeeded",
        {"counted": 3},
    )
    run = JobRun.objects.get(pk=body["run"])
    assert (run.trigger, run.status) == (Trigger.CRON, Status.SUCCEEDED)


def test_the_sweep_runs_what_is_due_and_then_nothing(client, db, auth, only):
    only(COUNT)
    first = client.post("/cron/jobs/due", **auth)
    assert first.status_code == 200
    assert [run["slug"] for run in first.json()["runs"]] == ["test-count"]
    assert client.post("/cron/jobs/due", **auth).json() == {"runs": []}


def test_an_unknown_slug_is_a_404_that_names_the_known_ones(client, db, auth, only):
    only(COUNT)
    response = client.post("/cron/jobs/nope", **auth)
    assert response.status_code == 404
    assert response.json()["error"] == "No job is registered as 'nope' (known: test-count)."


def test_a_failed_run_answers_502_and_a_skipped_one_409(client, db, auth, only):
    failing = sample.make("test-fail", sample.fail)
    only(COUNT, failing)
    failed = client.post("/cron/jobs/test-fail", **auth)
    assert failed.status_code == 502
    assert failed.json()["error"].startswith("ValueError: ")
    make_run(
        trigger=Trigger.COMMAND,
        status=Status.RUNNING,
        started_at="2099-01-01T00:00:00Z",
        deadline_at="2099-01-01T01:00:00Z",
        lease_expires_at="2099-01-01T01:00:00Z",
        host="elsewhere",
    )
    skipped = client.post("/cron/jobs/test-count", **auth)
    assert skipped.status_code == 409
    assert skipped.json()["result"]["reason"] == "already running"


def test_a_sweep_in_which_one_job_failed_answers_502_listing_every_run(client, db, auth, only):
    # docs/jobs.md: 502 when a run failed; a cron service counts the sweep as failed.
    only(COUNT, sample.make("test-fail", sample.fail))
    response = client.post("/cron/jobs/due", **auth)
    assert response.status_code == 502
    assert sorted((run["slug"], run["status"]) for run in response.json()["runs"]) == [
        ("test-count", "succeeded"),
        ("test-fail", "failed"),
    ]


@pytest.mark.parametrize("method", ["put", "delete", "patch"])
def test_other_methods_are_refused(client, db, auth, method):
    assert getattr(client, method)("/cron/jobs/due", **auth).status_code == 405


def test_the_right_secret_is_limited_to_a_dozen_calls_a_minute(client, db, auth, only):
    only(COUNT)
    answers = [client.post("/cron/jobs/due", **auth).status_code for _ in range(cron.CRON_LIMIT)]
    assert answers == [200] * cron.CRON_LIMIT
    refused = client.post("/cron/jobs/test-count", **auth)
    assert refused.status_code == 429
    assert refused.json()["error"].startswith(f"At most {cron.CRON_LIMIT} job runs a minute")


def test_a_cron_run_gets_no_more_than_the_requests_budget(client, db, auth, only, settings):
    settings.JOBS_CRON_SECONDS = 0.5
    only(sample.make("test-overrun", sample.overrun, seconds=60))
    response = client.post("/cron/jobs/test-overrun", **auth)
    assert response.status_code == 502
    body = response.json()
    assert body["status"] == "timed_out"
    assert body["seconds"] < 2  # the job alone would take 3 s, and its own limit is 60
