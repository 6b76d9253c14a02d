"""The jobs' execution log, in PostgreSQL schema `jobs` (see notifications/models.py for
the schema-qualified db_table).

One row a run, written by jobs/runner.py. The row is also what keeps runs of one slug apart:
a partial unique index lets one row per slug be `running`, and its lease says whether the
process behind it is alive. A row and a constraint, not an advisory lock, because a lock
lives in a session and PgBouncer's transaction mode hands sessions around.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy


class Trigger(models.TextChoices):
    """What started a run."""

    CRON = "cron", pgettext_lazy("job trigger", "cron")
    COMMAND = "command", pgettext_lazy("job trigger", "command")
    SCHEDULER = "scheduler", pgettext_lazy("job trigger", "scheduler")
    ADMIN = "admin", pgettext_lazy("job trigger", "admin")
    VISITOR = "visitor", pgettext_lazy("job trigger", "visitor")


class Status(models.TextChoices):
    RUNNING = "running", pgettext_lazy("job run", "running")
    SUCCEEDED = "succeeded", pgettext_lazy("job run", "succeeded")
    FAILED = "failed", pgettext_lazy("job run", "failed")
    SKIPPED = "skipped", pgettext_lazy("job run", "skipped")
    TIMED_OUT = "timed_out", pgettext_lazy("job run", "timed out")
    ABANDONED = "abandoned", pgettext_lazy("job run", "abandoned")


# A slot is taken by any run for it but one that was skipped or whose process died.
SLOT_RELEASED = (Status.SKIPPED, Status.ABANDONED)


class JobRun(models.Model):
    slug = models.CharField(_("job"), max_length=100)
    trigger = models.CharField(_("trigger"), max_length=20, choices=Trigger.choices)
    status = models.CharField(_("status"), max_length=20, choices=Status.choices)
    # The cron slot a scheduled run was for; null for a run someone asked for.
    slot_at = models.DateTimeField(_("slot"), null=True, blank=True)
    started_at = models.DateTimeField(_("started"))
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)
    # Written with finished_at, by the same statement. Not a GeneratedField: its system check
    # asks the database for its version, and `manage.py check` runs where there is none.
    duration = models.DurationField(_("duration"), null=True, blank=True)
    # When the run must have ended: started_at plus the job's time limit.
    deadline_at = models.DateTimeField(_("deadline"))
    # Renewed while the run's process lives; a running row whose lease lapsed is dead.
    lease_expires_at = models.DateTimeField(_("lease expires"), null=True, blank=True)
    result = models.JSONField(_("result"), default=dict, blank=True)
    error = models.TextField(_("error"), blank=True, default="")
    host = models.CharField(_("host"), max_length=200)
    pid = models.IntegerField(_("pid"))

    class Meta:
        db_table = 'jobs"."runs'
        verbose_name = _("job run")
        verbose_name_plural = _("job runs")
        ordering = ["-started_at", "-id"]
        permissions = [("run_job", _("Can run a job now"))]
        indexes = [
            models.Index(F("slug"), F("started_at").desc(), name="runs_slug_recent"),
            models.Index(fields=["started_at"], name="runs_started"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["slug"], condition=Q(status=Status.RUNNING), name="runs_one_running"
            ),
            models.UniqueConstraint(
                fields=["slug", "slot_at"],
                condition=Q(slot_at__isnull=False) & ~Q(status__in=SLOT_RELEASED),
                name="runs_one_per_slot",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.slug} #{self.pk} ({self.status})"
