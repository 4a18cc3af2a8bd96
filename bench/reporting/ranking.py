"""Ranking the rows of one experiment on one metric, with seed-level confidence intervals.

A :class:`RankedMetric` names a cell column of the records and its direction (``lower`` or
``higher`` is better); with ``nominal`` the score is the distance ``|value - nominal|`` (a
coverage against its nominal level), lower being better. Scores are taken per seed, then
summarised by :func:`bench.reporting.aggregate.mean_and_ci`. Rows are ranked by their mean
score; two rows are *tied* when their 95% intervals overlap (a row with one seed has no
interval and ties with nothing it cannot be told from, so it is marked "1 seed").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bench.reporting.aggregate import mean_and_ci

DIRECTIONS = ("lower", "higher")


@dataclass(frozen=True)
class RankedMetric:
    """A column a leaderboard ranks on: ``better`` is ``lower`` or ``higher``; with
    ``nominal`` the score is ``|value - nominal|`` and lower is better."""

    column: str
    better: str = "lower"
    nominal: float | None = None

    def __post_init__(self) -> None:
        if self.better not in DIRECTIONS:
            raise ValueError(f"RankedMetric({self.column!r}): better={self.better!r}; choose "
                             f"one of {', '.join(DIRECTIONS)}")
        if self.nominal is not None and self.better != "lower":
            raise ValueError(f"RankedMetric({self.column!r}): a distance to nominal "
                             f"{self.nominal} is better lower")

    @property
    def label(self) -> str:
        """How the page names the score: ``nll (lower)``, ``|cov95 - 95| (lower)``."""
        shown = self.column if self.nominal is None else f"|{self.column} - {self.nominal:g}|"
        return f"{shown} ({self.better} is better)"

    def score(self, value: float) -> float:
        """The score of one cell value (the distance to nominal where one is set)."""
        return abs(value - self.nominal) if self.nominal is not None else float(value)


@dataclass(frozen=True)
class Standing:
    """One row's place: its rank (1 best), mean score, 95% CI, seed count and the rows whose
    intervals overlap its own."""

    row: str
    rank: int
    mean: float
    ci_low: float
    ci_high: float
    n_seeds: int
    tied_with: tuple[str, ...]


def scored(values_by_seed: Mapping[int, float], metric: RankedMetric) -> tuple[float, ...]:
    """``(mean, sd, ci_low, ci_high)`` of the metric's per-seed scores."""
    return mean_and_ci(metric.score(value) for value in values_by_seed.values())


def _overlaps(a: Standing, b: Standing) -> bool:
    if not all(math.isfinite(v) for v in (a.ci_low, a.ci_high, b.ci_low, b.ci_high)):
        return False
    return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high


def ranked(values: Mapping[str, Mapping[int, float]], metric: RankedMetric) -> list[Standing]:
    """The rows of ``values`` (row -> seed -> cell value) ranked on ``metric``, best first;
    rows without a finite score are left out. Equal means share the better rank."""
    summaries = []
    for row, by_seed in values.items():
        mean, _, low, high = scored(by_seed, metric)
        if math.isfinite(mean):
            n_seeds = sum(math.isfinite(v) for v in by_seed.values())
            summaries.append((row, mean, low, high, n_seeds))
    sign = -1.0 if metric.better == "higher" else 1.0
    summaries.sort(key=lambda item: (sign * item[1], item[0]))
    standings: list[Standing] = []
    for index, (row, mean, low, high, n_seeds) in enumerate(summaries):
        rank = (standings[-1].rank if standings and standings[-1].mean == mean else index + 1)
        standings.append(Standing(row, rank, mean, low, high, n_seeds, ()))
    return [Standing(s.row, s.rank, s.mean, s.ci_low, s.ci_high, s.n_seeds,
                     tuple(o.row for o in standings if o is not s and _overlaps(s, o)))
            for s in standings]


def mean_ranks(ranks: Iterable[tuple[str, str, int, int]]) -> list[tuple[str, float, float, int]]:
    """``(row, mean rank, mean normalised rank, experiments)`` from ``(experiment, row, rank,
    rows ranked)`` entries, best mean normalised rank first. The normalised rank is
    ``(rank - 1) / (rows ranked - 1)`` (0 best, 1 last; 0 where only one row was ranked), so
    experiments with many rows do not weigh more."""
    by_row: dict[str, list[tuple[int, float]]] = {}
    for _, row, rank, count in ranks:
        normalised = (rank - 1) / (count - 1) if count > 1 else 0.0
        by_row.setdefault(row, []).append((rank, normalised))
    table = [(row, sum(r for r, _ in entries) / len(entries),
              sum(n for _, n in entries) / len(entries), len(entries))
             for row, entries in by_row.items()]
    return sorted(table, key=lambda item: (item[2], item[1], item[0]))
