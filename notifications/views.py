from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from core import clients, cron, ratelimit
from notifications import metrics
from notifications.worker import Worker


@cron.endpoint(key="cron:drain", what="drains")
def cron_drain(request):
    """Drain for a serverless cron: Authorization: Bearer <CRON_SECRET>, within a time budget."""
    # The process's worker, as drain_outbox --once uses it: a serverless deployment has no
    # loop of its own, so this tick also records the heartbeat. Tidying up is not a drain's:
    # the same cron calls /cron/jobs/due for that (docs/deploy.md).
    report = Worker.for_process().tick(budget=timedelta(seconds=settings.CRON_DRAIN_SECONDS))
    return JsonResponse({"report": report.as_dict()}, status=409 if report.skipped else 200)


METRICS_GUESS_LIMIT = 20


@require_safe
def prometheus_metrics(request):
    """The queue's numbers in Prometheus's text format, for METRICS_TOKEN or the networks."""
    if not metrics.enabled():
        raise Http404("Metrics are off: set METRICS_TOKEN or METRICS_ALLOWED_NETWORKS.")
    if not metrics.allowed(request, address=clients.peer(request)):
        guesses = ratelimit.hit(
            key=f"metrics-guess:{clients.address(request)}",
            limit=METRICS_GUESS_LIMIT,
            window=cron.GUESS_WINDOW,
        )
        if not guesses.allowed:
            return ratelimit.refuse(
                message="Too many refused requests from this address.",
                retry_after_seconds=guesses.retry_after_seconds,
            )
        return JsonResponse(
            {
                "error": "Send 'Authorization: Bearer <METRICS_TOKEN>', "
                "or ask from an allowed network."
            },
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    # The classic text format (0.0.4), which every Prometheus version scrapes: the names here
    # need none of 1.0.0's escaping, so the body is the same either way.
    body = generate_latest(metrics.registry())
    response = HttpResponse(body, content_type=CONTENT_TYPE_PLAIN_0_0_4)
    response["Cache-Control"] = "no-store"
    return response
