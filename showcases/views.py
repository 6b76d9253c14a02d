from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe

from core import clients, ratelimit
from core.middleware import body_limit, rate_limit
from notifications import backoff, heartbeat, outbox, stats
from showcases import analysis, queue_demo, sample, script_words

ANALYSE_LIMIT = 20
TRY_LIMIT = 10
# The public page stops counting here: every visitor polls it, so its cost must not grow
# with the table (the admin counts exactly).
PUBLIC_COUNT_LIMIT = 1000
LIMIT_WINDOW = timedelta(minutes=1)
SESSION_KEY = "queue_demo_notifications"
TRIES_KEY = "queue_demo_tries"  # how many this session has queued, for the next label


def visitor_post(name: str, *, limit, refusal):
    """A showcase button's view: POST only, and limit() presses per client per LIMIT_WINDOW
    under name, counted before the body is read (core/middleware.py), refusal(request,
    verdict) answering the rest. The limits are read per request, so a test's change holds."""

    def decorate(view):
        counted = rate_limit(name=name, limit=limit, window=lambda: LIMIT_WINDOW, refusal=refusal)
        return counted(require_POST(view))

    return decorate


def _queue_context(request) -> dict:
    return {
        "depth": stats.queue_depth(limit=PUBLIC_COUNT_LIMIT),
        "loop": heartbeat.status(),
        "feed": queue_demo.feed(request.session.get(SESSION_KEY, [])),
    }


def _stacking_table(columns: tuple[str, ...], *rows: tuple[str, ...]) -> dict:
    """A table for a narrow screen to stack: each row's first cell heads it, and each other
    cell is labelled with its column (data-label, shown where the table stacks)."""
    return {
        "columns": columns,
        "rows": [(row[0], list(zip(columns[1:], row[1:], strict=True))) for row in rows],
    }


def _tables() -> dict:
    """The page's two comparisons, in the request's language."""
    return {
        "meanings": _stacking_table(
            (_("Term"), _("What it is"), _("Where it runs"), _("Here")),
            (
                _("Web Worker"),
                _("A second JavaScript thread in the browser"),
                _("Client"),
                _("The image analysis below, moved off the main thread"),
            ),
            (
                _("Queue worker"),
                _("A consumer that pulls units of work off a queue"),
                _("Server"),
                _("drain_outbox, delivering the notification outbox"),
            ),
            (
                _("Service worker"),
                _("A network proxy that lets a site work as an installable app"),
                _("Client"),
                _(
                    "On every page: it keeps the site’s scripts, styles and icons and an offline "
                    "page per language, and asks before a new version takes over. Pages always "
                    "come from the network."
                ),
            ),
        ),
        "jobs_and_workers": _stacking_table(
            ("", _("Job"), _("Worker")),
            (_("Is a…"), _("unit of work (a function)"), _("long-lived process")),
            (
                _("Started by"),
                _("a trigger: cron, a scheduler, an admin’s click"),
                _("itself: it is already running"),
            ),
            (_("Gets work by"), _("being told what to run"), _("pulling from a queue")),
            (_("Idle cost"), _("none: it does not exist"), _("real: the process stays resident")),
        ),
    }


def _page_context(request) -> dict:
    return {
        **_tables(),
        "demo_messages": script_words.palette_demo(),
        "queue_messages": script_words.live_queue(),
        # The server lane's limits, for the page to refuse a photo before uploading it.
        "server_limits": {"bytes": analysis.MAX_BYTES, "pixels": analysis.MAX_PIXELS},
        "claim_sql": outbox.CLAIM_SQL,
        "policy": {
            "batch_size": settings.DELIVERY_BATCH_SIZE,
            "concurrency": settings.DELIVERY_CONCURRENCY,
            "max_attempts": settings.DELIVERY_MAX_ATTEMPTS,
            "curve": backoff.curve(max_attempts=settings.DELIVERY_MAX_ATTEMPTS),
            "jitter_percent": round(backoff.JITTER * 100),
            "lease": timedelta(seconds=settings.DELIVERY_LEASE_SECONDS),
            "interval": timedelta(seconds=settings.DELIVERY_INTERVAL_SECONDS),
        },
        **_queue_context(request),
    }


@require_safe
def workers(request):
    return render(request, "showcases/workers.html", _page_context(request))


@require_safe
def queue(request):
    """The live queue: depth, loop status and the visitor's feed (polled by htmx)."""
    return render(request, "showcases/queue_live.html", _queue_context(request))


