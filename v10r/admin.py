from __future__ import annotations

from django.contrib import admin


class AdminSite(admin.AdminSite):
    """Django's admin, with the queue dashboard on its index and the number of deliveries
    needing attention beside that list."""

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
                        model["name"] = f"{model['name']} ({count})"
        return apps
