"""The outbox's tables, in PostgreSQL schema `notifications`.

`db_table = 'notifications"."x'` makes Django quote it as "notifications"."x": a
schema-qualified name without touching search_path, which PgBouncer would not keep.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

import transports as channels
from core.database import DatabaseNow

# The lane a delivery is claimed on when its sender names no priority (DELIVERY_LANES).
DEFAULT_LANE = "normal"


class Status(models.TextChoices):
    """What a row stores: the states notifications/outbox.py moves it between."""

    PENDING = "pending", _("pending")
    PROCESSING = "processing", _("processing")
    SENT = "sent", _("sent")
    FAILED = "failed", _("failed")
    DEAD = "dead", _("dead")
    # Withdrawn by cancel_notifications() before any drain claimed it: terminal, never sent.
    CANCELLED = "cancelled", _("cancelled")
    # Written at enqueue instead of a pending row, because the recipient cannot or does not
    # want to be reached there (skip_reason says which): terminal, never claimed.
    SKIPPED = "skipped", _("skipped")


class SkipReason(models.TextChoices):
    """Why enqueue wrote a delivery as skipped."""

    # The recipient turned this category off on this channel (their preference centre, or an
    # email's unsubscribe link).
    OPTED_OUT = "opted_out", _("opted out")
    # The recipient has no address on the channel (no email, no Telegram chat id).
    NO_ADDRESS = "no_address", _("no address")
    # The recipient's only address on the channel was turned off (the provider refused it for
    # good, or staff did).
    CHANNEL_OFF = "channel_off", _("address turned off")


class ShownStatus(models.TextChoices):
    """What people read: the stored states, with pending split in two.

    "Retrying" is a pending row that has failed under its current budget (attempts >
    attempt_base): it failed, and will be sent again, whether its backoff is still running or
    has just ended and it waits for the next claim. "Pending" is a pending row that has not
    failed under its current budget: a fresh one, or one a staff member has just retried (a
    Retry starts a fresh budget). Derived, never stored: of() says it for one row, SHOWN (a
    Q each) and SHOWN_SQL (the same predicates for raw statements) for a table, and a test
    holds the three to the same rows.
    """

    PENDING = "pending", _("pending")
    RETRYING = "retrying", _("retrying")
    PROCESSING = "processing", _("processing")
    SENT = "sent", _("sent")
    FAILED = "failed", _("failed")
    DEAD = "dead", _("dead")
    CANCELLED = "cancelled", _("cancelled")
    SKIPPED = "skipped", _("skipped")

    @classmethod
    def of(cls, *, status: str, attempts: int, attempt_base: int) -> ShownStatus:
        """The status people read of a row stored with these values."""
        if status == Status.PENDING and attempts > attempt_base:
            return cls.RETRYING
        return cls(status)


# Every derived state once, as a Q for the ORM and as the same predicate in SQL, on the
# deliveries table's own column names, for the raw statements (notifications/outbox.py,
# stats.py, metrics.py, retention.py, and the apps above that read the table). tests/
# notifications/test_shown_status.py holds each pair to the same rows on a table that has
# every state.
RETRYING = Q(status=Status.PENDING, attempts__gt=models.F("attempt_base"))
RETRYING_SQL = f"(status = '{Status.PENDING}' AND attempts > attempt_base)"
# The rest of pending (attempt_base never passes attempts: a CHECK says so).
WAITING = Q(status=Status.PENDING, attempts=models.F("attempt_base"))
WAITING_SQL = f"(status = '{Status.PENDING}' AND attempts = attempt_base)"
# Pending rows whose time has come, by the database clock: what a claim may take.
DUE = Q(status=Status.PENDING, next_attempt_at__lte=DatabaseNow())
DUE_SQL = f"(status = '{Status.PENDING}' AND next_attempt_at <= now())"
# The states no drain moves a row out of again (only a staff Retry does, and not out of
# cancelled): what pruning deletes.
FINISHED_STATUSES = (Status.SENT, Status.FAILED, Status.DEAD, Status.CANCELLED, Status.SKIPPED)
FINISHED = Q(status__in=FINISHED_STATUSES)
FINISHED_SQL = "(status IN ({}))".format(", ".join(f"'{s}'" for s in FINISHED_STATUSES))


def _unwatched_channels() -> list[str]:
    """The configured channels whose dead rows nobody need look at (Channel.needs_attention
    False: a showcase's, whose rows die because a visitor asked them to), by name."""
    return sorted(name for name, c in channels.configured().items() if not c.needs_attention)


# Dead rows: a transient fault outlived the budget, and a human should look, but on a channel
# that says its dead rows need nobody. Functions, not constants like the states above: they
# read the configured channels, which the settings (and a test's override) decide.
def needs_attention() -> Q:
    unwatched = _unwatched_channels()
    dead = Q(status=Status.DEAD)
    return dead & ~Q(channel__in=unwatched) if unwatched else dead


def needs_attention_sql() -> str:
    """needs_attention() for raw statements. Channel names are settings keys, quoted here as
    SQL literals (a quote doubled), so no name can end the literal."""
    unwatched = ", ".join("'{}'".format(name.replace("'", "''")) for name in _unwatched_channels())
    if not unwatched:
        return f"(status = '{Status.DEAD}')"
    return f"(status = '{Status.DEAD}' AND channel NOT IN ({unwatched}))"


# Each ShownStatus as a Q and as SQL: pending and retrying derived, the others as stored.
SHOWN = {
    **{ShownStatus(s): Q(status=s) for s in Status},
    ShownStatus.PENDING: WAITING,
    ShownStatus.RETRYING: RETRYING,
}
SHOWN_SQL = {
    **{ShownStatus(s): f"(status = '{s}')" for s in Status},
    ShownStatus.PENDING: WAITING_SQL,
    ShownStatus.RETRYING: RETRYING_SQL,
}
# A row's ShownStatus, as an SQL expression (to group by).
SHOWN_STATUS_SQL = f"CASE WHEN {RETRYING_SQL} THEN '{ShownStatus.RETRYING}' ELSE status END"

# What one send's outcome leaves a row as, named as people read it: the drain's counts, the
# sends /metrics counts and the dashboard's hourly chart. A send that failed and will be tried
# again leaves the row pending with attempts past attempt_base, which reads as retrying.
OUTCOMES = {
    Status.SENT: ShownStatus.SENT,
    Status.PENDING: ShownStatus.RETRYING,
    Status.FAILED: ShownStatus.FAILED,
    Status.DEAD: ShownStatus.DEAD,
}


# With a context: the channels' address checks have a "broadcast" of their own (an address).
BROADCAST_NAME = pgettext_lazy("a message to an audience", "broadcast")


class BroadcastState(models.TextChoices):
    """What people read of a broadcast: derived from its chunks, never stored
    (BroadcastQuerySet.with_state). A failed chunk is named before chunks still waiting,
    because it is the one that needs someone to look."""

    EXPANDING = "expanding", _("expanding")
    EXPANDED = "expanded", _("expanded")
    FAILED = "failed", _("has failed chunks")
    CANCELLED = "cancelled", _("cancelled")


class BroadcastQuerySet(models.QuerySet):
    def with_state(self):
        """Each broadcast's BroadcastState, as `state`.

        Two EXISTS probes per broadcast through the chunks' (broadcast, number) index: it
        reads the broadcast's chunk rows, never its notifications or deliveries."""
        chunks = BroadcastChunk.objects.filter(broadcast=models.OuterRef("pk"))
        unfinished = [ChunkStatus.PENDING, ChunkStatus.EXPANDING]
        return self.annotate(
            state=models.Case(
                models.When(
                    cancelled_at__isnull=False, then=models.Value(BroadcastState.CANCELLED)
                ),
                models.When(
                    models.Exists(chunks.filter(status=ChunkStatus.FAILED)),
                    then=models.Value(BroadcastState.FAILED),
                ),
                models.When(
                    models.Exists(chunks.filter(status__in=unfinished)),
                    then=models.Value(BroadcastState.EXPANDING),
                ),
                default=models.Value(BroadcastState.EXPANDED),
                output_field=models.CharField(),
            )
        )

    def with_progress(self):
        """with_state(), and `expanded`: how many of its recipients the drains have expanded,
        the sizes of its done chunks added up.

        The chunks table answers it in the same statement, for the rows the statement
        returns: the cost is the arrays of those broadcasts' chunks (about 4 bytes a
        recipient), however many deliveries they made."""
        sizes = (
            BroadcastChunk.objects.filter(broadcast=models.OuterRef("pk"), status=ChunkStatus.DONE)
            .order_by()
            .values("broadcast")
            .annotate(size=models.Sum(models.Func(models.F("user_ids"), function="cardinality")))
            .values("size")
        )
        return self.with_state().annotate(
            expanded=Coalesce(models.Subquery(sizes, output_field=models.BigIntegerField()), 0)
        )


class Broadcast(models.Model):
    """One message to every member of an audience (notifications/broadcasts.py): its members
    are fixed, in chunks, when it is queued, and the drains expand each chunk into one
    notification a recipient, decided by their own choices as send_notification decides."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    audience = models.ForeignKey(
        "recipients.Audience",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("audience"),
    )
    # What it was sent to, in words: kept when the audience is deleted or renamed.
    audience_label = models.CharField(_("sent to"), max_length=200)
    type = models.CharField(_("type"), max_length=64)
    message_params = models.JSONField(_("parameters"), default=dict, blank=True)
    # The channels named by the sender; null: each recipient's own.
    channels = models.JSONField(_("channels"), null=True, blank=True)
    action_url = models.CharField(_("link"), max_length=500, blank=True, default="")
    lane = models.CharField(_("lane"), max_length=32, default=DEFAULT_LANE)
    send_at = models.DateTimeField(_("send at"), null=True, blank=True)
    cancel_key = models.CharField(_("cancel key"), max_length=200, blank=True, default="")
    recipients = models.PositiveIntegerField(_("recipients"), default=0)
    created_at = models.DateTimeField(_("created"), db_default=DatabaseNow())
    cancelled_at = models.DateTimeField(_("cancelled"), null=True, blank=True)

    objects = BroadcastQuerySet.as_manager()

    class Meta:
        db_table = 'notifications"."broadcasts'
        verbose_name = BROADCAST_NAME
        verbose_name_plural = _("broadcasts")
        ordering = ["-created_at"]
        permissions = [("cancel_broadcast", _("Can cancel a broadcast"))]

    def __str__(self) -> str:
        return f"{self.type} → {self.audience_label}"


class ChunkStatus(models.TextChoices):
    PENDING = "pending", _("pending")
    EXPANDING = "expanding", _("expanding")
    DONE = "done", _("expanded")
    CANCELLED = "cancelled", _("cancelled")
    # Its expansion failed DELIVERY_MAX_ATTEMPTS times (error says why): staff look at it.
    FAILED = "failed", _("failed")


class BroadcastChunk(models.Model):
    """Some of a broadcast's recipients, expanded by one drain in one transaction: claimed
    and fenced like a delivery (attempts), put back by the reaper when its drain goes quiet."""

    id = models.BigAutoField(primary_key=True)
    broadcast = models.ForeignKey(
        Broadcast, on_delete=models.CASCADE, related_name="chunks", verbose_name=BROADCAST_NAME
    )
    number = models.PositiveIntegerField(_("number"))
    user_ids = ArrayField(models.IntegerField(), verbose_name=_("recipients"))
    lane = models.CharField(_("lane"), max_length=32, default=DEFAULT_LANE)
    status = models.CharField(
        _("status"), max_length=16, choices=ChunkStatus.choices, default=ChunkStatus.PENDING
    )
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    # The attempts before staff last sent a failed chunk back: the budget counts the ones
    # since, while the fence (attempts) keeps counting up.
    attempt_base = models.PositiveIntegerField(_("attempts not counted"), default=0)
    claimed_at = models.DateTimeField(_("claimed"), null=True, blank=True)
    expanded_at = models.DateTimeField(_("expanded"), null=True, blank=True)
    error = models.TextField(_("error"), blank=True, default="")

    class Meta:
        db_table = 'notifications"."broadcast_chunks'
        verbose_name = _("broadcast chunk")
        verbose_name_plural = _("broadcast chunks")
        constraints = [
            models.UniqueConstraint(fields=["broadcast", "number"], name="broadcast_chunks_once")
        ]
        indexes = [
            # The expanders' claim and the reaper: only the chunks still to do.
            models.Index(
                fields=["status", "id"],
                condition=Q(status__in=["pending", "expanding"]),
                name="broadcast_chunks_open",
            )
        ]

    def __str__(self) -> str:
        return f"{self.broadcast_id} #{self.number}"


class Notification(models.Model):
    """One thing to tell one user, stored locale-neutral: rendered per recipient at send time."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="notifications",
        verbose_name=_("recipient"),
    )
    type = models.CharField(_("type"), max_length=64)
    message_key = models.CharField(_("message"), max_length=100)
    message_params = models.JSONField(_("parameters"), default=dict, blank=True)
    action_url = models.CharField(_("link"), max_length=500, blank=True)
    created_at = models.DateTimeField(_("created"), db_default=DatabaseNow())
    read_at = models.DateTimeField(_("read"), null=True, blank=True)
    archived_at = models.DateTimeField(_("archived"), null=True, blank=True)
    # When the in-app channel delivered it: the notification is in its recipient's inbox from
    # then on (null: not, or not yet). Written by the inapp channel's send, on the database
    # clock, so the inbox's order and its keyset pages read one column.
    inbox_at = models.DateTimeField(_("in the inbox since"), null=True, blank=True)
    # The sender's name for this notification, so that it can withdraw it before it is sent
    # (enqueue.cancel_notifications): "order-42-reminder". Empty: it cannot be cancelled.
    cancel_key = models.CharField(
        _("cancel key"), max_length=200, blank=True, default="", db_default=""
    )
    # The broadcast it was expanded from (null: sent on its own). With the user, its key: a
    # chunk expanded twice makes each recipient's notification once.
    broadcast = models.ForeignKey(
        Broadcast,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_index=False,
        related_name="notifications",
        verbose_name=BROADCAST_NAME,
    )

    class Meta:
        db_table = 'notifications"."notifications'
        constraints = [
            models.UniqueConstraint(
                fields=["broadcast", "user"],
                condition=Q(broadcast__isnull=False),
                name="notifications_broadcast_once",
            )
        ]
        verbose_name = _("notification")
        verbose_name_plural = _("notifications")
        indexes = [
            models.Index(fields=["user", "-created_at"], name="notifications_user_recent"),
            models.Index(fields=["-created_at"], name="notifications_recent"),
            # cancel_notifications(key=…, user=…): only the notifications that have a key.
            models.Index(
                fields=["cancel_key", "user"],
                condition=~Q(cancel_key=""),
                name="notifications_cancel_key",
            ),
            # The inbox's pages, newest first, keyset on (inbox_at, id): archived ones leave it.
            models.Index(
                fields=["user", "-inbox_at", "-id"],
                condition=Q(inbox_at__isnull=False, archived_at__isnull=True),
                name="notifications_inbox",
            ),
            # The unread badge: counted from this index alone.
            models.Index(
                fields=["user", "-inbox_at"],
                condition=Q(inbox_at__isnull=False, archived_at__isnull=True, read_at__isnull=True),
                name="notifications_inbox_unread",
            ),
        ]

    def __str__(self) -> str:
        # Words-free, like a delivery's: the type, and the recipient's user id.
        return f"{self.type} → #{self.user_id}"


