from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError
from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from v10r import clients, ratelimit

# Wrong sign-ins before the form refuses to check passwords for a while. Per client address
# (an IPv6 /64), which stops one guesser; and per username, higher, which slows guessers
# spread over many addresses without letting one of them lock a staff member out cheaply.
LOGIN_FAILURES_PER_CLIENT = 10
LOGIN_FAILURES_PER_USERNAME = 50
LOGIN_WINDOW = timedelta(minutes=15)


class ThrottledLoginForm(AdminAuthenticationForm):
    """The admin's login form, with failed attempts counted in the site's rate limiter.

    The limiter is the PostgreSQL one every other limit uses, so the count holds across
    processes and hosts, and the client is identified the same way (v10r/clients.py), which
    is why this is not django-axes: that would bring its own tables, middleware and notion of
    the client address for one form."""

    def clean(self):
        # Counted before the password is checked, or a burst of concurrent guesses would all
        # pass the check before any of them counted. Only a password actually checked and
        # wrong stays counted: a refused attempt takes its hits back (else one client, once
        # refused, could go on charging the username's count and lock its owner out), and so
        # does a right one.
        keys = self._keys()
        charged = []
        for key, limit in keys:
            verdict = ratelimit.hit(key=key, limit=limit, window=LOGIN_WINDOW)
            charged.append(key)
            if not verdict.allowed:
                self._forgive(charged)
                raise ValidationError(
                    _("Too many failed sign-ins. Try again in %(minutes)d min.")
                    % {"minutes": -(-verdict.retry_after_seconds // 60)},
                    code="throttled",
                )
        cleaned = super().clean()
        self._forgive(charged)
        return cleaned

    @staticmethod
    def _forgive(keys: list[str]) -> None:
        for key in keys:
            ratelimit.forgive(key=key)

    def _keys(self) -> list[tuple[str, int]]:
        username = (self.cleaned_data.get("username") or "").casefold()
        return [
            # The client first: a client already refused never reaches the username's count.
            (f"login:{clients.address(self.request)}", LOGIN_FAILURES_PER_CLIENT),
            (f"login-user:{username}", LOGIN_FAILURES_PER_USERNAME),
        ]


class AdminSite(admin.AdminSite):
    """Django's admin, with the queue dashboard on its index, the number of deliveries
    needing attention beside that list, and a login that counts failures."""

    login_form = ThrottledLoginForm
    site_header = gettext_lazy("v10r administration")
    site_title = gettext_lazy("v10r admin")

    def index(self, request, extra_context=None):
        context = dict(extra_context or {})
        if request.user.has_perm("notifications.view_notificationdelivery"):
            from notifications import dashboard

            context["queue_dashboard"] = dashboard.snapshot()
        return super().index(request, context)

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        for app in apps:
            for model in app["models"]:
                if model["object_name"] == "NeedsAttention":
                    count = model["model"].objects.needs_attention().count()
                    if count:
                        grouped = formats.number_format(count, force_grouping=True)
                        model["name"] = f"{model['name']} ({grouped})"
        return apps
