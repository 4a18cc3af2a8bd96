"""ArtifactSpec: the small declarative description of one paper artifact's report.

A spec says where the records are, which paper numbers to compare with, how to judge each
cell and what to print around the table. Patterns for cells are tuples of fnmatch patterns,
either ``(row, column)`` or ``(protocol, row, column)``; ``"*"`` matches anything. When several
patterns match a cell, the most specific one wins (exact names beat globs beat ``"*"``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.datasets.vision import find_image_files, missing_files_message
from bench.reporting.comparability import averaged_sets_reason, hardware_reason
from bench.reporting.ranking import RankedMetric
from bench.reporting.verdicts import Estimate, PrintedDigits, VerdictRule

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CellPattern = tuple[str, str] | tuple[str, str, str]
# Reports are committed: folders are named relative to the data root, not this machine's path.
SHOWN_ROOT = "$BENCH_DATA_DIR"
SPREADS = ("ci95", "stderr")
FigureFunction = Callable[[list[dict[str, Any]], "ArtifactSpec"], "Figure"]
# An anchor's statistic: a float, or an Estimate with its 95% CI over seeds.
AnchorValue = Callable[[list[dict[str, Any]]], "float | Estimate"]
FailedCells = Callable[[dict[str, Any]], list[tuple[str, str]]]
# Why cells cannot be judged: a fixed text, or a function of the ok records giving the text
# ("" when these records are comparable after all).
NotComparableReason = str | Callable[[list[dict[str, Any]]], str]
# A cell's cause: a fixed text, or a function of the ok records giving a text that quotes
# them (LookupError when they do not hold what it quotes: the next matching pattern's cause).
Cause = str | Callable[[list[dict[str, Any]]], str]
# What a cause function may raise when the records lack what it quotes.
UNREADABLE_RECORDS = (LookupError, ValueError, ArithmeticError, TypeError)


@dataclass(frozen=True)
class Anchor:
    """An extra comparison outside the table: a paper number and how to get ours from records.

    ``ours`` receives the ok records of the report's scale and returns one float; ``rule``
    defaults to the spec's default rule. ``cause``, when given, also receives the ok records
    and returns the anchor's cause (shown unless it agrees) in place of the spec's
    ``causes``, for a cause that quotes numbers of the records (LookupError: none).
    ``applies``, when given, receives the ok records and says whether the anchor is shown
    at all (a harness check of an opt-in method setting, say). ``protocol`` and ``rows``
    name the fits the statistic uses (every protocol and every row when empty): an unhealthy
    one (the records' ``health``) makes the anchor "not comparable: fit failed". ``study``
    marks an anchor read from side runs (an input of ours moved): counted and listed with the
    studies, apart from the paper's claims.
    """

    label: str
    paper: str
    ours: AnchorValue
    rule: VerdictRule | None = None
    cause: Callable[[list[dict[str, Any]]], str] | None = None
    applies: Callable[[list[dict[str, Any]]], bool] | None = None
    protocol: str = ""
    rows: tuple[str, ...] = ()
    study: bool = False


@dataclass(frozen=True)
class DataNeed:
    """An image data set (a name of :data:`bench.datasets.vision.IMAGE_SOURCES`) and the splits
    an artifact reads; while its files are missing the report says "needs data": for the whole
    artifact, or only for the ``cells`` (cell patterns) that need it when they are given (an
    optional OOD set's columns), the other cells being reported as usual."""

    name: str
    splits: tuple[str, ...] = ("test",)
    cells: tuple[CellPattern, ...] = ()

    def missing_message(self, root: str | None = None) -> str:
        """One line naming the missing files and their folder under ``$BENCH_DATA_DIR``, or
        "" when the files are under ``root`` (default: the data root)."""
        if all(find_image_files(self.name, split, root) is not None for split in self.splits):
            return ""
        return missing_files_message(self.name, self.splits, SHOWN_ROOT)


@dataclass(frozen=True)
class ArtifactSpec:
    """How to report one artifact (a table or figure of a paper).

    Attributes:
        paper: short paper name, also the targets file name (``bench/targets/<paper>.csv``).
        artifact: the artifact as the paper numbers it (``table-7``, ``figure-5.2``, ``blr``).
        title: one-line title of the report.
        experiment: results folder name; empty means ``<paper>/<artifact>``.
        paper_seed: the seed whose value is shown as "ours at the paper's seed" and judged;
            None where the paper's seed is unknown or the setting is deterministic (the mean
            is judged then).
        target_artifacts: artifacts of the targets CSV holding this report's paper values;
            empty means ``(artifact,)``. Add ``"text"`` to judge numbers quoted in the text.
        ignore_targets: ``(row, column)`` patterns of target cells that are not results
            (inputs, grid bounds); they are left out of the report.
        row_order, column_order: rows/columns to show first, in this order; the rest follow
            in targets-file order, then in the order records produce them.
        rule: the default verdict rule.
        rules: per-cell overrides of ``rule``, keyed by cell pattern (``("*", "kl")`` for a
            column).
        causes: one-line causes keyed by cell pattern, shown next to any verdict that is not
            ``agrees``: a text, or a function of the ok records (of the cell's protocol)
            returning one that quotes them (a side run's numbers); when the function cannot
            read them, the next matching pattern's cause is used.
        not_comparable: cells (and anchors, by ``(label, "")``) whose value cannot be judged
            against the paper's, keyed by cell pattern: the value is the reason, shown as the
            cause of the verdict ``not comparable``, or a function of the ok records (of the
            cell's protocol; all of them for an anchor) returning the reason, or "" when those
            records are comparable (a stand-in row only some scales use). Every matching
            pattern with a reason contributes it, the most specific first. A cell without a
            value is still a gap (``missing``, ``failed``); one without a paper value stays
            ``no paper value``.
        extra_cells: whether cells that only the records have are shown (verdict
            ``no paper value``); when False they are counted in the header instead.
        figure: ``figure(ok_records, spec) -> matplotlib Figure``, saved as ``<artifact>.png``.
        notes: lines printed under the table (scale and seed meaning, deviations, ...).
        anchors: extra comparisons shown in their own small table.
        failed_cells: ``failed_cells(record) -> [(row, column), ...]``, the cells a failed
            record was meant to produce; by default they are taken from ok records with the
            same config apart from the seed.
        needs_data: data sets the artifact cannot run without; with no records and any of
            them missing, the report lists the paper's cells as "needs data" and names the
            files expected (:mod:`bench.reporting.data_needs`). A need with ``cells`` marks
            only those cells "needs data" (when they have no value).
        table_cells: cell patterns the Markdown / LaTeX tables show (empty: every cell); the
            CSV always holds every cell (a figure's full curves stay in the CSV).
        spread: what the table shows beside our mean: ``ci95`` (Student-t 95% interval) or
            ``stderr`` (standard error over seeds, sd / sqrt(k), as papers print their ±).
        value_ranges: ``(low, high)`` ranges keyed by cell pattern, or None for "unbounded";
            a cell's 95% CI is cut at its range (:mod:`bench.reporting.intervals`, which
            otherwise recognises coverages, accuracies and other proportions by name).
        paper_rows: for a study whose rows are variants of the paper's rows: row pattern ->
            the paper row its cells are judged against (``{"* / MAP": "MAP"}``). When given,
            the paper's own rows appear only through the produced rows mapped to them.
        timed: cells (and anchors, by ``(label, "")``) that are seconds or ratios of
            seconds: not comparable unless every record ran on the paper's hardware
            (:func:`bench.reporting.comparability.hardware_reason`), the one rule for
            seconds in every report.
        averaged_sets: column -> the sets the paper averages it over; not comparable when
            the records averaged others
            (:func:`bench.reporting.comparability.averaged_sets_reason`).
        records_health: the experiment's task records each fit's health
            (:mod:`bench.metrics.fit_health`); a judged cell or anchor whose records carry none
            (written before the task recorded it) is then ``not comparable``, as one on a
            failed fit is, instead of passing for healthy.
        leaderboard: the metrics the leaderboard ranks this artifact's rows on, the primary
            first (:mod:`bench.reporting.leaderboard`); empty: not on the leaderboard.
        study: the whole artifact is a sensitivity study of ours (arms that deliberately
            differ from the paper's protocol, e.g. MAP recipes), not a paper artifact: its
            verdicts are counted and listed apart from the paper's rows. Rows that
            ``paper_rows`` maps to another paper row (side runs) are study rows in any spec.
        record_view: ``record_view(record) -> record`` in the paper's vocabulary, applied to
            every record before anything is rendered: a record whose task wrote neutral cells
            (``fitted.cell_units``, :mod:`bench.reporting.record_views`) gets the paper's units
            and names; one written before that is returned as it is.
    """

    paper: str
    artifact: str
    title: str
    experiment: str = ""
    paper_seed: int | None = None
    target_artifacts: tuple[str, ...] = ()
    ignore_targets: tuple[tuple[str, str], ...] = ()
    row_order: tuple[str, ...] = ()
    column_order: tuple[str, ...] = ()
    rule: VerdictRule = field(default_factory=PrintedDigits)
    rules: Mapping[CellPattern, VerdictRule] = field(default_factory=dict)
    causes: Mapping[CellPattern, Cause] = field(default_factory=dict)
    not_comparable: Mapping[CellPattern, NotComparableReason] = field(default_factory=dict)
    extra_cells: bool = True
    figure: FigureFunction | None = None
    notes: tuple[str, ...] = ()
    anchors: tuple[Anchor, ...] = ()
    failed_cells: FailedCells | None = None
    needs_data: tuple[DataNeed, ...] = ()
    spread: str = "ci95"
    table_cells: tuple[CellPattern, ...] = ()
    value_ranges: Mapping[CellPattern, tuple[float, float] | None] = field(default_factory=dict)
    paper_rows: Mapping[str, str] = field(default_factory=dict)
    record_view: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    study: bool = False
    timed: tuple[CellPattern, ...] = ()
    averaged_sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    records_health: bool = False
    leaderboard: tuple[RankedMetric, ...] = ()

    def __post_init__(self) -> None:
        if self.spread not in SPREADS:
            raise ValueError(f"spread={self.spread!r}; choose one of {SPREADS}")
        if not self.experiment:
            object.__setattr__(self, "experiment", f"{self.paper}/{self.artifact}")
        if not self.target_artifacts:
            object.__setattr__(self, "target_artifacts", (self.artifact,))

    @property
    def key(self) -> str:
        """Registry key and CLI name, ``<paper>/<artifact>``."""
        return f"{self.paper}/{self.artifact}"

    def rule_for(self, protocol: str, row: str, column: str) -> VerdictRule:
        """The verdict rule of one cell."""
        return most_specific(self.rules, protocol, row, column, default=self.rule)

    def cause_for(self, protocol: str, row: str, column: str,
                  ok_records: Iterable[dict[str, Any]] = ()) -> str:
        """The spec's cause for one cell ("" if none matches): the most specific matching
        pattern's text, or its function's text on ``ok_records``; a function that cannot read
        them (or returns "") gives way to the next matching pattern."""
        matching = [p for p in self.causes if _matches(p, protocol, row, column)]
        matching.sort(key=_specificity, reverse=True)
        records = list(ok_records)
        for pattern in matching:
            cause = self.causes[pattern]
            if isinstance(cause, str):
                return cause
            try:
                text = cause(records)
            except UNREADABLE_RECORDS:
                continue
            if text:
                return text
        return ""

    def not_comparable_reason(self, protocol: str, row: str, column: str,
                              ok_records: list[dict[str, Any]],
                              declared_only: bool = False) -> str:
        """Why the cell cannot be judged against the paper ("" when it can): the reasons of
        every ``not_comparable`` pattern matching it, most specific first, joined by "; ".
        ``declared_only``: the spec's own ``not_comparable`` reasons alone (a stand-in for the
        paper's method), without seconds on other hardware or other averaged sets."""
        declared = list(self.not_comparable.items())
        if not declared_only:
            declared += [*((pattern, hardware_reason) for pattern in self.timed),
                         *((("*", column), averaged_sets_reason(sets))
                           for column, sets in self.averaged_sets.items())]
        matching = [(p, reason) for p, reason in declared if _matches(p, protocol, row, column)]
        matching.sort(key=lambda item: _specificity(item[0]), reverse=True)
        reasons = []
        for _, reason in matching:
            text = reason if isinstance(reason, str) else reason(ok_records)
            if text and text not in reasons:
                reasons.append(text)
        return "; ".join(reasons)

    def data_gap(self, row: str, column: str, root: str | None = None) -> str:
        """The missing-files line of the first cell-level data need matching the cell whose
        files are absent, else ""."""
        for need in self.needs_data:
            if any(_matches(pattern, "*", row, column) for pattern in need.cells):
                message = need.missing_message(root)
                if message:
                    return message
        return ""

    def paper_row(self, row: str) -> str | None:
        """The paper row whose values judge ``row`` (``paper_rows``; the most specific
        pattern wins), or None when no pattern matches."""
        patterns = {(pattern, "*"): paper_row for pattern, paper_row in self.paper_rows.items()}
        return most_specific(patterns, "*", row, "", default=None)

    def is_study(self, protocol: str, row: str) -> bool:
        """Whether a cell of ``row`` under ``protocol`` belongs to a sensitivity study rather
        than to the paper's rows under the paper's protocol: a study artifact, a protocol
        other than the paper's, or a row that ``paper_rows`` maps to another row."""
        if self.study or protocol not in ("paper", ""):
            return True
        paper_row = self.paper_row(row) if self.paper_rows else None
        return paper_row is not None and paper_row != row

    def is_shown(self, row: str, column: str) -> bool:
        """Whether a cell appears in the Markdown / LaTeX tables (``table_cells``)."""
        return not self.table_cells or any(_matches(pattern, "*", row, column)
                                           for pattern in self.table_cells)

    def is_ignored(self, row: str, column: str) -> bool:
        """Whether a target cell is excluded from the report."""
        return any(
            _part_matches(row_pattern, row) and _part_matches(column_pattern, column)
            for row_pattern, column_pattern in self.ignore_targets
        )


def _full(pattern: CellPattern) -> tuple[str, str, str]:
    if len(pattern) == 2:
        return ("*", *pattern)
    if len(pattern) == 3:
        return pattern
    raise ValueError(f"cell pattern {pattern!r} must be (row, column) or (protocol, row, column)")


def _part_matches(pattern: str, name: str) -> bool:
    return pattern == name or fnmatch.fnmatchcase(name, pattern)


def _matches(pattern: CellPattern, protocol: str, row: str, column: str) -> bool:
    names = (protocol, row, column)
    return all(_part_matches(p, n) for p, n in zip(_full(pattern), names, strict=True))


def _specificity(pattern: CellPattern) -> int:
    def score(part: str) -> int:
        if part == "*":
            return 0
        return 1 if any(ch in part for ch in "*?[") else 2

    return sum(score(part) for part in _full(pattern))


def matching_pattern(patterns: Iterable[CellPattern], protocol: str, row: str,
                     column: str) -> CellPattern | None:
    """The most specific of ``patterns`` matching the cell (first one on ties), else None."""
    best, best_score = None, -1
    for pattern in patterns:
        if _matches(pattern, protocol, row, column) and _specificity(pattern) > best_score:
            best, best_score = pattern, _specificity(pattern)
    return best


def most_specific(mapping: Mapping[CellPattern, Any], protocol: str, row: str, column: str,
                  default: Any) -> Any:
    """Value of the most specific pattern matching the cell (first one on ties), else default."""
    pattern = matching_pattern(mapping, protocol, row, column)
    return default if pattern is None else mapping[pattern]
