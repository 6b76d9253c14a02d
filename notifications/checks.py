"""System checks that make the queue's promises enforced rather than aspirational."""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.core.checks import Error, Warning, register

import transports as channels
from notifications import backoff, lanes, pacing
from transports.checks import check_channels as channel_problems

# Time for the claim, the group writes and the thread hand-offs of one batch, beyond the sends.
LEASE_MARGIN = timedelta(seconds=5)


def worst_case_batch(*, batch_size: int, concurrency: int) -> timedelta:
    """Return the longest a full batch can hold its rows: rounds of the slowest channel, and,
    when a channel is paced, the longest a send may wait for its slot (notifications/pacing.py
    grants none further ahead than its horizon)."""
    configured = channels.configured().values()
    slowest = max((c.worst_case for c in configured), default=timedelta())
    rounds = math.ceil(batch_size / concurrency)
    paced = any(c.pace() is not None for c in configured)
    waiting = timedelta(seconds=pacing.HORIZON) if paced else timedelta()
    return slowest * rounds + waiting + LEASE_MARGIN


def shortest_lease(*, batch_size: int, concurrency: int) -> int:
    """Return the shortest whole number of seconds that outlasts a full batch."""
    needed = worst_case_batch(batch_size=batch_size, concurrency=concurrency)
    return math.floor(needed.total_seconds()) + 1


def lease_problem(*, lease: timedelta, batch_size: int, concurrency: int) -> str | None:
    """Return why lease is too short for such batches, or None when it is long enough.

    attempted_at is stamped once for the whole batch, so the last row's lease has been
    running since the claim: the lease must outlast the whole batch, or the reaper would
    hand a row to a second worker while the first is still sending it.
    """
    needed = worst_case_batch(batch_size=batch_size, concurrency=concurrency)
    if lease <= needed:
        return (
            f"The claim lease ({lease.total_seconds():g} s) must exceed the worst case of a "
            f"full batch: {math.ceil(batch_size / concurrency)} round(s) of the slowest "
            "channel's timeout, with the wait for a paced channel's slot if any, plus "
            f"{LEASE_MARGIN.total_seconds():g} s = "
            f"{needed.total_seconds():g} s (batch {batch_size}, concurrency {concurrency})."
        )
    return None


def tick_problem(*, interval: timedelta) -> str | None:
    """Return why the tick is too slow for the first retry, or None."""
    first = backoff.FIRST_DELAY * (1 - backoff.JITTER)
    if first <= interval:
        return (
            f"The first retry comes after {first.total_seconds():g} s at the earliest, which "
            f"is not longer than the drain tick ({interval.total_seconds():g} s): retries "
            "would wait for the next tick instead of their backoff."
        )
    return None


def cron_budget_problem(*, budget: timedelta) -> str | None:
    """Return why a cron drain of this budget could never send on some channel, or None."""
    slow = {
        name: channel.worst_case
        for name, channel in channels.configured().items()
        if channel.worst_case >= budget
    }
    if slow:
        names = ", ".join(f"{name} ({worst.total_seconds():g} s)" for name, worst in slow.items())
        return (
            f"A cron drain may take {budget.total_seconds():g} s (CRON_DRAIN_SECONDS), but a "
            f"single send on {names} may take that long, so the cron trigger would never "
            "start one."
        )
    return None


@register(deploy=False)
def check_lease_and_tick(app_configs=None, **kwargs):
    # A channel that cannot be built has its own error (transports/checks.py); the lease
    # cannot be judged without it.
    if any(problem.is_serious() for problem in channel_problems()):
        return []
    errors = []
    problem = lease_problem(
        lease=timedelta(seconds=settings.DELIVERY_LEASE_SECONDS),
        batch_size=settings.DELIVERY_BATCH_SIZE,
        concurrency=settings.DELIVERY_CONCURRENCY,
    )
    if problem:
        shortest = shortest_lease(
            batch_size=settings.DELIVERY_BATCH_SIZE, concurrency=settings.DELIVERY_CONCURRENCY
        )
        errors.append(
            Error(
                problem,
                hint=f"Set DELIVERY_LEASE_SECONDS={shortest} or more, or lower "
                "DELIVERY_BATCH_SIZE, raise DELIVERY_CONCURRENCY, or shorten the channels' "
                "timeouts (EMAIL_TIMEOUT).",
                id="notifications.E001",
            )
        )
    problem = tick_problem(interval=timedelta(seconds=settings.DELIVERY_INTERVAL_SECONDS))
    if problem:
        errors.append(
            Error(problem, hint="Lower DELIVERY_INTERVAL_SECONDS.", id="notifications.E002")
        )
    if settings.CRON_SECRET:
        problem = cron_budget_problem(budget=timedelta(seconds=settings.CRON_DRAIN_SECONDS))
        if problem:
            errors.append(
                Error(
                    problem,
                    hint="Raise CRON_DRAIN_SECONDS (keeping it below the web server's "
                    "timeout), or shorten the channels' timeouts (EMAIL_TIMEOUT).",
                    id="notifications.E004",
                )
            )
    return errors


