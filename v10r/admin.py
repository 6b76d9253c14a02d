from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.utils import formats
from django.utils.translation import gettext_lazy

# The limits live with the throttle, in core; named here too, where the admin's tests read them.
from core.signin import (  # noqa: F401
    LOGIN_FAILURES_PER_CLIENT,
    LOGIN_FAILURES_PER_USERNAME,
    LOGIN_WINDOW,
    ThrottledSignInMixin,
)


class ThrottledLoginForm(ThrottledSignInMixin, AdminAuthenticationForm):
    """The admin's login form, with failed attempts counted as the site's sign-in counts
    them, on the same keys (core/signin.py)."""


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
