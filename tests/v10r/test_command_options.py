"""Every numeric option of the project's own commands refuses what is no count or duration:
infinity, NaN, a negative number, a huge one. Found by looking at each command's parser, so
an option added later is held to the same rule."""

from __future__ import annotations

import argparse

import pytest
from django.apps import apps
from django.core.management import CommandError, get_commands, load_command_class

PROJECT_APPS = {"v10r", "notifications", "recipients", "transports", "showcases", "pwa", "jobs"}
REFUSED = ["inf", "-inf", "nan", "-1", "1e12"]


def numeric_options() -> list[tuple[str, str]]:
    found = []
    for name, app in sorted(get_commands().items()):
        if app not in PROJECT_APPS:
            continue
        parser = load_command_class(app, name).create_parser("manage.py", name)
        for action in parser._actions:
            # Django's own options (--verbosity, --traceback …) are choices or flags.
            if action.type is None or action.choices or not action.option_strings:
                continue
            try:
                action.type("1")
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                continue
            found.append((name, action.option_strings[-1]))
    return found


OPTIONS = numeric_options() if apps.ready else []


def test_the_commands_with_numeric_options_are_all_found():
    assert {"drain_outbox", "prune_outbox"} <= {name for name, _ in OPTIONS}
    assert ("prune_outbox", "--max-seconds") in OPTIONS


@pytest.mark.parametrize("value", REFUSED)
@pytest.mark.parametrize(("command", "option"), OPTIONS)
def test_a_numeric_option_refuses_what_is_no_count_or_duration(command, option, value):
    parser = load_command_class(get_commands()[command], command).create_parser(
        "manage.py", command
    )
    with pytest.raises(CommandError) as refused:
        parser.parse_args([f"{option}={value}"])
    assert f"argument {option}" in str(refused.value)
    assert "is out of range; use a" in str(refused.value) or "is not a whole number" in str(
        refused.value
    )
