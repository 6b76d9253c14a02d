from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class V10rConfig(AppConfig):
    """The project package as an app: site-wide templates, commands and the home page."""

    default = True
    name = "v10r"
    verbose_name = "v10r"

    def ready(self):
        from notifications.signals import outbox_idle
        from v10r import housekeeping

        outbox_idle.connect(housekeeping.tidy, dispatch_uid="v10r.housekeeping")


class AdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin on v10r's AdminSite (the Needs Attention count on the index)."""

    default = False
    default_site = "v10r.admin.AdminSite"
