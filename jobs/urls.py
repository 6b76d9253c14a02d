from django.urls import path

from jobs import views

app_name = "jobs"

urlpatterns = [
    path("cron/jobs/due", views.cron_due, name="cron-due"),
    path("cron/jobs/<slug:slug>", views.cron_job, name="cron-job"),
]
