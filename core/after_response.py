"""Work done once a response has been sent, on the thread that served it.

A WSGI server calls the response's close() after writing its last byte (PEP 3333), and Django's
test client and development server do the same: work hung there is done every time the
response is, without the client waiting for it. It is for work whose duration must not show in
the answer's (the password reset's lookup and email, which only known addresses cost): the
client cannot tell how long it took.

The thread is still the request's until the work ends, so nothing is lost when gunicorn
stops gracefully (it finishes its requests first); a request nginx sends down the same upstream
connection meanwhile waits those milliseconds. A failure is logged with its traceback: Django's
close() would swallow it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpResponse

logger = logging.getLogger(__name__)


def defer(response: HttpResponse, work: Callable[[], None]) -> HttpResponse:
    """Run work when response is closed, once sent; return response."""

    def run() -> None:
        try:
            work()
        except Exception:
            logger.exception("Work after the response failed")

    # HttpResponse's own list of what close() calls (FileResponse closes its file there); it
    # runs before close() sends request_finished, so the database connection is still open.
    response._resource_closers.append(run)
    return response
