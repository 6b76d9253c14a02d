"""How the benchmarks print their results: a table of text cells, each column as wide as its
widest cell, for a terminal or a pull request."""

from __future__ import annotations


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    for line in [header, *rows]:
        cells = (value.ljust(width) for value, width in zip(line, widths, strict=True))
        print("  ".join(cells).rstrip())
