"""The benchmarks' worker processes: started together, each saying when it is ready, and
their results gathered, all of them killed as soon as one fails, so that a broken worker ends
the run with its traceback instead of leaving the others waiting."""

from __future__ import annotations

import queue
import time


def start_all(procs, ready, *, what: str) -> None:
    """Start the processes and wait until each has released ready once."""
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=120):
            kill_all(procs)
            raise RuntimeError(f"{what} did not start; see its traceback")


def gather(procs, results, *, what: str, seconds: float | None = None) -> list:
    """A result from each process (what it put on results), then the processes joined."""
    deadline = None if seconds is None else time.monotonic() + seconds
    finished = []
    while len(finished) < len(procs):
        try:
            finished.append(results.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                kill_all(procs)
                raise RuntimeError(f"{what} failed; see its traceback") from None
            if deadline is not None and time.monotonic() > deadline:
                kill_all(procs)
                raise RuntimeError(f"{what} hung: no result in {seconds:g} s") from None
    for p in procs:
        p.join()
    return finished


def kill_all(procs) -> None:
    for p in procs:
        p.kill()