class DeliveryQuerySet(models.QuerySet):
    def due(self):
        """Pending rows whose time has come, by the database clock."""
        return self.filter(DUE)

    def retrying(self):
        """Pending rows that failed under their current budget (ShownStatus.RETRYING)."""
        return self.filter(RETRYING)

    def waiting(self):
        """Pending rows that have not failed under their current budget (ShownStatus.PENDING)."""
        return self.filter(WAITING)

    def shown(self, status: str):
        """Rows people read as status, one of ShownStatus."""
        return self.filter(SHOWN[ShownStatus(status)])

    def finished(self):
        """Rows no drain will move again: sent, failed and dead."""
        return self.filter(FINISHED)

    def needs_attention(self):
        """Dead rows, but on channels whose dead rows need nobody (needs_attention())."""
        return self.filter(needs_attention())


class NotificationDelivery(models.Model):
    """One notification on one channel: the queue row that drain_outbox claims and sends.

    Only notifications/outbox.py moves a row between states.
    """

    id = models.BigAutoField(primary_key=True)
    notification = models.ForeignKey(
        Notification,
        on_delete=models.CASCADE,
        related_name="deliveries",
        # The unique (notification, channel) index starts with this column already.
        db_index=False,
        verbose_name=_("notification"),
    )
    channel = models.CharField(_("channel"), max_length=32)
    # The claim's lane (DELIVERY_LANES): higher lanes are claimed first.
    lane = models.CharField(_("lane"), max_length=32, default=DEFAULT_LANE, db_default=DEFAULT_LANE)
    status = models.CharField(
        _("status"),
        max_length=16,
        choices=Status.choices,
        default=Status.PENDING,
        db_default=Status.PENDING,
    )
    # Claims so far; bumped by each claim and returned with it as the fencing token.
    attempts = models.PositiveIntegerField(_("attempts"), default=0, db_default=0)
    # The claims that do not count against the budget: those before the last staff Retry,
    # and those handed back unsent (a time-boxed drain that ran out of time). The budget
    # counts attempts - attempt_base, while the fence keeps counting up, so no fence value is
    # ever handed out twice.
    attempt_base = models.PositiveIntegerField(
        _("attempts not counted against the budget"), default=0, db_default=0
    )
    # Claims whose lease ran out before their drain reported (the reaper's requeues): each may
    # have sent the message. A row cancelled or sent with any says so, since the recipient may
    # have it already, or twice.
    unreported_claims = models.PositiveIntegerField(
        _("claims that ended without a report"), default=0, db_default=0
    )
    # The provider's 429s so far: each handed the row back for later without spending a send
    # (attempt_base moves up with attempts); DELIVERY_MAX_THROTTLES of them make it dead.
    throttles = models.PositiveIntegerField(_("throttled"), default=0, db_default=0)
    next_attempt_at = models.DateTimeField(_("next attempt"), db_default=DatabaseNow())
    attempted_at = models.DateTimeField(_("last attempt"), null=True, blank=True)
    sent_at = models.DateTimeField(_("sent at"), null=True, blank=True)
    provider_message_id = models.CharField(
        _("provider's message id"), max_length=255, blank=True, default="", db_default=""
    )
    error_code = models.CharField(
        _("error code"), max_length=64, blank=True, default="", db_default=""
    )
    error_message = models.TextField(_("error message"), blank=True, default="", db_default="")
    # Why the row was written as skipped (SkipReason); empty for every other row.
    skip_reason = models.CharField(
        _("why skipped"),
        max_length=32,
        choices=SkipReason.choices,
        blank=True,
        default="",
        db_default="",
    )
    # When the recipient's quiet hours held the row back at enqueue, until when (the end of
    # the window; next_attempt_at was set to it). Null: no quiet hours were in the way.
    held_until = models.DateTimeField(_("held by quiet hours until"), null=True, blank=True)
    # The recipient's ChoicesVersion its channel was decided under (enqueue, or a digest's
    # join): a claim that finds the recipient's version higher reads their choices again.
    decided_version = models.PositiveBigIntegerField(
        _("decided under choices version"), default=0, db_default=0
    )
    # When a held row was due before quiet hours held it (its send_at, its digest window's
    # end, or the moment a drain found it inside the window): where it goes back to when the
    # recipient clears or moves their quiet hours (outbox.release_held).
    held_from = models.DateTimeField(_("due before quiet hours held it"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), db_default=DatabaseNow())

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        db_table = 'notifications"."notification_deliveries'
        verbose_name = _("delivery")
        verbose_name_plural = _("deliveries")
        permissions = [("retry_delivery", _("Can retry a dead or failed delivery"))]
        constraints = [
            # The idempotency key: enqueueing the same notification on a channel twice
            # makes one row.
            models.UniqueConstraint(
                fields=["notification", "channel"], name="deliveries_one_per_channel"
            ),
            models.CheckConstraint(
                condition=Q(status__in=Status.values), name="deliveries_status_known"
            ),
            models.CheckConstraint(
                condition=Q(attempt_base__lte=models.F("attempts")),
                name="deliveries_attempt_base_not_ahead",
            ),
            # A reason exactly when skipped, so a count by reason is a count of skipped rows.
            models.CheckConstraint(
                condition=Q(status=Status.SKIPPED, skip_reason__in=SkipReason.values)
                | (~Q(status=Status.SKIPPED) & Q(skip_reason="")),
                name="deliveries_skip_reason_when_skipped",
            ),
        ]
        indexes = [
            # The claim, one range per lane: WHERE status = 'pending' AND lane = %s AND
            # next_attempt_at <= now() ORDER BY next_attempt_at, created_at, id. With the
            # lane first, each lane is its own stretch of the index, so a backlog on one lane
            # is never scanned to reach another's rows.
            models.Index(
                fields=["lane", "next_attempt_at", "created_at", "id"],
                condition=Q(status="pending"),
                name="deliveries_claim",
            ),
            # The reaper: WHERE status = 'processing' AND attempted_at < now() - lease.
            models.Index(
                fields=["attempted_at"],
                condition=Q(status="processing"),
                name="deliveries_reap",
            ),
            # The admin's lists, newest first, without sorting a million rows.
            models.Index(fields=["-created_at", "-id"], name="deliveries_recent"),
            # The dashboard's last 24 hours: channel health and deliveries per hour. It carries
            # every column those two count by, so they read the index alone (an index-only
            # scan) and never visit the table's pages, which at 10 M rows is 6× faster.
            models.Index(
                fields=["attempted_at"],
                include=["channel", "status", "attempts", "attempt_base"],
                name="deliveries_attempted",
            ),
            # Staff searching by error code.
            models.Index(
                fields=["error_code"], condition=~Q(error_code=""), name="deliveries_error_code"
            ),
            # "Needs Attention", the failed list and the pending/retrying filters, newest first;
            # the pending and retrying counts too (ShownStatus: the two halves of pending).
            models.Index(
                fields=["-created_at", "-id"], condition=WAITING, name="deliveries_waiting"
            ),
            models.Index(
                fields=["-created_at", "-id"], condition=RETRYING, name="deliveries_retrying"
            ),
            # Needs attention leaves out the channels whose dead rows need nobody, and the admin
            # counts it on every page; the failed list offers its error codes as a filter;
            # /metrics counts both states per channel. The columns they need are carried, so
            # each is read from the index alone.
            models.Index(
                fields=["-created_at", "-id"],
                include=["channel"],
                condition=Q(status="dead"),
                name="deliveries_dead",
            ),
            models.Index(
                fields=["-created_at", "-id"],
                include=["error_code", "channel"],
                condition=Q(status="failed"),
                name="deliveries_failed",
            ),
            # The cancelled count and the admin's cancelled filter, like the other states'.
            models.Index(
                fields=["-created_at", "-id"],
                condition=Q(status="cancelled"),
                name="deliveries_cancelled",
            ),
            # The skipped count by reason (/metrics, the dashboard) and the admin's filter.
            models.Index(
                fields=["-created_at", "-id"],
                include=["skip_reason", "channel"],
                condition=Q(status="skipped"),
                name="deliveries_skipped",
            ),
        ]

    def __str__(self) -> str:
        # No words and no status: the admin's history stores this once, at the time of the
        # change, for staff reading it later in any language and after the status has moved.
        return f"#{self.pk} · {self.channel}"

    @property
    def shown_status(self) -> ShownStatus:
        """The status people read (see ShownStatus)."""
        return ShownStatus.of(
            status=self.status, attempts=self.attempts, attempt_base=self.attempt_base
        )


