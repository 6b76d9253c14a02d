"""One drain of the outbox: reap, claim, send outside any transaction, write under fences.

Sends of a batch run on a small thread pool, so a batch of slow sends takes a few round trips
rather than one per row; only the calling thread touches the database. Outcomes are written
in groups, one statement per flush, at least every FLUSH_EVERY and at the end of the batch,
so a crash re-sends at most what was sent since the last flush.

Every batch has a deadline, the end of its lease: a drain starts no send that could not finish
before it, since by then the reaper may have put the row back (and a cancel taken it, or
another drain claimed it). A drain may be given an earlier one (the cron trigger's request must
answer before the proxy's timeout). Either way, the rows it did not get to go back to the queue
unspent, and it writes what it has.

This module keeps no state of its own: the pool, the outcomes still to be written and the
guard against two drains at once belong to the process's Worker (notifications/worker.py).
"""

from __future__ import annotations

import logging
import queue
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import NamedTuple

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, InterfaceError, OperationalError, transaction

import transports as channels
from notifications import broadcasts, digests, outbox, pacing
from notifications.models import OUTCOMES, DatabaseNow, SkipReason, Status
from notifications.outbox import ClaimedDelivery, Outcome
from recipients import catalogue, preferences, quiet, tokens
from recipients.models import ChannelAddress
from transports.base import AddressSource, Channel, ChannelError, Outgoing, Target

logger = logging.getLogger(__name__)

FLUSH_EVERY = 0.1  # seconds


@dataclass(frozen=True)
class Policy:
    """How a drain works its batch: the DELIVERY_* settings, or a command's options."""

    batch_size: int
    concurrency: int
    lease: timedelta
    max_attempts: int

    @classmethod
    def from_settings(cls) -> Policy:
        return cls(
            batch_size=settings.DELIVERY_BATCH_SIZE,
            concurrency=settings.DELIVERY_CONCURRENCY,
            lease=timedelta(seconds=settings.DELIVERY_LEASE_SECONDS),
            max_attempts=settings.DELIVERY_MAX_ATTEMPTS,
        )

    def with_changes(self, **changes) -> Policy:
        """This policy with the changes that are not None."""
        changes = {name: v for name, v in changes.items() if v is not None}
        # Most drains change nothing: no copy for them (replace() costs 10 µs a batch).
        return replace(self, **changes) if changes else self


# The Report fields only the metrics read (too long, or too fine, for a heartbeat or a log).
METRICS_ONLY = ("by_channel", "claim_seconds", "write_seconds")
# The Report fields that count rows, in the order the log line shows them.
COUNTS = (
    "reaped",
    "claimed",
    *map(str, OUTCOMES.values()),
    "throttled",
    "fenced_off",
    "released",
    "unwanted",
    "held",
    "expanded",
)


@dataclass
class Report:
    reaped: int = 0
    claimed: int = 0
    # One count per outcome, by its name in models.OUTCOMES.
    sent: int = 0
    retrying: int = 0
    failed: int = 0
    dead: int = 0
    # Handed back by a provider's 429 without spending a send (the ones that went dead for
    # it are counted under dead).
    throttled: int = 0
    fenced_off: int = 0
    # Claimed and handed back unsent, the send not counted: the time budget ran out, or a paced
    # channel had no slot for it soon enough (notifications/pacing.py).
    released: int = 0
    # Written skipped when their turn came: the recipient no longer wants them on their
    # channel (a choice changed after they were queued), or can no longer be reached there.
    unwanted: int = 0
    # Handed back until the recipient's quiet hours end (set or moved after they were queued).
    held: int = 0
    # Broadcast recipients given their notification (notifications/broadcasts.py).
    expanded: int = 0
    skipped: bool = False  # another drain was running in this process
    # The batch came back full, or a capped lane took its cap, so more rows may be due: a loop
    # should not wait for its tick.
    more_due: bool = False
    # For the metrics (notifications/metrics.py): outcomes per channel, {channel: {sent: n,
    # retrying: n, failed: n, dead: n}}, and how long the claim and each write took.
    by_channel: dict[str, dict[str, int]] = field(default_factory=dict)
    claim_seconds: list[float] = field(default_factory=list)
    write_seconds: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, int | bool]:
        """The counts, for the heartbeat, the cron trigger's answer and the log."""
        report = asdict(self)
        for name in METRICS_ONLY:
            del report[name]
        return report

    def add(self, other: Report) -> None:
        """Count other's rows into this report (several batches of one cron request)."""
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.more_due = other.more_due
        for channel, outcomes in other.by_channel.items():
            mine = self.by_channel.setdefault(channel, {})
            for outcome, count in outcomes.items():
                mine[outcome] = mine.get(outcome, 0) + count
        self.claim_seconds += other.claim_seconds
        self.write_seconds += other.write_seconds

    def line(self) -> str:
        if self.skipped:
            return "skipped: a drain is already running in this process"
        return " ".join(f"{name}={getattr(self, name)}" for name in COUNTS)


