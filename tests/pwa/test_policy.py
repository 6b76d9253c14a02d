"""The service worker's policy table runs under Node's test runner (tests/js/); this puts it
in `make test`, and holds the table's config to the one the site really sends."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from pwa import precache
from tests.helpers import require

JS_TESTS = Path(__file__).resolve().parents[1] / "js"


def test_the_policy_table_passes_under_node():
    node = require("node", install="Node.js 20 or later")
    run = subprocess.run(
        [node, "--test", "--test-reporter=tap", *sorted(map(str, JS_TESTS.glob("*.test.mjs")))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    passed = int(re.search(r"^# pass (\d+)$", run.stdout, re.M).group(1))
    assert re.search(r"^# fail 0$", run.stdout, re.M)
    assert passed >= 50, "every row of the table ran"


@pytest.mark.usefixtures("collected_static")
def test_the_table_is_checked_against_the_config_the_site_sends(settings):
    precache.worker_config.cache_clear()
    try:
        sent = precache.worker_config()["policy"]
    finally:
        precache.worker_config.cache_clear()
    source = (JS_TESTS / "policy.test.mjs").read_text()
    tested = json.loads(
        re.sub(
            r",\s*]", "]", re.search(r"never: (\[.*?\]),", source, re.S).group(1).replace("'", '"')
        )
    )
    assert sent["never"] == tested
    assert sent["languages"] == ["ru", "de"]
    assert sent["offlinePath"] == "/offline/"
    assert sent["staticUrl"] == "/static/"
