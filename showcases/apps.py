from django.apps import AppConfig


class ShowcasesConfig(AppConfig):
    """Pages that show the site's workers to visitors."""

    name = "showcases"

    def ready(self):
        from notifications.signals import outbox_idle
        from showcases import (
            checks,  # noqa: F401 - registers the check of the showcase's channel and lane
            queue_demo,
        )

        # The queue tidies the demo's rows through its signal: it knows no showcase.
        outbox_idle.connect(queue_demo.tidy, dispatch_uid="showcases.queue_demo")
