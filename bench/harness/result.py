"""What an experiment task returns: table cells, flat metrics, fitted values and figure arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# A task whose cells are neutral (fractions, not percent; names of methods and data sets, not
# the paper's table rows) says so in ``fitted[CELL_UNITS] = NEUTRAL_CELLS``; records without
# the mark were written in the paper's vocabulary. A report spec's ``record_view`` converts
# by this mark, never by the values (bench.reporting.record_views).
CELL_UNITS = "cell_units"
NEUTRAL_CELLS = "neutral"


@dataclass(frozen=True)
class Cell:
    """One number of a paper artifact, named as the paper's targets CSV names it.

    ``row`` and ``column`` follow ``bench/targets/<paper>.csv`` (e.g. ``row="n=100000"``,
    ``column="kl"``) so the report can join paper and reproduced values on them.
    """

    row: str
    column: str
    value: float


@dataclass
class TaskResult:
    """Everything one run produced; the run wrapper adds config, provenance and timings."""

    cells: list[Cell] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    fitted: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, list[float]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    failed_cells: list[dict[str, str]] = field(default_factory=list)
    # Per row, the fit's health (:func:`bench.metrics.fit_health.assess`).
    health: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, row: str, column: str, value: float) -> None:
        """Append one table cell (value converted to a plain float)."""
        self.cells.append(Cell(row, column, float(value)))

    def fail(self, row: str, column: str, reason: str) -> None:
        """Mark one cell failed with ``reason`` (a statistic that overflowed or cannot be
        computed): the report shows the cell as failed with the reason, never a number."""
        self.failed_cells.append({"row": row, "column": column, "reason": reason})

    def non_finite(self) -> list[str]:
        """Names of cells and metrics whose value is NaN or infinite."""
        bad = [f"{c.row}/{c.column}" for c in self.cells if not math.isfinite(c.value)]
        bad += [name for name, v in self.metrics.items() if not math.isfinite(float(v))]
        return bad
