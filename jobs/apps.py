from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    """Scheduled work: a registry of jobs, one runner for every trigger, and its log."""

    name = "jobs"
    verbose_name = _("Jobs")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # The site's own jobs register themselves on import; the checks read the registry.
        from jobs import checks, metrics, tasks  # noqa: F401
        from notifications import metrics as outbox_metrics

        outbox_metrics.add_collector("jobs", metrics.JobsCollector())
