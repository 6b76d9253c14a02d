from django.apps import AppConfig


class V10rConfig(AppConfig):
    """The project package as an app: site-wide templates, commands and the home page."""

    name = "v10r"
    verbose_name = "v10r"