def drain(
    *,
    policy: Policy,
    pool: ThreadPoolExecutor,
    unwritten: list[Outcome],
    deadline: float | None = None,
    reap: bool = True,
) -> Report:
    """Drain one batch; return what happened.

    pool runs the sends (policy.concurrency threads); unwritten holds outcomes an earlier
    drain could not write (the database was gone): they are written first, and this drain's
    go there too if the database goes away again. deadline is a time.monotonic() value.
    reap=False skips the reaper this time (a worker that ran it a moment ago)."""
    batch_size, concurrency = policy.batch_size, policy.concurrency
    lease, max_attempts = policy.lease, policy.max_attempts
    report = Report()
    if unwritten:
        _tally(report, list(unwritten), _timed_write(report, unwritten))
        unwritten.clear()

    if reap:
        report.reaped = len(outbox.reclaim_stale(lease=lease, max_attempts=max_attempts))
        outbox.adopt_lost_lanes()
        broadcasts.reclaim_stale_chunks(lease=lease)
    began = time.perf_counter()
    # The lease runs from the claim (attempted_at is stamped by it, a moment after this): once
    # it may have run out, the reaper may have put the batch back, a cancel may have taken its
    # rows and another drain may be sending them. No send starts that could not finish before
    # then (a drain stopped past it, by a debugger or a frozen host, starts none of the rest).
    lease_end = time.monotonic() + lease.total_seconds()
    deadline = lease_end if deadline is None else min(deadline, lease_end)
    claimed = outbox.claim(batch_size=batch_size)
    report.claim_seconds.append(time.perf_counter() - began)
    report.claimed = len(claimed)
    report.more_due = outbox.more_due(claimed, batch_size=batch_size)
    if not claimed:
        _expand(report)
        return report
    # RETURNING has no order: the higher lanes' rows first, so no lower lane's send (a slow
    # send a showcase makes on purpose) starts before one of theirs. sort() is stable: within
    # a lane, claim order.
    # A batch of one lane (the most common) is in order already.
    if len({d.lane for d in claimed}) > 1:
        claimed.sort(key=lambda d: outbox.rank(d.lane))

    ready, immediate, held = _prepare(claimed, max_attempts=max_attempts)
    if held:
        report.held += len(outbox.hold_quiet(held))
    writer = _Writer(report, unwritten)
    writer.add(immediate)
    unsent: list[ClaimedDelivery] = []
    sends = _send_all(
        ready,
        pool=pool,
        concurrency=concurrency,
        max_attempts=max_attempts,
        deadline=deadline,
        unsent=unsent,
        report=report,
    )
    for finished in sends:
        writer.add(finished)
        if writer.due():
            writer.flush()
    writer.flush()
    if writer.error is not None:
        raise writer.error
    if unsent:
        # += : _send_all has counted the rows pacing handed back for later.
        report.released += len(outbox.release(unsent))
    _expand(report)
    return report


