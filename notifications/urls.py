from django.urls import path

from notifications import views

app_name = "notifications"

urlpatterns = [
    path("cron/drain", views.cron_drain, name="cron-drain"),
    path("metrics", views.prometheus_metrics, name="metrics"),
]
