"""The runner in one process: the sweep's arithmetic of slots, failures written down
without secrets, time limits, the log's retention."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobs import cadence, runner
from jobs.models import JobRun, Status, Trigger
from tests.helpers import poll
from tests.jobs import sample

EVERY_FIVE = sample.make("test-every-five", sample.count, cron="*/5 * * * *")
NIGHTLY = sample.make("test-nightly", sample.count, cron="0 3 * * *")


def past_run(job, *, ago: timedelta, status=Status.SUCCEEDED, slot=None) -> JobRun:
    started = timezone.now() - ago
    return JobRun.objects.create(
        slug=job.slug,
        trigger=Trigger.SCHEDULER,
        status=status,
        slot_at=slot,
        started_at=started,
        finished_at=None if status == Status.RUNNING else started + timedelta(seconds=1),
        deadline_at=started + job.time_limit,
        lease_expires_at=started + timedelta(seconds=30) if status == Status.RUNNING else None,
        host="elsewhere",
        pid=1,
    )


def count(job, **filters) -> int:
    return JobRun.objects.filter(slug=job.slug, **filters).count()


def test_the_sweep_after_a_long_gap_runs_each_due_job_once(db, only):
    only(EVERY_FIVE, NIGHTLY)
    # The host was down three days: hundreds of five-minute slots and three nights missed.
    past_run(EVERY_FIVE, ago=timedelta(days=3))
    past_run(NIGHTLY, ago=timedelta(days=3))
    outcomes = runner.sweep(trigger=Trigger.SCHEDULER)
    assert sorted((o.slug, o.status) for o in outcomes) == [
        (EVERY_FIVE.slug, Status.SUCCEEDED),
        (NIGHTLY.slug, Status.SUCCEEDED),
    ]
    assert count(EVERY_FIVE) == count(NIGHTLY) == 2
    ran = JobRun.objects.exclude(host="elsewhere").get(slug=NIGHTLY.slug)
    assert ran.slot_at == cadence.previous(NIGHTLY.cron, now=ran.started_at)
    assert ran.result == {"counted": 3}
    # Nothing more is due until the next slot.
    assert runner.sweep(trigger=Trigger.SCHEDULER) == []
    assert count(EVERY_FIVE) == count(NIGHTLY) == 2


def test_a_job_that_never_ran_is_due_and_one_run_since_its_slot_is_not(db, only):
    only(EVERY_FIVE, NIGHTLY)
    # Asked for by hand a moment ago: that run did the slot's work, whatever triggered it.
    past_run(NIGHTLY, ago=timedelta(seconds=1))
    [outcome] = runner.sweep(trigger=Trigger.SCHEDULER)
    assert outcome.slug == EVERY_FIVE.slug


@pytest.mark.parametrize(
    ("status", "due"),
    [
        (Status.SUCCEEDED, False),
        (Status.FAILED, False),  # a failure waits for the next slot, not the next minute
        (Status.TIMED_OUT, False),
        (Status.RUNNING, False),  # still at it: not started again, not even recorded
        (Status.SKIPPED, True),
        (Status.ABANDONED, True),  # its process died: the slot's work is still to do
    ],
)
def test_what_a_run_since_the_slot_says_about_the_next_sweep(db, only, status, due):
    only(NIGHTLY)
    slot = cadence.previous(NIGHTLY.cron, now=timezone.now())
    past_run(NIGHTLY, ago=timezone.now() - slot - timedelta(seconds=1), status=status)
    assert runner.due(NIGHTLY, slot_at=slot) is due
    assert len(runner.sweep(trigger=Trigger.SCHEDULER)) == (1 if due else 0)


def test_a_second_sweep_that_read_the_job_as_due_too_late_does_not_run_its_slot_again(db, only):
    only(NIGHTLY)
    slot = cadence.previous(NIGHTLY.cron, now=timezone.now())
    first = runner.run(NIGHTLY, trigger=Trigger.SCHEDULER, slot_at=slot)
    # Another host's sweep found the job due before the first run began, and tries now.
    late = runner.run(NIGHTLY, trigger=Trigger.SCHEDULER, slot_at=slot)
    assert (first.status, late.status) == (Status.SUCCEEDED, Status.SKIPPED)
    assert late.result == {"reason": "already ran for this slot"}


def test_a_failure_is_written_with_its_type_and_message_and_no_secret(db, only, settings):
    settings.CRON_SECRET = "c" * 40
    job = sample.make("test-fail", sample.fail)
    only(job)
    outcome = runner.run(job, trigger=Trigger.COMMAND)
    run = JobRun.objects.get(pk=outcome.run_id)
    assert run.status == outcome.status == Status.FAILED
    assert run.error.startswith("ValueError: could not reach postgres://***@db.example/v10r")
    assert "hunter2" not in run.error and settings.CRON_SECRET not in run.error
    assert run.finished_at is not None


def test_a_run_over_its_time_limit_on_the_main_thread_is_stopped(transactional_db):
    job = sample.make("test-overrun", sample.overrun, seconds=0.3)
    outcome = runner.run(job, trigger=Trigger.COMMAND)
    assert outcome.status == Status.TIMED_OUT
    assert outcome.seconds < 2  # stopped, not waited out (the job takes 3 s)
    assert JobRun.objects.get(pk=outcome.run_id).error == "Stopped at its time limit of 0.3 s."


def test_a_run_over_its_time_limit_in_a_thread_is_written_timed_out(transactional_db):
    job = sample.make("test-overrun", sample.overrun, seconds=0.3)
    found = []

    def in_a_thread():
        try:
            found.append(runner.run(job, trigger=Trigger.ADMIN))
        finally:
            connection.close()

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join(timeout=30)
    [outcome] = found
    assert outcome.status == Status.TIMED_OUT
    assert JobRun.objects.get(pk=outcome.run_id).status == Status.TIMED_OUT


def test_a_lapsed_run_past_its_deadline_is_marked_timed_out_by_the_next_trigger(db, only):
    only(NIGHTLY)
    stuck = past_run(NIGHTLY, ago=timedelta(hours=1), status=Status.RUNNING)
    outcome = runner.run(NIGHTLY, trigger=Trigger.COMMAND)
    assert outcome.status == Status.SUCCEEDED
    stuck.refresh_from_db()
    assert stuck.status == Status.TIMED_OUT
    assert stuck.error == "Ran past its time limit; its lease lapsed."


def test_the_log_keeps_running_rows_and_recent_ones_and_prunes_the_rest(db):
    old = past_run(NIGHTLY, ago=timedelta(days=40))
    recent = past_run(NIGHTLY, ago=timedelta(days=1))
    assert runner.prune(older_than=timedelta(days=30)) == 1
    assert list(JobRun.objects.values_list("pk", flat=True)) == [recent.pk]
    assert old.pk != recent.pk


def test_seconds_left_is_the_runs_own_inside_a_run_and_unbounded_outside(db):
    assert runner.seconds_left() == float("inf")
    outcome = runner.run(sample.make("test-measure", sample.measure), trigger=Trigger.COMMAND)
    assert 25 < outcome.result["seconds_left"] <= 30


def test_a_slot_exactly_now_has_come():
    now = datetime(2026, 1, 1, 3, 0, tzinfo=UTC)
    assert cadence.previous("0 3 * * *", now=now) == now
    assert cadence.previous("0 3 * * *", now=now - timedelta(seconds=1)) == now - timedelta(days=1)
    assert cadence.following("0 3 * * *", now=now) == now + timedelta(days=1)


def test_a_bad_cadence_setting_stops_only_its_own_job_from_being_swept(db, only, settings, caplog):
    only(EVERY_FIVE, NIGHTLY)
    settings.JOBS_CADENCES = {NIGHTLY.slug: "every night"}
    [outcome] = runner.sweep(trigger=Trigger.SCHEDULER)
    assert outcome.slug == EVERY_FIVE.slug
    assert f"job {NIGHTLY.slug} is not swept" in caplog.text


def test_the_prune_job_deletes_runs_past_their_keep(db, settings):
    from jobs import registry

    settings.JOBS_KEEP_RUNS_DAYS = 30
    old = past_run(NIGHTLY, ago=timedelta(days=31))
    kept = past_run(NIGHTLY, ago=timedelta(days=29))
    outcome = runner.run(registry.get("prune-outbox"), trigger=Trigger.COMMAND)
    assert outcome.status == Status.SUCCEEDED, outcome.error
    assert outcome.result["job_runs"] == 1
    remaining = set(JobRun.objects.values_list("pk", flat=True))
    assert old.pk not in remaining and {kept.pk, outcome.run_id} <= remaining


def test_the_prune_job_meeting_a_prune_no_run_holds_fails_saying_why(db, settings):
    from jobs import registry
    from tests.helpers import execute

    # Every prune is a run of prune-outbox, one at a time; a prune under way that no running
    # run holds is one whose process died (or that outlived its time limit in a thread): the
    # runner let this run start, and retention refuses to walk beside it.
    execute(
        "INSERT INTO notifications.outbox_retention (id, running_since, alive_at)"
        " VALUES (1, now(), now())"
        " ON CONFLICT (id) DO UPDATE SET running_since = now(), alive_at = now()"
    )
    outcome = runner.run(registry.get("prune-outbox"), trigger=Trigger.COMMAND)
    assert outcome.status == Status.FAILED
    assert "the outbox was not pruned: a prune started at " in outcome.error
    assert "taken for dead once it has written nothing for 5 minutes" in outcome.error


def test_a_prune_by_hand_while_the_prune_job_runs_is_skipped_by_the_jobs_lease(db):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from jobs import registry

    # `manage.py prune_outbox` is a run of the same job, so the runner's one-run-at-a-time
    # lease, not retention's own guard, keeps it from pruning beside a scheduled run.
    running = past_run(
        registry.get("prune-outbox"), ago=timedelta(seconds=1), status=Status.RUNNING
    )
    with pytest.raises(CommandError, match=f"Another prune is running \\(run #{running.pk}\\)"):
        call_command("prune_outbox")
    skipped = JobRun.objects.exclude(pk=running.pk).get()
    assert (skipped.status, skipped.trigger) == (Status.SKIPPED, Trigger.COMMAND)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM notifications.outbox_retention")
        assert cursor.fetchone() == (0,)


def run_in_a_thread(job, *, found: list) -> threading.Thread:
    """Run job as a web request's thread runs it (Run now, the visitors' demo): no timer
    signal can stop it there."""

    def in_a_thread():
        try:
            found.append(runner.run(job, trigger=Trigger.ADMIN))
        finally:
            connection.close()

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    return thread


def test_a_run_found_abandoned_is_not_rewritten_succeeded_when_its_process_finishes(
    transactional_db, tmp_path, monkeypatch
):
    release = tmp_path / "release"
    monkeypatch.setenv("JOB_RELEASE", str(release))
    found: list = []
    thread = run_in_a_thread(sample.HOLD, found=found)
    try:
        assert poll(lambda: JobRun.objects.filter(status=Status.RUNNING).exists())
        # Its renewals stopped reaching the database a while (a partition, a paused host):
        # the lease lapsed, and another process's trigger marked the run abandoned.
        with transaction.atomic():
            JobRun.objects.filter(status=Status.RUNNING).update(
                lease_expires_at=timezone.now() - timedelta(seconds=1)
            )
            assert runner.reap(sample.HOLD.slug) == [(sample.HOLD.slug, Status.ABANDONED)]
        marked = JobRun.objects.get()
    finally:
        release.touch()
        thread.join(timeout=30)
    [outcome] = found
    assert outcome.status == Status.ABANDONED
    stored = JobRun.objects.get()
    assert (stored.status, stored.error, stored.finished_at, stored.result) == (
        Status.ABANDONED,
        marked.error,
        marked.finished_at,
        {},
    )


def test_a_run_in_a_thread_past_its_time_limit_stops_renewing_its_lease(
    transactional_db, tmp_path, monkeypatch, settings
):
    # A lease of 0.6 s, renewed every 0.2 s while the run is within its limit of 0.3 s.
    settings.JOBS_LEASE_SECONDS = 0.6
    release = tmp_path / "release"
    monkeypatch.setenv("JOB_RELEASE", str(release))
    found: list = []
    thread = run_in_a_thread(sample.make("test-hold", sample.hold, seconds=0.3), found=found)

    def lapsed() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT EXISTS (SELECT FROM jobs.runs WHERE status = 'running'"
                " AND lease_expires_at < now())"
            )
            return cursor.fetchone()[0]

    try:
        # Still running past its limit, and the lease left to lapse for the next trigger.
        assert poll(lapsed, seconds=10)
    finally:
        release.touch()
        thread.join(timeout=30)
    [outcome] = found
    assert outcome.status == Status.TIMED_OUT
    assert JobRun.objects.get().status == Status.TIMED_OUT


def test_a_sweep_finding_a_long_run_still_under_way_records_nothing(db, only):
    # Due every minute, and still at its run of ten minutes ago, its lease renewed a moment
    # ago: the sweep neither starts it again nor writes a skipped row each minute.
    long = sample.make("test-long", sample.count, cron="* * * * *", seconds=3600)
    only(long)
    now = timezone.now()
    JobRun.objects.create(
        slug=long.slug,
        trigger=Trigger.SCHEDULER,
        status=Status.RUNNING,
        started_at=now - timedelta(minutes=10),
        deadline_at=now + timedelta(minutes=50),
        lease_expires_at=now + timedelta(seconds=30),
        host="elsewhere",
        pid=1,
    )
    assert runner.due(long, slot_at=cadence.previous(long.cron, now=now)) is False
    assert runner.sweep(trigger=Trigger.SCHEDULER) == []
    assert list(JobRun.objects.values_list("status", flat=True)) == [Status.RUNNING]
