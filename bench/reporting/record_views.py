"""Records in a paper's vocabulary: the conversions a report spec applies before rendering.

Tasks write neutral cells (fractions, not percent; method names, not the paper's table rows)
and mark such records with ``fitted.cell_units = "neutral"``
(:data:`bench.harness.result.CELL_UNITS`). Records written before carry no mark and already
hold the paper's vocabulary; every view here returns them unchanged, so one report renders
old and new records side by side. Conversion goes by the mark, never by the values.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from typing import Any

from bench.harness.result import CELL_UNITS, NEUTRAL_CELLS

Record = dict[str, Any]
RecordView = Callable[[Record], Record]
PERCENT = 100.0
# The mark a converted record carries, so a view applied twice converts once.
PAPER_VOCABULARY = "paper"


def has_neutral_cells(record: Record) -> bool:
    """Whether the record's task wrote neutral cells (its mark says so)."""
    return (record.get("fitted") or {}).get(CELL_UNITS) == NEUTRAL_CELLS


def in_percent(columns: Iterable[str]) -> RecordView:
    """A view showing the fraction cells whose column matches one of the ``fnmatch``
    ``columns`` patterns in percent (x 100) for records with neutral cells."""
    patterns = tuple(columns)

    def view(record: Record) -> Record:
        if not has_neutral_cells(record):
            return record
        cells = [{**cell, "value": PERCENT * cell["value"]}
                 if any(fnmatch.fnmatchcase(cell["column"], p) for p in patterns) else cell
                 for cell in record.get("cells") or ()]
        fitted = {**record["fitted"], CELL_UNITS: PAPER_VOCABULARY}
        return {**record, "cells": cells, "fitted": fitted}

    return view
