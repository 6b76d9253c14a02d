from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError
from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from core import clients, ratelimit

# Wrong sign-ins before the form refuses to check passwords for a while. Per client address
# (an IPv6 /64), which stops one guesser; and per username, higher, which slows guessers
# spread over many addresses. The username's count alone never refuses a client that has not
# failed for that username itself in the window: else a few addresses could lock its owner
# out. Past it, each client that has failed gets no more tries, and each new one a single one.
LOGIN_FAILURES_PER_CLIENT = 10
LOGIN_FAILURES_PER_USERNAME = 50
LOGIN_WINDOW = timedelta(minutes=15)


class ThrottledLoginForm(AdminAuthenticationForm):
    """The admin's login form, with failed attempts counted in the site's rate limiter.

    The limiter is the PostgreSQL one every other limit uses, so the count holds across
    processes and hosts, and the client is identified the same way (core/clients.py), which
    is why this is not django-axes: that would bring its own tables, middleware and notion of
    the client address for one form."""

    def clean(self):
        # Counted before the password is checked, or a burst of concurrent guesses would all
        # pass the check before any of them counted. Only a password actually checked and
        # wrong stays counted: a refused attempt takes its hits back (else one client, once
        # refused, could go on charging the username's count), and so does a right one.
        client = clients.address(self.request)
        username = (self.cleaned_data.get("username") or "").casefold()
        charged = []

        def charge(key: str, limit: int) -> ratelimit.Verdict:
            verdict = ratelimit.hit(key=key, limit=limit, window=LOGIN_WINDOW)
            charged.append(key)
            return verdict

        # The client first: a client already refused never reaches the username's count.
        by_client = charge(f"login:{client}", LOGIN_FAILURES_PER_CLIENT)
        if not by_client.allowed:
            self._refuse(charged, retry_after_seconds=by_client.retry_after_seconds)
        by_username = charge(f"login-user:{username}", LOGIN_FAILURES_PER_USERNAME)
        # Allowed while this is the client's first attempt on this username in its window.
        # The hits serialise on the row, so of a burst from one new client only one is.
        first_here = charge(f"login-pair:{client}:{username}", 1)
        if not by_username.allowed and not first_here.allowed:
            # Tried again once either window restarts.
            self._refuse(
                charged,
                retry_after_seconds=min(
                    by_username.retry_after_seconds, first_here.retry_after_seconds
                ),
            )
        cleaned = super().clean()
        self._forgive(charged)
        return cleaned

    @classmethod
    def _refuse(cls, charged: list[str], *, retry_after_seconds: int):
        cls._forgive(charged)
        raise ValidationError(
            _("Too many failed sign-ins. Try again in %(minutes)d min.")
            % {"minutes": -(-retry_after_seconds // 60)},
            code="throttled",
        )

    @staticmethod
    def _forgive(keys: list[str]) -> None:
        for key in keys:
            ratelimit.forgive(key=key)


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
