from django.urls import path

from showcases import jobs_page, views

app_name = "showcases"

urlpatterns = [
    path("workers/", views.workers, name="workers"),
    path("workers/queue/", views.queue, name="queue"),
    path("workers/try/", views.try_it, name="try"),
    path("workers/analyse/", views.analyse, name="analyse"),
    path("workers/sample.jpg", views.sample_photo, name="sample"),
    path("jobs/", jobs_page.jobs, name="jobs"),
    path("jobs/log/", jobs_page.log, name="jobs-log"),
    path("jobs/demo/", jobs_page.run_demo, name="jobs-demo"),
]
