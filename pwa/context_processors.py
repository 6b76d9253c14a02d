from __future__ import annotations

from django.conf import settings
from django.urls import reverse


def service_worker(request):
    """What base.html needs to register the worker and link the manifest."""
    return {
        "service_worker_url": reverse("service-worker") if settings.SERVICE_WORKER_ENABLED else "",
        "manifest_url": reverse("web-manifest"),
    }
