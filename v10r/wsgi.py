"""WSGI entry point: `gunicorn v10r.wsgi`."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "v10r.settings")

application = get_wsgi_application()
