"""How the benchmarks time a call: wall-clock milliseconds of each of several runs, after
warm-up runs that are not counted (caches, connections, first-call compilation)."""

from __future__ import annotations

import time


def milliseconds(run, samples: int, *, warmups: int) -> list[float]:
    """The wall-clock time in ms of each of samples calls of run(), after warmups calls."""
    for _ in range(warmups):
        run()
    values = []
    for _ in range(samples):
        began = time.perf_counter()
        run()
        values.append((time.perf_counter() - began) * 1000)
    return values