def _expand(report: Report) -> None:
    """Expand one broadcast chunk, if one waits: after the batch, so every row already due in
    a higher lane went first, and a drain that expands holds up the next batch by one chunk
    (BROADCAST_CHUNK_SIZE recipients) at most. A chunk expanded means more may wait."""
    expanded = broadcasts.expand_next(lanes=LANE_NAMES)
    if expanded is not None:
        report.expanded += expanded.recipients
        report.more_due = True


LANE_NAMES = [lane.name for lane in outbox.LANES]


class _Writer:
    """Buffers outcomes and writes them in groups; keeps them when the database is gone."""

    def __init__(self, report: Report, unwritten: list[Outcome]) -> None:
        self.report = report
        self.unwritten = unwritten
        self.buffer: list[Outcome] = []
        self.blocked: list[Finished] = []
        self.last_flush = time.monotonic()
        self.error: DatabaseError | None = None

    def add(self, items: list[Finished]) -> None:
        self.buffer += [item.outcome for item in items]
        self.blocked += [item for item in items if item.deactivate_address or item.gone]

    def due(self) -> bool:
        return time.monotonic() - self.last_flush >= FLUSH_EVERY

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        batch, self.buffer = self.buffer, []
        if self.error is None:
            try:
                landed = _timed_write(self.report, batch)
            except (OperationalError, InterfaceError) as exc:
                logger.warning("could not write %d outcomes, keeping them: %s", len(batch), exc)
                self.error = exc
            except DatabaseError as exc:
                # Refused, not lost: something in one outcome the database will not store.
                # Kept, it would fail every drain from now on; written one by one, it holds up
                # no other row.
                logger.error("could not write %d outcomes together: %s", len(batch), exc)
                landed, kept = _one_by_one(self.report, batch)
                if kept:
                    self.error = DatabaseError("the database went away during the writes")
                    self.unwritten.extend(kept)
                self._written(batch, landed)
                return
            else:
                self._written(batch, landed)
                return
        # The database is unreachable: keep every outcome for the next drain to write. The
        # fences make that write safe however late it comes.
        self.unwritten.extend(batch)

    def _written(self, batch: list[Outcome], landed: set[int]) -> None:
        _deactivate(self.blocked)
        self.blocked = []
        _tally(self.report, batch, landed)


def _one_by_one(report: Report, batch: list[Outcome]) -> tuple[set[int], list[Outcome]]:
    """Write each outcome alone; one the database refuses is written again without its free
    text, and if that too is refused, left for the reaper (logged). Return the ids that
    landed, and the outcomes left unwritten because the database went away meanwhile."""
    landed: set[int] = set()
    for index, outcome in enumerate(batch):
        for attempt in (outcome, outcome._replace(provider_message_id="", error_message="")):
            try:
                # Its own transaction (a savepoint inside a caller's): a refused write leaves
                # nothing aborted for the next one.
                with transaction.atomic():
                    landed |= _timed_write(report, [attempt])
                break
            except (OperationalError, InterfaceError):
                return landed, batch[index:]
            except DatabaseError as exc:
                refused = exc
        else:
            logger.error(
                "delivery %s: its outcome could not be stored (%s); the reaper will requeue it",
                outcome.delivery_id,
                refused,
            )
    return landed, []


def _timed_write(report: Report, outcomes) -> set[int]:
    began = time.perf_counter()
    landed = outbox.write_outcomes(outcomes)
    report.write_seconds.append(time.perf_counter() - began)
    return landed


def _tally(report: Report, outcomes: list[Outcome], landed: set[int]) -> None:
    # Counted by kind first: a flush's outcomes are mostly of one status on one channel.
    kinds: Counter[tuple[str, bool, str]] = Counter(
        (o.status, o.throttled, o.channel) for o in outcomes if o.delivery_id in landed
    )
    report.fenced_off += len(outcomes) - kinds.total()
    for (status, throttled, channel), count in kinds.items():
        name = "unwanted" if status == Status.SKIPPED else str(OUTCOMES[status])
        if throttled and status != Status.DEAD:
            name = "throttled"
        setattr(report, name, getattr(report, name) + count)
        counts = report.by_channel.setdefault(channel, {})
        counts[name] = counts.get(name, 0) + count


