"""What a pytest session pays for before its first test: only what its tests need.

Each test runs pytest on one of the suite's own files in a child process, with no database
server behind DATABASE_URL and a static root that does not exist yet, so a session that
created the test database or ran collectstatic would show it.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

from tests.helpers import BASE_DIR

PURE_FILE = "tests/notifications/test_backoff.py"


def closed_port() -> int:
    """Return a loopback port nothing listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_pytest(*args: str, static_root) -> subprocess.CompletedProcess:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "PYTEST_"))
    }
    env |= {
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed_port()}/v10r_nothing_here",
        "DJANGO_STATIC_ROOT": str(static_root),
    }
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def imported_modules(importtime_log: str) -> set[str]:
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", importtime_log, re.M))


def test_a_pure_test_file_passes_with_no_database_server_and_collects_no_static_files(
    tmp_path,
):
    static_root = tmp_path / "static"
    result = run_pytest(PURE_FILE, static_root=static_root)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    assert re.search(r"\b33 passed\b", result.stdout), result.stdout
    assert not static_root.exists(), "collectstatic ran for tests that render no page"


def test_a_pure_test_file_imports_neither_numpy_nor_numba(tmp_path):
    # -s: the import log goes to stderr, which pytest would otherwise capture and drop.
    result = run_pytest("-s", PURE_FILE, static_root=tmp_path / "static")
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    modules = imported_modules(result.stderr)
    assert "django" in modules  # the log is read right: Django itself is in it
    assert {"numpy", "numba"}.isdisjoint(modules)


def test_a_session_with_one_test_that_needs_static_files_collects_them_before_its_first_test(
    tmp_path,
):
    static_root = tmp_path / "static"
    needs_static = (
        "tests/pwa/test_policy.py::test_the_table_is_checked_against_the_config_the_site_sends"
    )
    result = run_pytest("--setup-show", PURE_FILE, needs_static, static_root=static_root)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    collected = result.stdout.index("SETUP    S collected_static")
    assert collected < result.stdout.index(PURE_FILE + "::"), "collected after a test had run"
    assert (static_root / "staticfiles.json").exists()
