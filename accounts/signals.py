"""Signing out turns off the push subscription this session made, so the next person to use
the browser is not sent the last one's notifications (accounts/push_views.py remembers it)."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from accounts.push_views import SESSION_ENDPOINT
from recipients import subscriptions


@receiver(user_logged_out, dispatch_uid="accounts.push_off_on_sign_out")
def push_off_on_sign_out(sender, request, user, **kwargs) -> None:
    # Sent before the session is flushed, so what it remembers is still there.
    endpoint = request.session.get(SESSION_ENDPOINT) if request is not None else None
    if user is not None and endpoint:
        subscriptions.unsubscribe(user, endpoint=endpoint)
