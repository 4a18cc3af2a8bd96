"""Paper claims checked from records: a statistic of the mean-over-seeds cells and its rule.

Papers that print figures rather than numbers state claims ("accuracy rises with T"); a report
turns each into an anchor whose ``ours`` is a statistic of the records (a share of comparisons
in which the claim holds, or a difference) judged by :class:`ClaimRule`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bench.reporting.aggregate import aggregate_cells, cells_frame, mean_and_ci
from bench.reporting.targets import PaperValue
from bench.reporting.verdicts import AGREES, CLOSE, DIFFERS, Estimate, VerdictRule

Means = dict[tuple[str, str], float]
Statistic = Callable[[Means], float]


@dataclass(frozen=True)
class Summary:
    """Mean over seeds of one cell with its 95% CI (NaN bounds with one seed)."""

    mean: float
    low: float
    high: float
    n: int


def summarise_cells(records: list[dict[str, Any]]) -> dict[tuple[str, str], Summary]:
    """``{(row, column): Summary}`` over the ok records' seeds."""
    table = aggregate_cells(cells_frame(records), paper_seed=None)
    return {(line["row"], line["column"]): Summary(line["mean"], line["ci_low"],
                                                   line["ci_high"], int(line["n_seeds"]))
            for line in table.to_dict("records")}


@dataclass(frozen=True)
class ClaimRule(VerdictRule):
    """Judges a claim statistic: agrees when ``ours >= agree``, close when ``ours >= close``
    (``higher_is_better=False`` flips both comparisons)."""

    agree: float = 1.0
    close: float = 0.75
    higher_is_better: bool = True

    def reference(self) -> str:
        sign = ">=" if self.higher_is_better else "<="
        return f"claim holds: ours {sign} {self.agree:g}"

    def classify(self, ours: float, paper: PaperValue | None, ci: tuple[float, float],
                 stderr: float = math.nan) -> str:
        sign = 1.0 if self.higher_is_better else -1.0
        if sign * ours >= sign * self.agree:
            return AGREES
        return CLOSE if sign * ours >= sign * self.close else DIFFERS

    def describe(self) -> str:
        word = "at least" if self.higher_is_better else "at most"
        return (f"a claim agrees when its statistic is {word} {self.agree:g} and is close when "
                f"it is {word} {self.close:g}")


def claim(statistic: Statistic) -> Callable[[list[dict[str, Any]]], float]:
    """Anchor getter: ``statistic`` of the mean-over-seeds cell values of the ok records."""

    def get(records: list[dict[str, Any]]) -> float:
        return statistic(cell_means(records))

    return get


def cell_means(records: list[dict[str, Any]]) -> Means:
    """``{(row, column): mean over seeds}`` of the ok records' cells (LookupError when there
    are none)."""
    summaries = summarise_cells(records)
    if not summaries:
        raise LookupError("no ok cells")
    return {key: s.mean for key, s in summaries.items()}


def fraction(outcomes: Iterable[bool]) -> float:
    """Share of True outcomes (LookupError when there are none)."""
    values = list(outcomes)
    if not values:
        raise LookupError("no comparison could be made (cells missing)")
    return sum(values) / len(values)


def mean_of(values: Iterable[float]) -> float:
    """Arithmetic mean (LookupError when empty)."""
    values = list(values)
    if not values:
        raise LookupError("no values (cells missing)")
    return sum(values) / len(values)


def per_seed_values(records: list[dict[str, Any]],
                    getter: Callable[[list[dict[str, Any]]], float],
                    skipped: tuple[type[Exception], ...] = (LookupError,)) -> list[float]:
    """``getter`` of each seed's own records, seeds in first-seen order; a seed where it
    raises one of ``skipped`` is left out."""
    by_seed: dict[Any, list[dict[str, Any]]] = {}
    for record in records:
        by_seed.setdefault(record["seed"], []).append(record)
    values = []
    for seed_records in by_seed.values():
        try:
            values.append(getter(seed_records))
        except skipped:
            continue
    return values


def over_seeds(getter: Callable[[list[dict[str, Any]]], float],
               what: str) -> Callable[[list[dict[str, Any]]], Estimate]:
    """Anchor getter: the mean over seeds of ``getter`` on each seed's records with its 95%
    CI (LookupError naming ``what`` when no seed has it)."""

    def get(records: list[dict[str, Any]]) -> Estimate:
        values = per_seed_values(records, getter)
        if not values:
            raise LookupError(f"no {what} in the records")
        mean, _, low, high = mean_and_ci(values)
        return Estimate(mean, low, high)

    return get


def seed_spread_cause(getter: Callable[[list[dict[str, Any]]], float], what: str,
                      threshold: float, unresolved: str) -> Callable[[list[dict[str, Any]]], str]:
    """Anchor cause quoting ``getter`` (an anchor's ``ours``) on each seed's own records: their
    range, mean and 95% Student-t interval, and ``unresolved`` when the interval holds the
    claim's ``threshold`` (the records cannot tell the claim's side at this many seeds).
    LookupError with fewer than two seeds it can be computed on."""

    def cause(records: list[dict[str, Any]]) -> str:
        values = per_seed_values(records, getter,
                                 (LookupError, ValueError, ArithmeticError, TypeError))
        if len(values) < 2:
            raise LookupError("fewer than two seeds to spread over")
        mean, _, low, high = mean_and_ci(values)
        text = (f"measured on these records: {what} on each of {len(values)} seeds ranges "
                f"{min(values):+.4f} to {max(values):+.4f}, mean {mean:+.4f}, 95% CI "
                f"[{low:+.4f}, {high:+.4f}]")
        return text + (f": {unresolved}" if low <= threshold <= high else "")

    return cause
