"""Option parsers the outbox's commands share: a number with bounds, refused with a sentence."""

from __future__ import annotations

import argparse
import math


def bounded(kind, *, low, high):
    """An argparse type: kind(text), a finite number from low to high."""

    def parse(text: str):
        noun = "a whole number" if kind is int else "a number"
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        # float() reads "inf" and "nan"; neither is a duration or a count.
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{text} is out of range; use {noun} from {low:g} to {high:g}"
            )
        return value

    return parse
