"""`manage.py check` refuses a registry it could not run: duplicate slugs, bad cadences,
unusable slugs, and JOBS_CADENCES naming a job that is not there."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from jobs import checks, registry
from tests.jobs import sample


def messages() -> list[tuple[str, str]]:
    return [(found.id, found.msg) for found in checks.jobs_registry()]


def test_the_sites_own_jobs_pass_the_checks():
    assert {job.slug for job in registry.jobs()} >= {"prune-outbox", "housekeeping"}
    assert messages() == []


def test_a_duplicate_slug_fails_the_checks_naming_both_functions(only):
    only(sample.make("twice", sample.count), sample.make("twice", sample.fail))
    [(code, message)] = messages()
    assert code == "jobs.E001"
    assert "'twice' is registered 2 times" in message
    assert "tests.jobs.sample.count" in message and "tests.jobs.sample.fail" in message


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("* * * *", "not a cron expression of five fields"),
        ("61 * * * *", "is not a usable cron expression"),
        ("*/0 * * * *", "is not a usable cron expression"),
        ("0 0 31 2 *", "is not a usable cron expression"),  # never comes due
        ("@daily", "not a cron expression of five fields"),
    ],
)
def test_a_bad_cadence_fails_the_checks_with_the_reason(only, expression, said):
    only(sample.make("bad-cadence", sample.count, cron=expression))
    [(code, message)] = messages()
    assert code == "jobs.E003"
    assert message.startswith("The job 'bad-cadence': ") and said in message


@pytest.mark.parametrize("slug", ["due", "Has Spaces", "a/b"])
def test_a_slug_the_cron_path_cannot_carry_fails_the_checks(only, slug):
    only(sample.make(slug, sample.count))
    assert [code for code, _ in messages()] == ["jobs.E002"]


def test_a_time_limit_that_is_not_positive_fails_the_checks(only):
    job = sample.make("no-time", sample.count)
    only(registry.Job(**{**job.__dict__, "time_limit": timedelta(0)}))
    assert [code for code, _ in messages()] == ["jobs.E004"]


def test_a_cadence_setting_for_an_unknown_slug_or_with_a_bad_expression_fails(only, settings):
    only(sample.make("known", sample.count))
    settings.JOBS_CADENCES = {"unknown": "* * * * *", "known": "every minute"}
    assert messages() == [
        ("jobs.E005", "JOBS_CADENCES names 'unknown', which is no job."),
        (
            "jobs.E006",
            "JOBS_CADENCES gives the job 'known' 'every minute' is not a cron expression of "
            "five fields (minute hour day-of-month month day-of-week).",
        ),
    ]


def test_the_cadence_setting_replaces_the_jobs_own(only, settings):
    job = sample.make("known", sample.count, cron="0 3 * * *")
    settings.JOBS_CADENCES = {"known": "*/10 * * * *"}
    assert job.cadence == "*/10 * * * *"


def test_manage_py_check_fails_on_a_bad_registry(db, only):
    only(sample.make("twice", sample.count), sample.make("twice", sample.count))
    with pytest.raises(SystemCheckError, match="jobs.E001"):
        call_command("check")