def _deactivate(blocked: list[Finished]) -> None:
    for delivery, outcome, _, gone in blocked:
        active = ChannelAddress.objects.filter(
            user_id=delivery.user_id, channel=delivery.channel, is_active=True
        )
        if not gone:
            active.update(
                is_active=False,
                deactivated_at=DatabaseNow(),
                deactivated_reason=f"{outcome.error_code}: {outcome.error_message}"[:500],
            )
        # A channel with several addresses names the ones that are gone, each with its reason.
        for address, why in gone:
            active.filter(address=address).update(
                is_active=False, deactivated_at=DatabaseNow(), deactivated_reason=why[:500]
            )


# The address sources a send cannot go without.
ADDRESSED = frozenset({AddressSource.EMAIL, AddressSource.CHANNEL_ADDRESS})


def _chooses(category: catalogue.Category | None) -> bool:
    """Whether a recipient's choices (and quiet hours) apply to category: the drain reads them
    again before it sends. Not a required category (always sent, never held), not one nobody
    chooses (a site's own rows)."""
    return category is not None and category.choosable and not category.required


def _category_name(delivery: ClaimedDelivery) -> str:
    """The category delivery is of: its message's, or for a digest the one it gathers (named
    in the carrier's params, digests.CARRIER_SQL). The catalogue is read here, not once at
    import: apps register into it when they are ready, after this module may be imported."""
    if delivery.message_key == digests.DIGEST:
        return delivery.message_params.get("category", "")
    message = catalogue.MESSAGES.get(delivery.message_key)
    return message.category if message else ""


def _chosen_category(delivery: ClaimedDelivery) -> str | None:
    """The category of delivery when its recipient chooses it; None when no choice of theirs
    applies (a required category, one nobody chooses, a message no longer in the catalogue)."""
    name = _category_name(delivery)
    return name if _chooses(catalogue.CATEGORIES.get(name)) else None


class _Batch(NamedTuple):
    """What a batch's sends need from its recipients, read once for the whole batch."""

    emails: dict[int, str]
    # (user, channel) → the active addresses, newest first, with their secrets.
    addresses: dict[tuple[int, str], list[tuple[str, tuple[str, ...]]]]
    # (user, channel) pairs with an address switched off and none on (SkipReason.CHANNEL_OFF).
    turned_off: set[tuple[int, str]]
    preferences: dict[int, preferences.Preferences]


