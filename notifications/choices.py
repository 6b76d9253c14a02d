"""What a recipient's change of choices does to what is already queued, at once.

The recipients' rules bump a version with every change (recipients/preferences.py), and each
claim decides again the rows decided under an older one: skipped when no longer wanted, held
when quiet hours now hold them. What a change makes due sooner cannot wait for a claim, since
no claim looks at a row before it is due; these receivers apply it in the saving transaction,
so the change and its effect on the queue commit together.
"""

from __future__ import annotations

from notifications import outbox
from recipients import preferences
from recipients.windows import Digest, window


def recipient_saved(sender, instance, **kwargs) -> None:
    """Quiet hours (or the zone they are read in) may have changed: release every row they
    hold, for the claim to hold again under the new ones."""
    outbox.release_held(user_id=instance.user_id)


def digest_saved(sender, instance, **kwargs) -> None:
    """A digest chosen anew: what its open window gathered is sent by the new window's end,
    if that comes sooner."""
    digest = Digest(instance.cadence, instance.hour, instance.weekday)
    end = window(digest, time_zone=preferences.of(instance.user_id).time_zone).end
    outbox.hasten_carriers(user_id=instance.user_id, category=instance.category, due=end)


def digest_dropped(sender, instance, **kwargs) -> None:
    """The category comes as it happens again: what its open window gathered is sent now."""
    outbox.hasten_carriers(user_id=instance.user_id, category=instance.category, due=None)
