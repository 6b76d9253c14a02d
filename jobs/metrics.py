"""The jobs' numbers for /metrics, read from the runs' log at scrape time (every host
answers the same). Gauges, not counters: the log is pruned after JOBS_KEEP_RUNS_DAYS, so its
counts go down, which a counter must never do."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobs import registry
from jobs.models import Status

RUNS_SQL = "SELECT slug, status, count(*) FROM jobs.runs GROUP BY 1, 2"

# Each slug's latest finished run that did run (a skipped one took no time).
LAST_DURATION_SQL = """
SELECT DISTINCT ON (slug) slug, extract(epoch FROM duration)
FROM jobs.runs
WHERE finished_at IS NOT NULL AND status <> 'skipped'
ORDER BY slug, started_at DESC
""".strip()

LAST_SUCCESS_SQL = """
SELECT slug, extract(epoch FROM max(finished_at))
FROM jobs.runs WHERE status = 'succeeded'
GROUP BY slug
""".strip()


class JobsCollector(Collector):
    def collect(self) -> Iterable:
        with connection.cursor() as cursor:
            cursor.execute(RUNS_SQL)
            runs = cursor.fetchall()
            cursor.execute(LAST_DURATION_SQL)
            durations = dict(cursor.fetchall())
            cursor.execute(LAST_SUCCESS_SQL)
            successes = dict(cursor.fetchall())
        slugs = sorted({job.slug for job in registry.jobs()} | {slug for slug, _, _ in runs})
        counts = {(slug, status): count for slug, status, count in runs}
        family = GaugeMetricFamily(
            "v10r_job_runs",
            "Runs in the jobs' log, per job and status (the log keeps JOBS_KEEP_RUNS_DAYS).",
            labels=["slug", "status"],
        )
        for slug in slugs:
            for status in Status.values:
                family.add_metric([slug, status], counts.get((slug, status), 0))
        yield family
        duration = GaugeMetricFamily(
            "v10r_job_last_duration_seconds",
            "How long each job's latest finished run took.",
            labels=["slug"],
        )
        for slug, seconds in sorted(durations.items()):
            duration.add_metric([slug], float(seconds))
        yield duration
        success = GaugeMetricFamily(
            "v10r_job_last_success_timestamp_seconds",
            "When each job last succeeded (Unix time; 0 if it never has, in the log).",
            labels=["slug"],
        )
        for slug in slugs:
            success.add_metric([slug], float(successes.get(slug) or 0))
        yield success
