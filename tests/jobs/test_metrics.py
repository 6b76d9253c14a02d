"""/metrics carries the jobs' numbers: runs by job and status, the last duration, the last
success."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobs import runner
from jobs.models import Trigger
from tests.jobs import sample

TOKEN = "t" * 40


@pytest.fixture
def scrape(client, settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []

    def read() -> dict[tuple[str, tuple], float]:
        response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 200
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.content.decode())
            for s in family.samples
        }

    return read


def test_metrics_count_runs_by_job_and_status_and_say_the_last_success(db, only, scrape):
    count, fail = sample.make("test-count", sample.count), sample.make("test-fail", sample.fail)
    only(count, fail)
    before = scrape()
    # Every registered job is there before it ever ran: an alert on "never succeeded" works.
    assert before[("v10r_job_last_success_timestamp_seconds", (("slug", "test-count"),))] == 0
    assert before[("v10r_job_runs", (("slug", "test-count"), ("status", "succeeded")))] == 0
    runner.run(count, trigger=Trigger.COMMAND)
    runner.run(count, trigger=Trigger.COMMAND)
    runner.run(fail, trigger=Trigger.COMMAND)
    found = scrape()
    assert found[("v10r_job_runs", (("slug", "test-count"), ("status", "succeeded")))] == 2
    assert found[("v10r_job_runs", (("slug", "test-fail"), ("status", "failed")))] == 1
    assert found[("v10r_job_last_success_timestamp_seconds", (("slug", "test-count"),))] > 0
    assert found[("v10r_job_last_success_timestamp_seconds", (("slug", "test-fail"),))] == 0
    assert found[("v10r_job_last_duration_seconds", (("slug", "test-fail"),))] >= 0
