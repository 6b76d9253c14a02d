from django.urls import path

from showcases import views

app_name = "showcases"

urlpatterns = [
    path("workers/", views.workers, name="workers"),
]
