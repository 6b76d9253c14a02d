"""Fixed-window rate limits kept in PostgreSQL, so every process and every serverless
invocation shares one count (a per-process cache would not)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import connection

# One statement: the window restarts when it has run out, otherwise the hit is counted.
# Concurrent hits on one key serialise on the row, so none is lost.
HIT_SQL = """
INSERT INTO v10r_rate_limit_windows AS w (key, window_start, hits)
VALUES (%(key)s, now(), 1)
ON CONFLICT (key) DO UPDATE
SET window_start = CASE
        WHEN w.window_start <= now() - make_interval(secs => %(window_seconds)s) THEN now()
        ELSE w.window_start
    END,
    hits = CASE
        WHEN w.window_start <= now() - make_interval(secs => %(window_seconds)s) THEN 1
        ELSE w.hits + 1
    END
RETURNING hits,
          extract(epoch FROM window_start + make_interval(secs => %(window_seconds)s) - now())
""".strip()


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    hits: int
    retry_after_seconds: int  # until the window restarts


def hit(*, key: str, limit: int, window: timedelta) -> Verdict:
    """Count one hit on key; allowed while the window holds at most limit hits."""
    with connection.cursor() as cursor:
        cursor.execute(HIT_SQL, {"key": key[:200], "window_seconds": window.total_seconds()})
        hits, remaining = cursor.fetchone()
    return Verdict(
        allowed=hits <= limit,
        hits=hits,
        retry_after_seconds=max(1, int(-(-float(remaining) // 1))),
    )