class NeedsAttention(NotificationDelivery):
    """Dead deliveries: the admin's "Needs Attention" list, where staff retry them."""

    class Meta:
        proxy = True
        verbose_name = _("delivery needing attention")
        verbose_name_plural = _("Needs attention")


class FailedDelivery(NotificationDelivery):
    """Deliveries that failed for good (bad address, refused): listed apart, no Retry."""

    class Meta:
        proxy = True
        verbose_name = _("failed delivery")
        verbose_name_plural = _("Failed deliveries")


class ProviderRate(models.Model):
    """When a provider (an API key, a bot, an endpoint) may next be sent to: the drains'
    shared pacing, written in raw SQL by notifications/pacing.py."""

    key = models.CharField(max_length=200, primary_key=True)
    next_slot_at = models.DateTimeField(db_default=DatabaseNow())
    updated_at = models.DateTimeField(db_default=DatabaseNow())

    class Meta:
        db_table = 'notifications"."provider_rates'

    def __str__(self) -> str:
        return f"{self.key}: next at {self.next_slot_at}"


# The in-app channel's name: it delivers to the recipient's inbox on this site, which every
# account has (notifications/inapp.py, notifications/inbox.py).
INAPP = "inapp"


class DigestItem(models.Model):
    """One notification gathered into a digest: the carrier, a delivery like any other (its
    notification's type is "digest"), which renders its items when it is sent.

    Written by notifications/digests.py inside the enqueuing transaction, and only while the
    carrier is pending and was never claimed, so what a carrier sends is fixed by its first
    claim: a retry sends the same items again, and a later notification joins the next window.
    """

    # Both keys' constraints are made by migration 0009, with ON DELETE CASCADE: pruning
    # deletes carriers and notifications in raw SQL, and their items go with them. (Django's
    # DB_CASCADE would say so here, but it may not point at a model that others delete with
    # Python's CASCADE, as Notification's deliveries are.)
    carrier = models.ForeignKey(
        NotificationDelivery,
        on_delete=models.CASCADE,
        related_name="digest_items",
        verbose_name=_("digest"),
        db_constraint=False,
        # The primary key (carrier, notification) starts with this column already.
        db_index=False,
    )
    notification = models.ForeignKey(
        Notification,
        on_delete=models.CASCADE,
        related_name="digest_items",
        verbose_name=_("notification"),
        db_constraint=False,
    )
    pk = models.CompositePrimaryKey("carrier", "notification")
    # The moment it joined, by the clock, not the transaction's start: items joined in one
    # transaction still come out in the order they joined (newest first).
    joined_at = models.DateTimeField(
        _("joined"),
        db_default=models.Func(function="clock_timestamp", output_field=models.DateTimeField()),
    )

    class Meta:
        db_table = 'notifications"."digest_items'
        verbose_name = _("digest item")
        verbose_name_plural = _("digest items")

    def __str__(self) -> str:
        return f"#{self.carrier_id} ∋ {self.notification_id}"


