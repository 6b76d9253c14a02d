"""WSGI entry point: `gunicorn v10r.wsgi`."""

import os

from django.core.wsgi import get_wsgi_application

from showcases import palette

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "v10r.settings")

application = get_wsgi_application()

# Every gunicorn worker, and runserver (through WSGI_APPLICATION), imports this module before
# it serves: the palette's first analysis is paid here, not by a visitor.
palette.warm()
