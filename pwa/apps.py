from django.apps import AppConfig


class PwaConfig(AppConfig):
    name = "pwa"
    verbose_name = "Installable site"
