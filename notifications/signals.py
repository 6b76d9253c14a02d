"""Signals the queue sends, so that other apps can act on its rhythm without the queue
knowing them.

outbox_idle: sent by the drain worker when the queue rests (an idle tick of the loop, a cron
drain that emptied the queue, `manage.py housekeeping`), at most once every
worker.TIDY_EVERY per worker. A receiver deletes what its own app left behind, a bounded
amount (core/pruning.py), and returns how many rows of each kind it deleted, as
{"kind": count}; the counts go to the log and to the cron's answer. Receivers connect in
their AppConfig.ready() with a dispatch_uid. One that raises is logged and the others run.
"""

from django.dispatch import Signal

outbox_idle = Signal()