class ThrottleCount(models.Model):
    """How many notifications of one category a recipient has been sent one by one in one
    throttle window (NOTIFICATION_THROTTLES); past the limit they fold into a digest due at
    the window's end. Written by notifications/digests.py in raw SQL; pruned a day after."""

    pk = models.CompositePrimaryKey("user", "category", "window_end")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    category = models.CharField(max_length=64)
    window_end = models.DateTimeField()
    sent = models.PositiveIntegerField(db_default=0)

    class Meta:
        db_table = 'notifications"."throttle_counts'
        indexes = [models.Index(fields=["window_end"], name="throttle_counts_window_end")]

    def __str__(self) -> str:
        return f"#{self.user_id} {self.category} until {self.window_end}: {self.sent}"


class DrainHeartbeat(models.Model):
    """The last tick of one drain loop (or of the cron trigger), so "running" is a fact."""

    worker = models.CharField(max_length=200, primary_key=True)
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField(null=True, blank=True)
    interval_seconds = models.FloatField()
    started_at = models.DateTimeField(db_default=DatabaseNow())
    ticked_at = models.DateTimeField(db_default=DatabaseNow())
    stopped_at = models.DateTimeField(null=True, blank=True)
    last_report = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = 'notifications"."drain_heartbeats'

    def __str__(self) -> str:
        return self.worker


