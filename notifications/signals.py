"""Signals that let other apps take part in the queue's housekeeping without the queue
knowing them.

outbox_idle: sent with no sender by the housekeeping job (jobs/tasks.py, every five minutes,
one run at a time under the jobs runner's lease). Its name is older than that: the drain's
idle tick sent it once, but the drain now keeps only the reaper, and every other periodic
duty is a job. A receiver deletes what its own app left behind, a bounded amount
(core/pruning.py), and returns how many rows of each kind it deleted, as {"kind": count}; the
counts are the job run's result. Receivers connect in their AppConfig.ready() with a
dispatch_uid. One that raises is logged and the others run.
"""

from django.dispatch import Signal

outbox_idle = Signal()