LANES_HINT = "DELIVERY_LANES in the settings: {name: {'rank': int, 'cap': int or None}}."
# One id per kind of problem (notifications/lanes.py names the kinds), each written once.
LANE_ERRORS = {
    lanes.NOT_A_MAPPING: lambda m: Error(m, hint=LANES_HINT, id="notifications.E010"),
    lanes.BAD_NAME: lambda m: Error(m, hint=LANES_HINT, id="notifications.E011"),
    lanes.BAD_RANK: lambda m: Error(m, hint=LANES_HINT, id="notifications.E012"),
    lanes.BAD_CAP: lambda m: Error(m, hint=LANES_HINT, id="notifications.E013"),
    lanes.TOO_MANY: lambda m: Error(m, hint=LANES_HINT, id="notifications.E014"),
    lanes.NO_DEFAULT: lambda m: Error(m, hint=LANES_HINT, id="notifications.E015"),
}


@register()
def check_lanes(app_configs=None, **kwargs):
    """DELIVERY_LANES is written into the claim's SQL once, at start-up: a lane it could not
    claim, or two it could not order, stops start-up instead."""
    return [
        LANE_ERRORS[kind](message)
        for kind, message in lanes.problems(getattr(settings, "DELIVERY_LANES", None))
    ]


def throttle_problems(throttles, *, categories) -> list[str]:
    """What is wrong with NOTIFICATION_THROTTLES ({category: (limit, seconds)}), in words."""
    if not isinstance(throttles, dict):
        return [f"NOTIFICATION_THROTTLES must be a dict, not {type(throttles).__name__}."]
    problems = []
    for name, value in throttles.items():
        if name not in categories:
            problems.append(
                f"NOTIFICATION_THROTTLES names {name!r}, which is no category; "
                f"the categories are: {', '.join(categories)}."
            )
            continue
        shape_ok = (
            isinstance(value, (tuple, list))
            and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        )
        if not shape_ok:
            problems.append(
                f"NOTIFICATION_THROTTLES[{name!r}] must be (limit, seconds), two whole numbers, "
                f"not {value!r}."
            )
        elif not 0 <= value[0] <= 10_000 or not 60 <= value[1] <= 86_400:
            problems.append(
                f"NOTIFICATION_THROTTLES[{name!r}] = {tuple(value)!r}: the limit must be 0 to "
                "10000 (0: no throttle) and the window 60 to 86400 seconds."
            )
    return problems


@register()
def check_throttles(app_configs=None, **kwargs):
    from recipients import catalogue

    return [
        Error(problem, id="notifications.E022")
        for problem in throttle_problems(
            settings.NOTIFICATION_THROTTLES, categories=list(catalogue.CATEGORIES)
        )
    ]


@register(deploy=True)
def check_unsubscribe_origin(app_configs=None, **kwargs):
    """The one-click unsubscribe link (RFC 8058) needs an HTTPS origin to point at: the
    messages of a channel that offers one (Channel.offers_unsubscribe: email) are sent by a
    drain, which has no request to take a host from."""
    offering = [n for n, c in channels.configured().items() if c.offers_unsubscribe]
    if not offering:
        return []
    if not settings.SITE_ORIGIN:
        return [
            Warning(
                f"SITE_ORIGIN is not set: messages on {', '.join(offering)} go without their "
                "one-click unsubscribe link (an email's List-Unsubscribe headers), and an "
                "email's footer has no link to the preference centre.",
                hint="Set SITE_ORIGIN to the site's public HTTPS origin (docs/unsubscribe.md).",
                id="notifications.W002",
            )
        ]
    if not settings.SITE_ORIGIN.startswith("https://"):
        return [
            Warning(
                f"SITE_ORIGIN is {settings.SITE_ORIGIN!r}: RFC 8058 wants an HTTPS "
                "List-Unsubscribe link, and mail providers may ignore a plain-HTTP one.",
                hint="Serve the site over HTTPS and set SITE_ORIGIN to its https:// origin.",
                id="notifications.W003",
            )
        ]
    return []


# How a check tells that DATABASE_URL goes through a pooler: the server reports the port its
# own end of the connection listens on (inet_server_port()). Straight to PostgreSQL, that is the
# URL's port; through PgBouncer (or any proxy) it is the server's, which the pooler connects
# to, and the URL names the pooler's (6432, say). A Unix socket has no port to compare.
SERVER_PORT_SQL = "SELECT inet_server_port()"


@register(deploy=True)
def check_listener_route(app_configs=None, **kwargs):
    """The drain loop listens on DATABASE_URL unless DELIVERY_LISTEN_URL says otherwise; a
    pooler in between hears nothing there. One statement on the default database."""
    from django.db import DatabaseError, connection

    if settings.DELIVERY_LISTEN_URL or not settings.DATABASE_URL:
        return []  # set (or off), or the embedded server, reached on its socket
    asked = connection.settings_dict.get("PORT") or 5432
    try:
        with connection.cursor() as cursor:
            cursor.execute(SERVER_PORT_SQL)
            (port,) = cursor.fetchone()
    except DatabaseError:
        return []  # no database to ask; the site's own start-up says why
    if port is None or int(port) == int(asked):
        return []
    return [
        Warning(
            f"DATABASE_URL reaches PostgreSQL through a pooler or proxy (it names port {asked}; "
            f"the server's end of the connection is port {port}), and DELIVERY_LISTEN_URL is "
            "not set: the drain loop listens there, and through PgBouncer in transaction "
            "pooling it hears no wake-up, so every delivery waits for the next poll.",
            hint="Set DELIVERY_LISTEN_URL to a postgres:// URL straight to the server (the "
            "drain loop only listens on it), or to off to poll on purpose.",
            id="notifications.W020",
        )
    ]
