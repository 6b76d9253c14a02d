"""Probes for whatever supervises the web processes: liveness and readiness.

`/healthz` says the process answers, and nothing more: no database, nothing that could be
slow, so a supervisor restarts a process only when the process itself is stuck, never because
PostgreSQL is. `/readyz` says the process can serve: PostgreSQL answers on this thread's
connection within READY_TIMEOUT and no migration waits to be applied; a load balancer sends
traffic only to processes that are ready. Each answers JSON, 200 or 503 with a reason, never
a 500.

ProbeMiddleware answers both, first in MIDDLEWARE, before the host check and the HTTPS
redirect: probes come over plain HTTP with an address for a Host (a kubelet, a load
balancer, the image's HEALTHCHECK), which ALLOWED_HOSTS rightly refuses for pages, and
nothing in either answer depends on the Host. They live outside the language prefixes too.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

logger = logging.getLogger(__name__)

# A database slower than this to answer is as good as down for a request. Connecting is
# bounded apart from it, by the connect_timeout in the settings' DATABASES.
READY_TIMEOUT = timedelta(seconds=2)

# Pending migrations named in a reason, at most.
NAMED = 3


def _answer(reason: str | None) -> JsonResponse:
    body = {"status": "ok"} if reason is None else {"status": "unavailable", "reason": reason}
    return JsonResponse(
        body, status=200 if reason is None else 503, headers={"Cache-Control": "no-store"}
    )


@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    """Answer that the process is alive; touch nothing else."""
    return _answer(None)


@require_safe
def readyz(request: HttpRequest) -> HttpResponse:
    """Answer whether this process can serve requests: 200, or 503 and why not."""
    return _answer(readiness_problem())


# SET LOCAL lasts until the check's transaction ends, so the limit never outlives it on a
# connection that PgBouncer, pooling transactions, hands to another client next.
STATEMENT_TIMEOUT_SQL = f"SET LOCAL statement_timeout = {int(READY_TIMEOUT.total_seconds() * 1000)}"

# Once every migration this code knows is applied, it stays so for the life of the process
# (a later deploy's migrations come with new processes), so later checks skip loading the
# migration graph and cost one SELECT.
_migrated = False


def readiness_problem() -> str | None:
    """Return why this process cannot serve (database, migrations), or None when it can."""
    global _migrated
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(STATEMENT_TIMEOUT_SQL)
            cursor.execute("SELECT 1")
            pending = [] if _migrated else unapplied_migrations()
    except DatabaseError as exc:
        # The reason is public (nginx passes /readyz through): it names the kind of failure,
        # never the host or the user that the driver's message would.
        logger.warning("readiness: database unavailable: %s", exc)
        return f"database unavailable ({type(exc.__cause__ or exc).__name__})"
    except Exception as exc:
        # A probe's job is to answer: a broken migration graph is a reason too, not a 500.
        logger.exception("readiness check failed")
        return f"readiness check failed ({type(exc).__name__})"
    if pending:
        more = f" and {len(pending) - NAMED} more" if len(pending) > NAMED else ""
        return f"unapplied migrations: {', '.join(pending[:NAMED])}{more}"
    _migrated = True
    return None


def unapplied_migrations() -> list[str]:
    """Return the migrations `migrate` would apply, as app_label.name, in order."""
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]


PROBES = {"/healthz": healthz, "/readyz": readyz}


class ProbeMiddleware:
    """Answer the probes before any other middleware runs (see the module's docstring)."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info)
        if probe is None:
            return self.get_response(request)
        return probe(request)
