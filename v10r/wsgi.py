"""WSGI entry point: `gunicorn v10r.wsgi`."""

import os
import sys

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "v10r.settings")

try:
    application = get_wsgi_application()
except ImproperlyConfigured as error:
    # A bad setting is the operator's to fix: the line that says how, not a traceback. 4 is
    # gunicorn's exit status for an app that failed to load: its master then stops, instead
    # of starting worker after worker that can only fail the same way. (With
    # deploy/gunicorn.conf.py the master checks the settings before it starts any.)
    print(error, file=sys.stderr, flush=True)
    raise SystemExit(4) from None

# Every gunicorn worker, and runserver (through WSGI_APPLICATION), imports this module before
# it serves: the palette's first analysis is paid here, not by a visitor. Only on a site with
# the showcase (V10R_SHOWCASES), whose pages it serves.
if apps.is_installed("showcases"):
    from showcases import palette

    palette.warm()
