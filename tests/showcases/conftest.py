from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import require

RUNNER = Path(__file__).with_name("palette_runner.mjs")


class NodePalette:
    """palette.js in a long-lived Node process, one request a line."""

    def __init__(self, node: str) -> None:
        self.process = subprocess.Popen(
            [node, str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def run(self, pixels: bytes, count: int = 6) -> dict:
        request = {"pixels": base64.b64encode(pixels).decode(), "count": count}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(10)


@pytest.fixture(scope="session")
def node_palette():
    node = require("node", install="Node.js 20 or later")
    runner = NodePalette(node)
    yield runner
    runner.close()
