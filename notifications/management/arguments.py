"""Option parsers the outbox's commands share: a number with bounds, refused with a sentence."""

from __future__ import annotations

import argparse


def bounded(kind, *, low, high=None):
    """An argparse type: kind(text), which must be at least low (and at most high)."""

    def parse(text: str):
        noun = "a whole number" if kind is int else "a number"
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not value >= low or (high is not None and value > high):
            limit = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{text} is out of range; use {noun} {limit}")
        return value

    return parse
