"""The project's settings with the email channel replaced by one that sends nothing
(bench/noop.py's NoopEmailChannel), for bench/broadcast.py and the drains it starts: a
broadcast's recipients are decided as for real email, and draining them measures the queue,
not an SMTP server."""

from __future__ import annotations

from v10r import settings as project

# Every setting of the project's, by name, as bench/post_office_settings.py copies them.
globals().update({name: value for name, value in vars(project).items() if name.isupper()})

DELIVERY_CHANNELS = {**project.DELIVERY_CHANNELS, "email": "bench.noop.NoopEmailChannel"}
