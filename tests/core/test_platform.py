from __future__ import annotations

import pytest

from core import platform


@pytest.mark.parametrize(
    ("environ", "override", "expected", "persistent"),
    [
        # No marker: a machine of its own (a laptop is no container host).
        ({}, "", "machine", True),
        ({"VERCEL": "1"}, "", "vercel", False),
        ({"FLY_APP_NAME": "v10r"}, "", "fly", True),
        ({"RAILWAY_ENVIRONMENT": "production"}, "", "railway", True),
        # An empty marker is no marker.
        ({"VERCEL": ""}, "", "machine", True),
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
    known = "vercel, fly, railway, container, machine"
    with pytest.raises(ValueError, match=f"'heroku' is not one of: {known}"):
        platform.detect(environ={}, override="heroku")


def test_current_reads_the_override_from_settings(settings, monkeypatch):
    monkeypatch.setenv("FLY_APP_NAME", "v10r")
    settings.V10R_PLATFORM = ""
    assert platform.current().id == "fly"
    settings.V10R_PLATFORM = "vercel"
    assert platform.current().id == "vercel"


@pytest.mark.parametrize(
    ("environ", "files", "inside"),
    [
        ({}, [], False),
        ({}, [".dockerenv"], True),
        ({}, ["run/.containerenv"], True),
        ({"container": "podman"}, [], True),
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, [], True),
        # An empty variable is no mark.
        ({"container": ""}, [], False),
    ],
)
def test_a_container_is_known_by_the_marks_its_engine_leaves(tmp_path, environ, files, inside):
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    assert platform.in_container(environ=environ, root=tmp_path) is inside


def test_without_a_platforms_marker_a_container_is_a_container_and_anything_else_a_machine():
    assert platform.detect(environ={}, container=True).id == "container"
    assert platform.detect(environ={}, container=False).id == "machine"
    # A platform's marker says more than the container it runs the site in.
    assert platform.detect(environ={"FLY_APP_NAME": "v10r"}, container=True).id == "fly"


def test_no_platform_without_a_product_is_given_a_product_name():
    assert {p.id for p in platform.PLATFORMS.values() if not p.name} == {"container", "machine"}