def _prepare(
    claimed: list[ClaimedDelivery], *, max_attempts: int
) -> tuple[list[tuple[ClaimedDelivery, Channel, Outgoing]], list[Finished], list]:
    """Render each claimed delivery for its channel; skip it now when the recipient can no
    longer be reached there or no longer wants it; hold it when their quiet hours do; fail
    it when sending it is impossible.

    Return the sends, the outcomes already known, and the (delivery, until) pairs to hold.
    The recipients' addresses, choices and languages are read for the whole batch at once, a
    query per kind, not per row; and their quiet hours' ends in one more statement when a
    row may be held. Choices are read again only for the rows whose recipient changed them
    since the row was decided (ClaimedDelivery.rechoose, from the claim). An unknown channel
    or a missing recipient fails that row, never the batch.
    """
    by_name = {name: channels.get(name) for name in {d.channel for d in claimed}}
    # Only the rows of recipients who changed their choices since the row was decided: the
    # others were decided under the choices they still have.
    chosen = {d.id: c for d in claimed if d.rechoose and (c := _chosen_category(d)) is not None}
    known = [d for d in claimed if by_name[d.channel] is not None]
    batch = _recipients(known, by_name, chosen)
    prefs = batch.preferences
    held = _held(known, chosen, prefs)
    # The digests' items, for every digest of the batch that renders.
    items = digests.items_of(
        [
            d.id
            for d in known
            if by_name[d.channel].renders and d.message_key == digests.DIGEST and d.id not in held
        ]
    )

    ready, immediate, holding = [], [], []
    default_language = settings.LANGUAGE_CODE
    no_preferences = preferences.Preferences()

    def fail(delivery: ClaimedDelivery, code: str, message: str) -> None:
        outcome = Outcome.failure(
            delivery, code=code, message=message, retryable=False, max_attempts=max_attempts
        )
        immediate.append(Finished(delivery, outcome))

    def skip(delivery: ClaimedDelivery, reason: str) -> None:
        immediate.append(Finished(delivery, Outcome.skip(delivery, reason=reason)))

    for delivery in claimed:
        channel = by_name[delivery.channel]
        if channel is None:
            fail(delivery, "UNKNOWN_CHANNEL", f"No channel is configured as {delivery.channel!r}.")
            continue
        address, secrets, targets = "", (), ()
        source = channel.address_source
        if source == AddressSource.EMAIL:
            address = batch.emails.get(delivery.user_id, "")
        elif source == AddressSource.CHANNEL_ADDRESS:
            found = batch.addresses.get((delivery.user_id, delivery.channel))
            if found:
                address, secrets = found[0]
                if channel.several_addresses:
                    targets = tuple(Target(a, s) for a, s in found)
        if not address and source in ADDRESSED:
            # Gone since it was queued (removed, or switched off by a provider or staff).
            if (delivery.user_id, delivery.channel) in batch.turned_off:
                skip(delivery, SkipReason.CHANNEL_OFF)
            else:
                skip(delivery, SkipReason.NO_ADDRESS)
            continue
        recipient = prefs.get(delivery.user_id, no_preferences)
        category = chosen.get(delivery.id)
        if category is not None:
            if not recipient.enabled(category, delivery.channel):
                skip(delivery, SkipReason.OPTED_OUT)
                continue
            until = held.get(delivery.id)
            if until is not None:
                holding.append((delivery, until))
                continue
        subject = body = ""
        language = recipient.language or default_language
        key = delivery.message_key
        params = delivery.message_params
        if channel.renders and key == digests.DIGEST:
            gathered = items.get(delivery.id)
            if gathered is None:
                fail(delivery, "EMPTY_DIGEST", "The digest has no notifications left to send.")
                continue
            digest = digests.render(
                params=params, items=gathered, language=language, time_zone=recipient.time_zone
            )
            subject, body, params = digest.subject, digest.body, digest.params
        elif channel.renders:
            try:
                rendered = catalogue.render(
                    key=key, params=delivery.message_params, language=language
                )
            except catalogue.RENDER_ERRORS as exc:
                fail(delivery, "BAD_MESSAGE", f"Cannot render {key!r}: {exc!r}")
                continue
            subject, body = rendered.subject, rendered.body
        label = link = ""
        if channel.offers_unsubscribe and delivery.user_id is not None:
            offered = tokens.offer(
                user_id=delivery.user_id,
                category=_category_name(delivery),
                channel=delivery.channel,
                language=language,
            )
            if offered is not None:
                label, link = offered
        outgoing = Outgoing(
            delivery_id=delivery.id,
            channel=delivery.channel,
            address=address,
            subject=subject,
            body=body,
            action_url=delivery.action_url,
            language=language,
            params=params,
            type=delivery.type,
            message_key=key,
            user_id=delivery.user_id,
            secrets=secrets,
            lane=delivery.lane,
            targets=targets,
            digest=key == digests.DIGEST,
            category_label=label,
            unsubscribe_url=link,
        )
        ready.append((delivery, channel, outgoing))
    return ready, immediate, holding


