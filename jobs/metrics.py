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


def _read(*queries: str) -> list[list[tuple]]:
    """Each query's rows, in the order given, read through one cursor."""
    with connection.cursor() as cursor:
        answers = []
        for sql in queries:
            cursor.execute(sql)
            answers.append(cursor.fetchall())
    return answers


def _gauge(name: str, documentation: str, labels: list[str], samples) -> GaugeMetricFamily:
    """A gauge family holding samples, (label values, value) each."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for label_values, value in samples:
        family.add_metric(label_values, value)
    return family


class JobsCollector(Collector):
    def collect(self) -> Iterable:
        runs, durations, successes = _read(RUNS_SQL, LAST_DURATION_SQL, LAST_SUCCESS_SQL)
        durations, successes = dict(durations), dict(successes)
        slugs = sorted({job.slug for job in registry.jobs()} | {slug for slug, _, _ in runs})
        counts = {(slug, status): count for slug, status, count in runs}
        yield _gauge(
            "v10r_job_runs",
            "Runs in the jobs' log, per job and status (the log keeps JOBS_KEEP_RUNS_DAYS).",
            ["slug", "status"],
            (
                ([slug, status], counts.get((slug, status), 0))
                for slug in slugs
                for status in Status.values
            ),
        )
        yield _gauge(
            "v10r_job_last_duration_seconds",
            "How long each job's latest finished run took.",
            ["slug"],
            (([slug], float(seconds)) for slug, seconds in sorted(durations.items())),
        )
        yield _gauge(
            "v10r_job_last_success_timestamp_seconds",
            "When each job last succeeded (Unix time; 0 if it never has, in the log).",
            ["slug"],
            (([slug], float(successes.get(slug) or 0)) for slug in slugs),
        )
