"""The showcase's own check of what it needs from the settings: its channel and its lane,
which the settings configure only when it is installed (V10R_SHOWCASES)."""

from __future__ import annotations

from django.core import checks

from showcases.checks import check_demo_channel_and_lane


def test_the_site_as_configured_has_the_showcases_channel_and_lane():
    assert check_demo_channel_and_lane() == []
    assert check_demo_channel_and_lane in checks.registry.registry.get_checks()


def test_a_site_whose_channels_leave_out_the_demo_is_told_how_to_fix_it(settings):
    # What V10R_CHANNELS=email,webhook does while the showcase is installed.
    settings.DELIVERY_CHANNELS = {"email": settings.DELIVERY_CHANNELS["email"]}
    [error] = check_demo_channel_and_lane()
    assert error.id == "showcases.E001"
    assert "V10R_CHANNELS" in error.hint and "V10R_SHOWCASES=0" in error.hint


def test_a_site_whose_lanes_leave_out_the_demo_is_told_too(settings):
    settings.DELIVERY_LANES = {"normal": {"rank": 0, "cap": None}}
    [error] = check_demo_channel_and_lane()
    assert error.id == "showcases.E002" and "'demo'" in error.msg
