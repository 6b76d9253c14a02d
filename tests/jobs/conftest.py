from __future__ import annotations

import pytest

from jobs import registry


@pytest.fixture
def only(monkeypatch):
    """Replace the registry with the given jobs for one test: only(job, job…)."""

    def replace(*entries: registry.Job) -> None:
        monkeypatch.setattr(registry, "_jobs", list(entries))

    return replace