def _too_many_tries(seconds: str) -> str:
    return _("Too many tries; wait %(seconds)s s.") % {"seconds": seconds}


def _try_refused(
    request, *, message: str, status: int, retry_after_seconds: int, countdown: str = ""
):
    """countdown: the message with {seconds} for the wait left, for the page to count down."""
    if request.htmx:
        # The refusal travels out of band, to an element the polls leave alone.
        template, context = "showcases/queue_live.html", _queue_context(request)
        context["try_error_oob"] = True
    else:
        # Without JavaScript the form posted the whole page away: answer with the page.
        template, context = "showcases/workers.html", _page_context(request)
    context.update(try_error=message, try_retry_after=retry_after_seconds, try_countdown=countdown)
    response = ratelimit.refuse(
        response=render(request, template, context),
        status=status,
        retry_after_seconds=retry_after_seconds,
    )
    response["X-Queue-Fragment"] = "refused"  # swapped in by queue-live.js all the same
    return response


def _tries_refused(request, verdict: ratelimit.Verdict):
    return _try_refused(
        request,
        message=_too_many_tries(number_format(verdict.retry_after_seconds)),
        status=429,
        retry_after_seconds=verdict.retry_after_seconds,
        countdown=_too_many_tries("{seconds}"),
    )


@visitor_post("try", limit=lambda: TRY_LIMIT, refusal=_tries_refused)
def try_it(request):
    fail = request.POST.get("fail") in {"1", "on", "true"}
    mine = request.session.get(SESSION_KEY, [])
    # Counted apart from the feed, which keeps only the last FEED_SIZE: numbered by the list's
    # length, every try past it would repeat one number.
    number = request.session.get(TRIES_KEY, len(mine)) + 1
    label = _("demo #%(number)d") % {"number": number}
    try:
        notification = queue_demo.enqueue(label=label, fail=fail)
    except queue_demo.QueueFull:
        return _try_refused(
            request,
            # 429, not 503: the site is fine, the demo is busy (and 5xx answers are logged as
            # server errors, which a visitor could fill the log with).
            message=_("The demo queue is full; try again in a minute."),
            status=429,
            retry_after_seconds=60,
        )
    request.session[SESSION_KEY] = [str(notification.pk), *mine][: queue_demo.FEED_SIZE]
    request.session[TRIES_KEY] = number
    if not request.htmx:
        # Without JavaScript the form posts normally: queue it, then show the page again.
        return redirect(reverse("showcases:workers") + "#queue-worker")
    # With an empty try-error out of band: an earlier refusal is over once a try gets in.
    return render(
        request, "showcases/queue_live.html", {**_queue_context(request), "try_error_oob": True}
    )


# The multipart envelope around the image: boundaries, headers, the CSRF field.
MULTIPART_OVERHEAD = 64 * 1024


def _analyses_refused(request, verdict: ratelimit.Verdict):
    return ratelimit.refuse(
        message=_("Too many analyses; wait %(seconds)d s.")
        % {"seconds": verdict.retry_after_seconds},
        retry_after_seconds=verdict.retry_after_seconds,
    )


# Both doors open before the body is read: its declared size, then the count of analyses
# (core/middleware.py). The CPU price needs the image's headers, so analysis.py charges it.
@body_limit(max_bytes=analysis.MAX_BYTES + MULTIPART_OVERHEAD, message=analysis.too_large)
@visitor_post("analyse", limit=lambda: ANALYSE_LIMIT, refusal=_analyses_refused)
def analyse(request):
    """The server lane: the posted image's palette, computed by palette.py."""
    client = clients.address(request)
    upload = request.FILES.get("image")
    if upload is None:
        return JsonResponse({"error": _("Choose an image first.")}, status=400)
    if upload.size > analysis.MAX_BYTES:
        return JsonResponse({"error": analysis.too_large()}, status=413)
    try:
        result = analysis.analyse(upload.read(), client=client)
    except analysis.UploadError as error:
        fields = {"detail": error.detail} if error.detail else {}
        if error.retry_after_seconds:
            return ratelimit.refuse(
                message=error.message,
                status=error.status,
                retry_after_seconds=error.retry_after_seconds,
                request=request,
                **fields,
            )
        return JsonResponse({"error": error.message, **fields}, status=error.status)
    return JsonResponse(result)


@require_safe
def sample_photo(request):
    response = HttpResponse(sample.sample_jpeg(), content_type="image/jpeg")
    response["Cache-Control"] = "public, max-age=86400"
    return response
