"""What the showcase needs from the site's settings, checked where Django checks an app's
needs (as the admin checks for its context processors): the settings configure the showcase's
channel and lane only when it is installed, and a V10R_CHANNELS or a settings module that
leaves either out would break the workers page's Try it."""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.core.checks import Error, register

from showcases.channel import DEMO_CHANNEL, DEMO_LANE

CHANNEL_PATH = "showcases.channel.DemoChannel"


@register()
def check_demo_channel_and_lane(app_configs=None, **kwargs):
    if not apps.is_installed("showcases"):
        return []  # registered once per process; a test may uninstall the app since
    errors = []
    if settings.DELIVERY_CHANNELS.get(DEMO_CHANNEL) != CHANNEL_PATH:
        errors.append(
            Error(
                f"The showcase is installed, but DELIVERY_CHANNELS does not configure its "
                f"channel {DEMO_CHANNEL!r} as {CHANNEL_PATH}: the workers page's Try it "
                "could queue nothing.",
                hint=f"Add {DEMO_CHANNEL} to V10R_CHANNELS, or set V10R_SHOWCASES=0 to run "
                "the site without the showcase.",
                id="showcases.E001",
            )
        )
    if DEMO_LANE not in getattr(settings, "DELIVERY_LANES", {}):
        errors.append(
            Error(
                f"The showcase is installed, but DELIVERY_LANES has no {DEMO_LANE!r} lane, "
                "which its rows are queued on.",
                hint=f"Add DELIVERY_LANES[{DEMO_LANE!r}] behind every other lane, as "
                "v10r/settings.py does, or set V10R_SHOWCASES=0.",
                id="showcases.E002",
            )
        )
    return errors
