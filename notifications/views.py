from __future__ import annotations

import hmac
from datetime import timedelta

from django.conf import settings
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from notifications import drain, heartbeat
from v10r import ratelimit

CRON_LIMIT = 12
CRON_WINDOW = timedelta(minutes=1)


@csrf_exempt  # a machine's call, authenticated by its bearer secret, not a browser form
@require_POST
def cron_drain(request):
    """Drain one batch for a serverless cron: POST with Authorization: Bearer <CRON_SECRET>."""
    secret = settings.CRON_SECRET
    if not secret:
        raise Http404("The cron trigger is off: CRON_SECRET is not set.")
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        token.strip().encode(), secret.encode()
    ):
        return JsonResponse(
            {"error": "Send the cron secret as 'Authorization: Bearer <CRON_SECRET>'."},
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="cron"'},
        )
    verdict = ratelimit.hit(key="cron:drain", limit=CRON_LIMIT, window=CRON_WINDOW)
    if not verdict.allowed:
        return JsonResponse(
            {
                "error": f"At most {CRON_LIMIT} drains a minute; try again in "
                f"{verdict.retry_after_seconds} s."
            },
            status=429,
            headers={"Retry-After": str(verdict.retry_after_seconds)},
        )
    report = drain.drain_once()
    if not report.skipped:
        heartbeat.beat(worker=heartbeat.CRON_WORKER, interval=timedelta(0), report=report.as_dict())
    return JsonResponse({"report": report.as_dict()}, status=409 if report.skipped else 200)
