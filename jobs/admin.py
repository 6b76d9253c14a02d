"""The jobs in the admin: the runs' log (read-only, filtered), the jobs page (each job, its
cadence in words, its last and next run) and Run now, which needs its own permission."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs import cadence, registry, runner
from jobs.models import JobRun, Status, Trigger

RUN_NOW_MESSAGES = {
    Status.SUCCEEDED: (messages.SUCCESS, _("The job %(slug)s succeeded in %(seconds)s s.")),
    Status.SKIPPED: (
        messages.WARNING,
        _("The job %(slug)s is already running; this run was recorded as skipped."),
    ),
    Status.FAILED: (messages.ERROR, _("The job %(slug)s failed: %(error)s")),
    Status.TIMED_OUT: (messages.ERROR, _("The job %(slug)s ran out of time: %(error)s")),
    Status.ABANDONED: (messages.ERROR, _("The job %(slug)s was abandoned: %(error)s")),
}


class SlugFilter(admin.SimpleListFilter):
    title = _("job")
    parameter_name = "slug"

    def lookups(self, request, model_admin):
        # The registry's jobs, and every other slug the log holds: the showcase's demo job,
        # which is not registered (it has no cadence), and a job removed since it ran.
        logged = JobRun.objects.order_by().values_list("slug", flat=True).distinct()
        slugs = {job.slug for job in registry.jobs()} | set(logged)
        return [(slug, slug) for slug in sorted(slugs)]

    def queryset(self, request, queryset):
        return queryset.filter(slug=self.value()) if self.value() else queryset


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):
    list_display = ("slug", "trigger", "status", "started_at", "duration", "host", "pid")
    list_filter = (SlugFilter, "status", "trigger")
    date_hierarchy = "started_at"
    readonly_fields = [field.name for field in JobRun._meta.get_fields()]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_run_permission(self, request) -> bool:
        # Run now is a button on the jobs page and its outcome is a run in the log: one who
        # may not see them may not press it (nor run a job and land on a 403).
        return self.has_view_permission(request) and request.user.has_perm("jobs.run_job")

    def get_urls(self):
        return [
            path(
                "schedule/",
                self.admin_site.admin_view(self.schedule_view),
                name="jobs_jobrun_schedule",
            ),
            path(
                "run/<slug:slug>/",
                self.admin_site.admin_view(self.run_view),
                name="jobs_jobrun_run",
            ),
            *super().get_urls(),
        ]

    def schedule_view(self, request):
        """Every job: its cadence in words, its last run and status, its next slot."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        with connection.cursor() as cursor:
            cursor.execute("SELECT now()")
            (now,) = cursor.fetchone()
        latest = {
            run.slug: run
            for run in JobRun.objects.order_by("slug", "-started_at", "-id").distinct("slug")
        }
        rows = [
            {
                "job": job,
                "words": cadence.words(job.cadence),
                "last": latest.get(job.slug),
                "next": cadence.following(job.cadence, now=now),
            }
            for job in registry.jobs()
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Jobs"),
            "opts": self.opts,
            "rows": rows,
            "can_run": self.has_run_permission(request),
        }
        return TemplateResponse(request, "admin/jobs/jobrun/schedule.html", context)

    def run_view(self, request, slug: str):
        """Run now: the job, here, within the cron's time budget, recorded as the admin's."""
        if request.method != "POST":
            raise Http404
        if not self.has_run_permission(request):
            raise PermissionDenied
        try:
            job = registry.get(slug)
        except registry.UnknownJob:
            raise Http404 from None
        # Within the proxy's timeout, as a cron request: a long job paces itself to it.
        budget = timedelta(seconds=settings.JOBS_CRON_SECONDS)
        outcome = runner.run(job, trigger=Trigger.ADMIN, time_limit=min(job.time_limit, budget))
        level, text = RUN_NOW_MESSAGES.get(outcome.status, RUN_NOW_MESSAGES[Status.FAILED])
        self.message_user(
            request,
            text % {"slug": slug, "seconds": f"{outcome.seconds:.2f}", "error": outcome.error},
            level,
        )
        return HttpResponseRedirect(reverse("admin:jobs_jobrun_schedule"))