def _held(
    known: list[ClaimedDelivery],
    chosen: dict[int, str],
    prefs: dict[int, preferences.Preferences],
) -> dict[int, datetime]:
    """The rows of known that their recipient's quiet hours hold now, with when the window
    ends: one statement for the batch, and none when no recipient of it has quiet hours on
    a row's channel."""
    asked: dict[quiet.Hours, list[int]] = {}
    for delivery in known:
        if delivery.id not in chosen:
            continue
        recipient = prefs.get(delivery.user_id)
        if recipient is not None and recipient.holds(delivery.channel):
            asked.setdefault(recipient.quiet, []).append(delivery.id)
    if not asked:
        return {}
    windows = list(asked)
    ends = quiet.held_until_each([(window, None) for window in windows])
    return {
        delivery_id: until
        for window, until in zip(windows, ends, strict=True)
        if until is not None
        for delivery_id in asked[window]
    }


def _recipients(
    known: list[ClaimedDelivery], by_name: dict[str, Channel | None], chosen: dict[int, str]
) -> _Batch:
    """The addresses, choices and languages of the rows' recipients: a query for each kind
    the batch needs (a batch on a channel that needs no address, of a category nobody
    chooses, asks none)."""
    email_users, address_keys, users = set(), set(), set()
    for d in known:
        channel = by_name[d.channel]
        source = channel.address_source
        if source == AddressSource.EMAIL:
            email_users.add(d.user_id)
        elif source == AddressSource.CHANNEL_ADDRESS:
            address_keys.add((d.user_id, d.channel))
        if channel.renders or d.id in chosen:
            users.add(d.user_id)
    emails = {}
    if email_users:
        emails = dict(
            get_user_model().objects.filter(pk__in=email_users).values_list("pk", "email")
        )
    addresses, turned_off = {}, set()
    if address_keys:
        rows = (
            ChannelAddress.objects.filter(
                user_id__in={u for u, _ in address_keys},
                channel__in={c for _, c in address_keys},
            )
            .order_by("-id")
            .values_list(
                "user_id",
                "channel",
                "address",
                "is_active",
                "webhook_secret__secret",
                "webhook_secret__previous_secret",
                "push_subscription__p256dh",
                "push_subscription__auth",
            )
        )
        # Newest first, a list per (user, channel): one address for most channels (one may be
        # active), every device's subscription for web push. The secrets are a webhook's
        # signing secrets or a subscription's keys; an address has one kind or none.
        for u, c, a, active, *keys in rows:
            if active:
                addresses.setdefault((u, c), []).append((a, tuple(x for x in keys if x)))
            else:
                turned_off.add((u, c))
        turned_off.difference_update(addresses)
    return _Batch(emails, addresses, turned_off, preferences.of_each(users))


class Finished(NamedTuple):
    """One send done: the outcome to write, and whether to stop sending to the address (a
    blocked bot, a webhook endpoint gone for good). A named tuple: one is made per send."""

    delivery: ClaimedDelivery
    outcome: Outcome
    deactivate_address: bool = False
    # Of a channel with several addresses, the ones to deactivate: (address, why) each.
    gone: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _NotStarted:
    """A send a sender thread did not start: the deadline was too near."""

    delivery: ClaimedDelivery


