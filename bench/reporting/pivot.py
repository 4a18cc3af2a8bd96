"""The compact table of a report: rows = method, columns = the swept quantity (k, T, n, angle...).

Cells of a sweep are named with a ``key=value`` part (``misspecified/ood/w2@k=5``,
``angle=30/brier``, ``normal_normal/n=1000``). When the columns carry one such key, the compact
table has a line per (row, rest of the column) and a column per value; when the rows carry it,
a line per (column, rest of the row); otherwise the table's own rows and columns (methods x
metrics) are already compact. Each entry is the judged value (the paper seed's, else the mean
over seeds), the paper value in brackets and a verdict mark.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

import pandas as pd

from bench.reporting.formatting import GAP, format_compact
from bench.reporting.verdicts import (
    AGREES,
    CLOSE,
    DIFFERS,
    INCONCLUSIVE,
    NO_PAPER_VALUE,
    NOT_COMPARABLE,
)

SWEEP_PART = re.compile(r"^(?P<key>[A-Za-z_][\w^]*)=(?P<value>[^=]+)$")
MARKS = {AGREES: "✓", CLOSE: "≈", DIFFERS: "✗", INCONCLUSIVE: "?", NOT_COMPARABLE: "⊘"}
LEGEND = ", ".join(f"{mark} {verdict}" for verdict, mark in MARKS.items())


@dataclass(frozen=True)
class SweepName:
    """A cell name split into its ``key=value`` part and the rest (``""`` when none)."""

    rest: str
    key: str = ""
    value: str = ""


def split_sweep(name: str) -> SweepName:
    """``"misspecified/ood/w2@k=5"`` -> rest ``"misspecified/ood/w2"``, ``k``, ``"5"``.

    The last ``/``- or ``@``-separated part of the form ``key=value`` is the sweep; a name
    without one is all rest.
    """
    parts = re.split(r"([/@])", str(name))
    for index in range(len(parts) - 1, -1, -2):
        match = SWEEP_PART.match(parts[index])
        if match:
            kept = parts[:max(index - 1, 0)] + parts[index + 1:]
            rest = "".join(kept).strip("/@")
            return SweepName(rest, match["key"], match["value"])
    return SweepName(str(name))


def _dominant_key(names: list[SweepName]) -> str:
    keys = Counter(name.key for name in names if name.key)
    if not keys:
        return ""
    key, count = keys.most_common(1)[0]
    return key if count * 2 >= len(names) else ""


def entry_text(line: pd.Series) -> str:
    """One compact entry: ``84 (88.0) ✗``; a gap shows its verdict (``— failed``)."""
    at_seed = line.get("ours_paper_seed", math.nan)
    ours = at_seed if isinstance(at_seed, float) and math.isfinite(at_seed) else line["ours"]
    verdict = line["verdict"]
    if not (isinstance(ours, float) and math.isfinite(ours)):
        return f"{GAP} {verdict}" if verdict != NO_PAPER_VALUE else GAP
    text = format_compact(ours)
    if line["paper"] and verdict != NO_PAPER_VALUE:
        text += f" ({line['paper']})"
    mark = MARKS.get(verdict)
    return f"{text} {mark}" if mark else text


@dataclass(frozen=True)
class Pivot:
    """A compact table and what its rows and columns are."""

    frame: pd.DataFrame
    swept: str

    @property
    def description(self) -> str:
        """One line: what a line and a column of the compact table are."""
        return (f"Columns: {self.swept}. Each entry: ours (the paper seed's value, else the "
                f"mean over seeds), the paper value in brackets, {LEGEND}.")


def pivot_table(part: pd.DataFrame) -> Pivot:
    """The compact table of one protocol's lines of the long table (columns ``row``,
    ``column``, ``paper``, ``ours``, ``ours_paper_seed``, ``verdict``)."""
    columns = [split_sweep(c) for c in part["column"]]
    rows = [split_sweep(r) for r in part["row"]]
    column_key, row_key = _dominant_key(columns), _dominant_key(rows)
    if column_key:
        series = [(row, name.rest) for row, name in zip(part["row"], columns, strict=True)]
        heads = [_head(column_key, name) for name in columns]
        labels, swept = ("row", "column"), column_key
    elif row_key:
        series = [(column, name.rest) for column, name in zip(part["column"], rows, strict=True)]
        heads = [_head(row_key, name) for name in rows]
        labels, swept = ("column", "row"), row_key
    else:
        series = [(row, "") for row in part["row"]]
        heads = list(part["column"])
        labels, swept = ("row", ""), "the table's columns"
    entries = [entry_text(line) for _, line in part.iterrows()]
    key = column_key or row_key
    return Pivot(_frame(series, heads, entries, labels, key), swept)


def _head(key: str, name: SweepName) -> str:
    return f"{key}={name.value}" if name.key == key else f"(no {key})"


def _column_order(heads: list[str], key: str) -> list[str]:
    """Columns without the sweep first, then the sweep's values (numerically if they are
    numbers, else as they come)."""
    unique = list(dict.fromkeys(heads))
    if not key:
        return unique
    swept = [h for h in unique if h.startswith(f"{key}=")]
    plain = [h for h in unique if h not in swept]
    try:
        swept.sort(key=lambda head: float(head.split("=", 1)[1]))
    except ValueError:
        pass
    return plain + swept


def _frame(series: list[tuple[str, str]], heads: list[str], entries: list[str],
           labels: tuple[str, str], key: str) -> pd.DataFrame:
    """One line per series (grouped by the rest of the swept name, then by name), one column
    per head."""
    groups = list(dict.fromkeys(rest for _, rest in series))
    names = list(dict.fromkeys(name for name, _ in series))
    order = _column_order(heads, key)
    keys = sorted(dict.fromkeys(series), key=lambda s: (groups.index(s[1]), names.index(s[0])))
    table = {series_key: dict.fromkeys(order, "") for series_key in keys}
    for series_key, head, entry in zip(series, heads, entries, strict=True):
        table[series_key][head] = entry
    first, second = labels
    lines = []
    for (name, rest), values in table.items():
        line = {first: name, second: rest} if any(groups) else {first: name}
        lines.append({**line, **values})
    return pd.DataFrame(lines)
