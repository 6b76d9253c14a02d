from django.apps import AppConfig


class ShowcasesConfig(AppConfig):
    """Pages that show the site's workers to visitors."""

    name = "showcases"
