"""What the benchmarks' command lines take, checked as argparse types."""

from __future__ import annotations

import argparse


def positive(text: str) -> int:
    """A whole number of at least 1 (a count of sends, rounds, recipients)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {value}")
    return value
