"""One name, one thing: an SQL statement, a class or a system check's id means the same
wherever the project uses it, so a reader who finds CLAIM_SQL or Policy in two modules is
never reading two different things under one name."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.helpers import BASE_DIR

# Every one of the site's packages, as the layer test scans them (bench/ and tests/ are
# programs of their own): a name is one thing across apps, not only inside the queue.
from tests.test_layers import PACKAGES

# Classes that share a name across apps and were here before the scan covered jobs/. Each is
# its own app's (a job run's status and outcome beside a delivery's); a new pair still fails.
SHARED_CLASSES = {"Status", "Outcome"}
# Names Django itself asks every such module to use.
DJANGO_NAMES = {"Command", "DatabaseWrapper", "Migration"}
# The kinds of message django.core.checks reports.
CHECK_MESSAGES = {"Debug", "Info", "Warning", "Error", "Critical", "CheckMessage"}


def modules() -> dict[Path, ast.Module]:
    return {
        path.relative_to(BASE_DIR): ast.parse(path.read_text())
        for package in PACKAGES
        for path in sorted((BASE_DIR / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def defined_twice(kind) -> dict[str, list[str]]:
    """Module-level names that kind(node) picks out, defined in more than one module."""
    where = defaultdict(list)
    for path, tree in modules().items():
        for node in tree.body:
            for name in kind(node):
                where[name].append(str(path))
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def sql_constants(node) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.endswith("_SQL")]
    return []


def classes(node) -> list[str]:
    if isinstance(node, ast.ClassDef) and node.name not in DJANGO_NAMES | SHARED_CLASSES:
        return [node.name]
    return []


def test_no_two_modules_define_an_sql_statement_of_the_same_name():
    assert defined_twice(sql_constants) == {}


def test_no_two_modules_define_a_class_of_the_same_name():
    assert defined_twice(classes) == {}


def test_every_system_check_message_has_an_id_of_its_own():
    """Found in the source, so a check that only fires under some settings counts too."""
    sites = defaultdict(list)
    for path, tree in modules().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if called not in CHECK_MESSAGES:
                continue
            [check_id] = [k.value.value for k in node.keywords if k.arg == "id"]
            sites[check_id].append(f"{path}:{node.lineno}")
    assert "notifications.E001" in sites  # the walk finds the checks
    assert {check_id: s for check_id, s in sites.items() if len(s) > 1} == {}
