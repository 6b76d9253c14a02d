from __future__ import annotations

import pytest

from core import platform


@pytest.mark.parametrize(
    ("environ", "override", "expected", "persistent"),
    [
        ({}, "", "container", True),
        ({"VERCEL": "1"}, "", "vercel", False),
        ({"FLY_APP_NAME": "v10r"}, "", "fly", True),
        ({"RAILWAY_ENVIRONMENT": "production"}, "", "railway", True),
        # An empty marker is no marker.
        ({"VERCEL": ""}, "", "container", True),
        # Vercel is checked first when a host sets more than one marker.
        ({"VERCEL": "1", "FLY_APP_NAME": "v10r"}, "", "vercel", False),
        # The override wins over every marker.
        ({"VERCEL": "1"}, "container", "container", True),
        ({}, "vercel", "vercel", False),
    ],
)
def test_detect_names_the_platform_and_whether_it_is_persistent(
    environ, override, expected, persistent
):
    found = platform.detect(environ=environ, override=override)
    assert (found.id, found.persistent) == (expected, persistent)


def test_detect_rejects_an_unknown_override_and_lists_the_known_ones():
    with pytest.raises(ValueError, match="'heroku' is not one of: vercel, fly, railway, container"):
        platform.detect(environ={}, override="heroku")


def test_current_reads_the_override_from_settings(settings, monkeypatch):
    monkeypatch.setenv("FLY_APP_NAME", "v10r")
    settings.V10R_PLATFORM = ""
    assert platform.current().id == "fly"
    settings.V10R_PLATFORM = "vercel"
    assert platform.current().id == "vercel"
