"""Fixed-window rate limits kept in PostgreSQL, so every process and every serverless
invocation shares one count (a per-process cache would not)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.log import log_response

# One statement: the window restarts when it has run out, otherwise the hit is counted.
# Concurrent hits on one key serialise on the row, so none is lost.
HIT_SQL = """
INSERT INTO v10r_rate_limit_windows AS w (key, window_start, hits)
VALUES (%(key)s, now(), %(cost)s)
ON CONFLICT (key) DO UPDATE
SET window_start = CASE
        WHEN w.window_start <= now() - make_interval(secs => %(window_seconds)s) THEN now()
        ELSE w.window_start
    END,
    hits = CASE
        WHEN w.window_start <= now() - make_interval(secs => %(window_seconds)s) THEN %(cost)s
        ELSE w.hits + %(cost)s
    END
RETURNING hits,
          extract(epoch FROM window_start + make_interval(secs => %(window_seconds)s) - now())
""".strip()


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    hits: int
    retry_after_seconds: int  # until the window restarts


def hit(*, key: str, limit: int, window: timedelta, cost: int = 1) -> Verdict:
    """Count one hit on key, weighing cost (a budget counts, say, milliseconds of work rather
    than requests); allowed while the window holds at most limit."""
    if cost < 1:
        raise ValueError(f"a hit costs at least 1, not {cost}")
    params = {"key": key[:200], "window_seconds": window.total_seconds(), "cost": cost}
    with connection.cursor() as cursor:
        cursor.execute(HIT_SQL, params)
        hits, remaining = cursor.fetchone()
    return Verdict(allowed=hits <= limit, hits=hits, retry_after_seconds=_whole(remaining))


# Takes a hit back: limits on failures count every attempt first (so concurrent attempts
# cannot all slip under the limit before any is counted) and forgive the ones that succeed.
FORGIVE_SQL = """
UPDATE v10r_rate_limit_windows SET hits = greatest(hits - %(cost)s, 0) WHERE key = %(key)s
""".strip()


def forgive(*, key: str, cost: int = 1) -> None:
    """Take back a hit on key, of the cost it was counted at (an attempt that turned out to be
    legitimate, or work that was refused elsewhere and never done)."""
    with connection.cursor() as cursor:
        cursor.execute(FORGIVE_SQL, {"key": key[:200], "cost": cost})


def refuse(
    *,
    retry_after_seconds: int,
    message: str = "",
    status: int = 429,
    response: HttpResponse | None = None,
    request: HttpRequest | None = None,
    **fields,
) -> HttpResponse:
    """The site's one answer to a request turned away for a while: status (429, or 503 when
    the server itself is busy) with Retry-After. The body is {"error": message, **fields} as
    JSON, unless response is given (a page the view rendered), which is sent instead.

    A 503 needs the request: it is logged here, as one warning."""
    if status >= 500 and request is None:
        raise ValueError(f"a {status} refusal is logged, and needs the request")
    if response is None:
        response = JsonResponse({"error": message, **fields}, status=status)
    else:
        response.status_code = status
    response["Retry-After"] = str(retry_after_seconds)
    if status >= 500:
        # Django logs every 5xx as an error, and anyone can make the server this busy: one
        # warning per refusal, marked as logged so Django does not add its ERROR line.
        log_response(
            "%s (refused, retry in %s s): %s",
            response.reason_phrase,
            retry_after_seconds,
            request.path,
            response=response,
            request=request,
            level="warning",
        )
    return response


def _whole(seconds) -> int:
    """Round seconds up to a whole number, at least 1: what Retry-After may say."""
    return max(1, math.ceil(float(seconds)))


# Expired windows are dead weight: a key whose window ran out counts from 1 again anyway.
# Bounded, so one call never holds many row locks; the caller repeats while rows come back.
# MATERIALIZED, so the LIMIT holds under any plan (as in the outbox's claim). No index on
# window_start: the table holds one row per client and purpose active in the last hour, and
# this runs once every five minutes (the housekeeping job, one run at a time).
PRUNE_WINDOWS_SQL = """
WITH expired AS MATERIALIZED (
    SELECT key FROM v10r_rate_limit_windows
    WHERE window_start < now() - make_interval(secs => %(older_than_seconds)s)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM v10r_rate_limit_windows AS w USING expired AS e WHERE w.key = e.key
""".strip()


def prune(*, older_than: timedelta, limit: int = 1000) -> int:
    """Delete up to limit windows that started before older_than ago; return how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            PRUNE_WINDOWS_SQL, {"older_than_seconds": older_than.total_seconds(), "limit": limit}
        )
        return cursor.rowcount
