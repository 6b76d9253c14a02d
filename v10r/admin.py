from __future__ import annotations

from django.contrib import admin


class AdminSite(admin.AdminSite):
    """Django's admin, with the number of deliveries needing attention beside that list."""

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        for app in apps:
            for model in app["models"]:
                if model["object_name"] == "NeedsAttention":
                    count = model["model"].objects.needs_attention().count()
                    if count:
                        model["name"] = f"{model['name']} ({count})"
        return apps