def _send_all(
    ready,
    *,
    pool: ThreadPoolExecutor,
    concurrency: int,
    max_attempts: int,
    deadline: float | None,
    unsent: list[ClaimedDelivery],
    report: Report | None = None,
):
    """Yield lists of Finished sends as they finish, concurrency at a time on pool (or, with a
    concurrency of 1, on this thread): local sends (Channel.local) in one list, the others
    one a list.

    While sends are out and none finishes, yield [] every FLUSH_EVERY, so the caller can
    write what has finished without waiting for the slowest send of the batch. With a
    deadline (time.monotonic()), a send that could outlast it, its wait for a slot included,
    is not started: its delivery goes to unsent instead.

    Paced channels (Channel.pace) first reserve their slots, one reserve() per key for the
    batch (notifications/pacing.py); each send waits for its slot on its sender thread. The
    rows past pacing.HORIZON go back to the queue until about when the key is free (counted
    in report.released); a send that cannot start within pacing.LATE of its slot goes to
    unsent. A 429 holds the key for its Retry-After, for every drain: this drain's senders
    start none of its remaining sends (they go to unsent), and this thread writes the hold,
    since only it talks to the database.
    """
    holds: queue.SimpleQueue = queue.SimpleQueue()  # (key, seconds) from the senders' 429s
    paused: dict[str, float] = {}  # key -> time.monotonic() before which none is started

    def throttled(key: str, exc: ChannelError) -> None:
        seconds = exc.retry_after.total_seconds() if exc.retry_after else 1.0
        paused[key] = max(paused.get(key, 0.0), time.monotonic() + seconds)
        holds.put((key, seconds))

    def send(delivery, channel, outgoing, start: float | None = None, key: str | None = None):
        # No send starts that could outlast the deadline: the end of the batch's lease, or a
        # time budget's end when that comes first.
        if deadline is not None:
            wait = 0.0 if start is None else max(start - time.monotonic(), 0.0)
            if time.monotonic() + wait > latest_start[channel.name]:
                return _NotStarted(delivery)
        if key is None:
            # An unpaced send's 429 holds no key: there is none to hold.
            return _send_one(delivery, channel, outgoing, max_attempts=max_attempts)
        wait = max(start - time.monotonic(), 0.0)
        if wait:
            time.sleep(wait)
        now = time.monotonic()
        # Paused by a 429, or too late for the slot (pacing.LATE): given back, unsent.
        if paused.get(key, 0.0) > now or now - start > pacing.LATE:
            return _NotStarted(delivery)
        return _send_one(
            delivery,
            channel,
            outgoing,
            max_attempts=max_attempts,
            throttled=partial(throttled, key),
        )

    ready = _paced(ready, deadline=deadline, unsent=unsent, report=report)
    if deadline is not None:
        # The last moment each channel's send may start, once a batch: its worst case before
        # the deadline.
        latest_start = {
            channel.name: deadline - channel.worst_case.total_seconds()
            for channel in {item[1] for item in ready}
        }
    # A local send finishes at once: handing it to a thread would cost more than the send.
    here = [item for item in ready if item[1].local]
    away = [item for item in ready if not item[1].local]
    if concurrency == 1 or len(away) <= 1:
        # No thread to hand over to: one send after the other, here.
        groups = _on_this_thread(away, send, here=here)
    else:
        groups = _on_senders(pool, away, send, concurrency=concurrency, here=here)
    for group in groups:
        while not holds.empty():
            key, seconds = holds.get()
            try:
                pacing.hold(key, seconds=seconds)
            except DatabaseError as exc:
                logger.warning("could not hold %s for %g s: %s", key, seconds, exc)
        finished = [result for result in group if type(result) is Finished]
        if len(finished) < len(group):
            unsent += [result.delivery for result in group if type(result) is _NotStarted]
        yield finished


