"""Processes warm the palette's Numba loops before they serve, for the signatures requests use.

Never a time: what is checked is that the compiled signatures are in place before the first
request, and that the first request adds none.
"""

from __future__ import annotations

import json
import logging
import os

from django.conf import settings

from notifications.models import NotificationDelivery, Status
from showcases import palette
from tests.helpers import database_url, make_deliveries, python

# In a fresh interpreter: import the WSGI application as gunicorn does, note each loop's
# signatures, analyse a real upload of each format (one big enough to be shrunk), note them
# again. Numba compiles once per signature, so a request that needs a new one adds it.
SIGNATURES_AROUND_A_REQUEST = """
import io, json
import numpy as np
from PIL import Image
import v10r.wsgi
from showcases import analysis, palette

loops = {"histogram": palette._histogram, "merge": palette._merge,
         "luminance": palette._luminance_sums}
def signatures():
    return {name: sorted(map(str, loop.signatures)) for name, loop in loops.items()}

at_start = signatures()
rng = np.random.default_rng(3)
for size, fmt in [((64, 48), "PNG"), ((64, 48), "WEBP"), ((1600, 1200), "JPEG")]:
    pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    assert analysis.analyse(buffer.getvalue())["swatches"]
print(json.dumps({"at_start": at_start, "after_requests": signatures()}))
"""


def test_the_wsgi_application_warms_every_signature_a_request_uses():
    ran = python("-c", SIGNATURES_AROUND_A_REQUEST, env=dict(os.environ))
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert all(seen["at_start"].values()), seen
    assert seen["after_requests"] == seen["at_start"]


def test_runserver_serves_the_application_that_warms():
    # runserver (and so `make run`) loads WSGI_APPLICATION before it serves; another
    # application there would skip v10r/wsgi.py's warm-up.
    assert settings.WSGI_APPLICATION == "v10r.wsgi.application"


def test_drain_outbox_drains_without_importing_numpy_or_numba(
    transactional_db, django_user_model, smtp_server
):
    # The drain analyses no image: NumPy and Numba would cost it a second of start-up and
    # some 150 MB of memory per process. Web processes warm the palette (v10r/wsgi.py). Run as
    # an operator runs it, system checks and all; the row it sends proves it got that far.
    [delivery] = make_deliveries(
        django_user_model.objects.create_user("ada", email="ada@example.com"), 1, channel="email"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DELIVERY_", "EMAIL_"))}
    env |= {
        "DATABASE_URL": database_url(),
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_server.port),
    }
    ran = python("-X", "importtime", "manage.py", "drain_outbox", "--once", env=env)
    assert ran.returncode == 0, ran.stderr
    assert NotificationDelivery.objects.get(pk=delivery).status == Status.SENT
    imported = {
        line.rpartition("|")[2].strip()
        for line in ran.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert {"django", "notifications.worker"} <= imported
    assert {"numpy", "numba", "showcases.palette", "showcases.analysis"} & imported == set()


def test_a_failing_warm_up_is_logged_and_does_not_raise(monkeypatch, caplog):
    def broken(flat):
        raise RuntimeError("no compiler today")

    monkeypatch.setattr(palette, "_histogram", broken)
    with caplog.at_level(logging.WARNING, logger="showcases.palette"):
        palette.warm()
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "no compiler today" in str(record.exc_info[1])
