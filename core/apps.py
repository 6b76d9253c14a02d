from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app may use and none owns: rate limits, client identity, the request
    doors, logging, the platform and units. It imports no other app of the project."""

    default = True
    name = "core"
    verbose_name = "core"