# Where pruning's walks start when nothing has been pruned yet: before any row.
_BEFORE_ANY_ROW = datetime(1970, 1, 1, tzinfo=UTC)


class OutboxRetention(models.Model):
    """Pruning's state, one row (id 1): where each walk has got to, the run under way, the
    last run's report. Written only by notifications/retention.py, in raw SQL."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    sent_after_at = models.DateTimeField(db_default=models.Value(_BEFORE_ANY_ROW))
    sent_after_id = models.BigIntegerField(db_default=0)
    finished_after_at = models.DateTimeField(db_default=models.Value(_BEFORE_ANY_ROW))
    finished_after_id = models.BigIntegerField(db_default=0)
    running_since = models.DateTimeField(null=True)
    # When the run under way last committed a batch: a run silent for STALE_RUN has died.
    alive_at = models.DateTimeField(null=True)
    last_started_at = models.DateTimeField(null=True)
    last_finished_at = models.DateTimeField(null=True)
    last_report = models.JSONField(db_default=models.Value("{}", models.JSONField()))

    class Meta:
        db_table = 'notifications"."outbox_retention'
        constraints = [models.CheckConstraint(condition=Q(id=1), name="outbox_retention_one_row")]

    def __str__(self) -> str:
        return f"retention: last finished {self.last_finished_at}"


class DrainMetric(models.Model):
    """One process's running total of one number for /metrics (notifications/metrics.py): a
    counter, or a histogram's bucket, sum or count. Only ever added to, in raw SQL."""

    pk = models.CompositePrimaryKey("worker", "metric", "label")
    worker = models.CharField(max_length=200)
    metric = models.CharField(max_length=64)
    label = models.CharField(max_length=200, blank=True)
    value = models.FloatField(db_default=0)
    updated_at = models.DateTimeField(db_default=DatabaseNow())

    class Meta:
        db_table = 'notifications"."drain_metrics'

    def __str__(self) -> str:
        return f"{self.worker} {self.metric}{{{self.label}}} = {self.value}"
