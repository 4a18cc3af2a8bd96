"""Causes that quote side runs: records that repeat one seed of a report's job with one
factor changed, under a row name of their own (a sensitivity row of the same report).

A cause built here compares, for one cell column, the main row's value on that seed with each
side run's and says what stays unmeasured; it raises LookupError when the records hold no such
pair, so the spec's next cause applies (:meth:`bench.reporting.spec.ArtifactSpec.cause_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def is_side_run(record: dict[str, Any]) -> bool:
    """Whether a record is one of an experiment's side runs: its config sets ``row_suffix``
    (its rows carry it) rather than being one of the experiment's own jobs."""
    return bool((record.get("config") or {}).get("row_suffix"))


def seed_value(records: list[dict[str, Any]], row: str, column: str, seed: int) -> float:
    """The value of cell (``row``, ``column``) in the ok record of ``seed`` that has it
    (LookupError when none does)."""
    for record in records:
        if record.get("seed") != seed or record.get("status", "ok") != "ok":
            continue
        for cell in record.get("cells") or []:
            if cell["row"] == row and cell["column"] == column and cell["value"] is not None:
                return float(cell["value"])
    raise LookupError(f"no {row} {column} cell for seed {seed}")


def row_values(records: list[dict[str, Any]], row: str, column: str) -> list[float]:
    """The values of cell (``row``, ``column``) in every ok record that has it."""
    return [float(cell["value"]) for record in records if record.get("status", "ok") == "ok"
            for cell in record.get("cells") or []
            if cell["row"] == row and cell["column"] == column and cell["value"] is not None]


def side_run_cause(row: str, column: str, sides: Mapping[str, str], seed: int,
                   as_run: str, unmeasured: str) -> Callable[[list[dict[str, Any]]], str]:
    """Cause of the cell (``row``, ``column``): its value on ``seed`` (``as_run`` says how the
    main job ran) beside each side run's (``sides``: label -> row) present, then what stays
    ``unmeasured``. LookupError without the main value or any side run."""

    def cause(records: list[dict[str, Any]]) -> str:
        main = seed_value(records, row, column, seed)
        moved = {}
        for label, side_row in sides.items():
            try:
                moved[label] = seed_value(records, side_row, column, seed)
            except LookupError:
                continue
        if not moved:
            raise LookupError(f"no side run of {row} on seed {seed}")
        others = "; ".join(f"{label} {value:.4g}" for label, value in moved.items())
        noun = "side runs" if len(moved) > 1 else "side run"
        text = (f"{noun}, seed {seed} (sensitivity rows below): {column} {main:.4g} "
                f"{as_run}; {others}. {unmeasured}")
        values = row_values(records, row, column)
        if len(values) > 1:
            text += (f". Seed {seed} is one of the row's {len(values)} seeds (their mean "
                     f"{sum(values) / len(values):.4g})")
        return text

    return cause