def _paced(ready, *, deadline: float | None, unsent: list, report: Report | None) -> list:
    """ready in the order to send it, each paced item with its slot (start, key); the items
    not granted a slot are handed back to the queue here, or go to unsent."""
    # A channel's pace once a batch, not once a row: most rows of a batch share a channel.
    paces = {channel.name: channel.pace() for channel in {item[1] for item in ready}}
    if not any(paces.values()):
        return ready  # most batches: nothing to reserve, every item unpaced and in order
    horizon = pacing.HORIZON
    if deadline is not None:
        horizon = min(horizon, max(deadline - time.monotonic(), 0.0))
    timed, refused = pacing.schedule(
        ready, pace_of=lambda item: paces[item[1].name], horizon=horizon
    )
    for refusal in refused:
        deliveries = [item[0] for item in refusal.items]
        if refusal.delay is None:  # the database did not answer: drain() tries once more
            unsent.extend(deliveries)
            if report is not None:
                report.more_due = False  # and the next claim waits for the tick
            continue
        try:
            back = outbox.release(deliveries, delay=min(refusal.delay, 86_400))
        except DatabaseError as exc:
            logger.warning("could not hand back %d rows: %s", len(deliveries), exc)
            unsent.extend(deliveries)
            continue
        if report is not None:
            report.released += len(back)
            # Claiming again at once would take the next rows of a booked key only to hand
            # them back too: the next claim waits for the tick or a wake-up.
            report.more_due = False
    delays = [r.delay for r in refused if r.delay is not None]
    if delays and not timed:
        # Nothing to send: every row is booked past the horizon by other drains. Claiming
        # again at once would only hand the next rows back too; wait until the soonest key
        # would grant a slot (at most a horizon, never past the deadline).
        wait = min(max(min(delays) - horizon, 0.0), pacing.HORIZON)
        if deadline is not None:
            wait = min(wait, max(deadline - time.monotonic(), 0.0))
        time.sleep(wait)
    return [item if key is None else (*item, start, key) for item, start, key in timed]


def _on_this_thread(items: list, send, *, here: list):
    """Yield [send(*item)] for every item, one after the other, then the local sends in here
    together."""
    for item in items:
        yield [send(*item)]
    yield [send(*item) for item in here]


def _on_senders(pool: ThreadPoolExecutor, items: list, send, *, concurrency: int, here: list):
    """Yield [send(*item)] for every item as they finish, and [] after each FLUSH_EVERY
    without one; the items in here are sent on this thread while the senders work, and
    yielded together.

    concurrency sender loops run on pool, each taking the next item from one shared queue, so
    a slow send holds up one sender and never a share of the batch. (A future per send would
    say the same more briefly, but submitting one costs about as much as a no-op send:
    bench/drain_throughput.py measured a quarter less throughput at batch 100.)"""
    work: queue.SimpleQueue = queue.SimpleQueue()
    for item in items:
        work.put(item)
    done: queue.SimpleQueue = queue.SimpleQueue()

    def sender() -> None:
        while True:
            try:
                item = work.get_nowait()
            except queue.Empty:
                return
            done.put(send(*item))

    for _ in range(min(concurrency, len(items))):
        pool.submit(sender)
    yield [send(*item) for item in here]
    for _ in items:
        while True:
            try:
                result = done.get(timeout=FLUSH_EVERY)
            except queue.Empty:
                yield []
            else:
                yield [result]
                break


def _send_one(
    delivery: ClaimedDelivery,
    channel: Channel,
    outgoing: Outgoing,
    *,
    max_attempts: int,
    throttled=None,
) -> Finished:
    """Send one delivery and say what became of it; throttled(exc) is told of a 429."""
    try:
        result = channel.send(outgoing)
    except ChannelError as exc:
        if exc.throttled and throttled is not None:
            throttled(exc)
        outcome = Outcome.failure(
            delivery,
            code=exc.code,
            message=exc.message,
            retryable=exc.retryable,
            retry_after=exc.retry_after,
            max_attempts=max_attempts,
            # A 429 re-queues the row without spending a send (outbox.Outcome.throttle).
            throttled=exc.throttled,
        )
        return Finished(delivery, outcome, exc.deactivate_address, exc.gone)
    except Exception as exc:
        # A bug or an unexpected failure in a channel costs one attempt of one row, never
        # the batch.
        logger.exception(
            "channel %s raised while sending delivery %s", delivery.channel, delivery.id
        )
        outcome = Outcome.failure(
            delivery,
            code="WORKER_ERROR",
            message=f"{type(exc).__name__}: {exc}",
            retryable=True,
            max_attempts=max_attempts,
        )
        return Finished(delivery, outcome)
    outcome = Outcome.sent(delivery, provider_message_id=result.provider_message_id)
    return Finished(delivery, outcome, False, result.gone)
