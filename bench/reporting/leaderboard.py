"""The leaderboard: every method that ran on an experiment, ranked, and each method's mean rank
across experiments (``python -m bench.report --leaderboard``, ``reports/leaderboard.md``).

Built from the records already there, at one scale. An artifact is on it when its spec names
``leaderboard`` metrics (:class:`bench.reporting.ranking.RankedMetric`, the primary first).
Per artifact:

- **one protocol**: the corrected one where it has ok records (the paper code's quirks are
  not a method's merit), else the paper's; rows that ran only under another protocol are
  listed as not ranked;
- **only healthy fits, on every seed**: for each row and seed the latest ok record counts
  (a rerun supersedes, values and health alike); a row is ranked when every seed that the
  protocol's records hold has an ok value of the primary metric and a health verdict, and
  every verdict is healthy. Otherwise it is listed as not ranked, with the reason: a failed
  or missing job, a failed fit, or records written before fit health (ranking its other
  seeds would choose seeds by their outcome);
- **only the paper's methods under their names**: a row whose primary cell the spec declares
  not comparable (``not_comparable``: a stand-in, e.g. Table 2's last-layer LA/FULL at cpu
  scale) is listed as not ranked, with the spec's reason;
- rows ranked on the primary metric's mean over seeds with its 95% Student-t interval, ties
  marked where the intervals overlap; the other metrics are shown beside it.

Across artifacts, a row name's mean rank and mean normalised rank (:func:`mean_ranks`) over
the artifacts it was ranked in. Row names are the tables' own (``LA`` in Laplace Redux,
``LA/KFAC`` in SSLA), so a method's rows meet across artifacts only where the tables name
them alike (a method of the user's own has one name everywhere).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.records import iter_records
from bench.reporting.aggregate import finished_order
from bench.reporting.files import write_atomically
from bench.reporting.ranking import Standing, mean_ranks, ranked, scored
from bench.reporting.spec import ArtifactSpec

PREFERRED_PROTOCOLS = ("corrected", "paper", "")
PAGE_NAME = "leaderboard"
NO_HEALTH = "health not recorded (records written before fit health; rerun to rank it)"


class LeaderboardError(ValueError):
    """A leaderboard that cannot be drawn as asked (one line)."""


@dataclass
class ArtifactBoard:
    """One artifact's part of the leaderboard."""

    spec: ArtifactSpec
    protocol: str = ""
    n_records: int = 0
    standings: list[Standing] = field(default_factory=list)
    others: dict[str, dict[str, tuple[float, float, float]]] = field(default_factory=dict)
    not_ranked: dict[str, str] = field(default_factory=dict)


def chosen_protocol(records: list[dict[str, Any]]) -> str:
    """The protocol ranked: the first of :data:`PREFERRED_PROTOCOLS` that has ok records,
    else the first protocol that has any ("" when none has)."""
    present = list(dict.fromkeys(str(r.get("protocol", "")) for r in records
                                 if r.get("status") == "ok"))
    for protocol in PREFERRED_PROTOCOLS:
        if protocol in present:
            return protocol
    return present[0] if present else ""


def latest_per_row_and_seed(records: list[dict[str, Any]]
                            ) -> dict[str, dict[Any, dict[str, Any]]]:
    """row -> seed -> the latest ok record holding a cell of that row (a rerun supersedes
    the record before it, health and values alike)."""
    latest: dict[str, dict[Any, dict[str, Any]]] = {}
    for record in sorted(records, key=lambda r: finished_order(r.get("finished_at"))):
        if record.get("status") != "ok":
            continue
        for row in dict.fromkeys(cell["row"] for cell in record.get("cells") or ()):
            latest.setdefault(row, {})[record.get("seed")] = record
    return latest


def cell_value(record: dict[str, Any], row: str, column: str) -> float:
    """The record's value of one cell (NaN when it has none)."""
    for cell in record.get("cells") or ():
        if cell["row"] == row and cell["column"] == column and cell["value"] is not None:
            return float(cell["value"])
    return math.nan


def not_ranked_reason(by_seed: dict[Any, dict[str, Any]], row: str, column: str,
                      seeds: set[Any]) -> str:
    """Why ``row`` is not ranked ("" when it is): a seed of the protocol without an ok
    value of the primary metric (a failed or missing job), a record without health, or an
    unhealthy fit, on any seed."""
    missing = sorted((str(seed) for seed in seeds
                      if seed not in by_seed or not math.isfinite(
                          cell_value(by_seed[seed], row, column))), key=str)
    if missing:
        return (f"no ok {column} on seed(s) {', '.join(missing)} of this protocol (failed or "
                "not run): ranking the other seeds would choose seeds by their outcome")
    failed = []
    for seed, record in sorted(by_seed.items(), key=lambda item: str(item[0])):
        entry = (record.get("health") or {}).get(row)
        if entry is None:
            return NO_HEALTH
        if not entry.get("healthy", False):
            failed.append(f"seed {seed}: {entry.get('why', '')}")
    if failed:
        more = f"; and {len(failed) - 2} more" if len(failed) > 2 else ""
        return f"fit failed ({'; '.join(failed[:2])}{more})"
    return ""


def artifact_board(spec: ArtifactSpec, records: list[dict[str, Any]]) -> ArtifactBoard:
    """Rank the spec's rows on its leaderboard metrics from its records (any protocol)."""
    if spec.record_view is not None:
        records = [spec.record_view(record) for record in records]
    protocol = chosen_protocol(records)
    mine = [r for r in records if str(r.get("protocol", "")) == protocol]
    ok = [r for r in mine if r.get("status") == "ok"]
    board = ArtifactBoard(spec, protocol, len(ok))
    if not ok:
        return board
    columns = {cell["column"] for record in ok for cell in record.get("cells") or ()}
    for metric in spec.leaderboard:
        if metric.column not in columns:
            raise LeaderboardError(
                f"{spec.key}: leaderboard metric {metric.column!r} is not a column of its "
                f"records; columns: {', '.join(sorted(columns)[:12])}")
    primary, *others = spec.leaderboard
    seeds = {record.get("seed") for record in mine}
    latest = latest_per_row_and_seed(ok)
    ranked_rows = {}
    for row, by_seed in latest.items():
        if not any(cell["row"] == row and cell["column"] == primary.column
                   for record in by_seed.values() for cell in record.get("cells") or ()):
            continue
        reason = (not_ranked_reason(by_seed, row, primary.column, seeds)
                  or spec.not_comparable_reason(protocol, row, primary.column, ok,
                                                declared_only=True))
        if reason:
            board.not_ranked[row] = reason
        else:
            ranked_rows[row] = by_seed
    elsewhere = {cell["row"] for r in records if r.get("status") == "ok"
                 and str(r.get("protocol", "")) != protocol for cell in r.get("cells") or ()
                 if cell["column"] == primary.column} - set(latest)
    for row in elsewhere:
        board.not_ranked[row] = f"no records under the protocol ranked here ({protocol})"
    board.standings = ranked({row: {seed: cell_value(record, row, primary.column)
                                    for seed, record in by_seed.items()}
                              for row, by_seed in ranked_rows.items()}, primary)
    for metric in others:
        board.others[metric.label] = {}
        for row, by_seed in ranked_rows.items():
            values = {seed: cell_value(record, row, metric.column)
                      for seed, record in by_seed.items()}
            if any(math.isfinite(v) for v in values.values()):
                board.others[metric.label][row] = tuple(scored(values, metric)[i]
                                                        for i in (0, 2, 3))
    return board


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (its pipes escaped)."""
    return " ".join(text.split()).replace("|", "\\|")


def _number(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:.4g}"


def _interval(mean: float, low: float, high: float) -> str:
    if not math.isfinite(low):
        return f"{_number(mean)} (1 seed)"
    return f"{_number(mean)} [{_number(low)}, {_number(high)}]"


def board_markdown(board: ArtifactBoard) -> list[str]:
    """The artifact's section of the page."""
    spec = board.spec
    lines = [f"## {spec.key}: {spec.title}", ""]
    if not board.n_records:
        lines += ["No records at this scale.", ""]
        return lines
    metrics = spec.leaderboard
    protocol = board.protocol or "(one protocol)"
    plural = "" if board.n_records == 1 else "s"
    lines += [f"Protocol ranked: `{protocol}`; {board.n_records} ok record{plural}. Ranked on "
              f"{_cell(metrics[0].label)}, mean over seeds [95% CI]; `≈` names the rows whose "
              "interval overlaps (a tie).", ""]
    header = ["rank", "row", _cell(metrics[0].label), "ties",
              *(_cell(m.label) for m in metrics[1:]), "seeds"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in board.standings:
        others = [_interval(*board.others[m.label][s.row]) if s.row in board.others[m.label]
                  else "–" for m in metrics[1:]]
        ties = ("≈ " + ", ".join(s.tied_with) if s.tied_with
                else "undetermined (no interval)" if not math.isfinite(s.ci_low) else "")
        cells = [str(s.rank), _cell(s.row), _interval(s.mean, s.ci_low, s.ci_high),
                 _cell(ties), *others, str(s.n_seeds)]
        lines.append("| " + " | ".join(cells) + " |")
    if not board.standings:
        lines.append("| " + " | ".join(["–", "no ranked row", *[""] * (len(header) - 2)])
                     + " |")
    lines.append("")
    if board.not_ranked:
        lines += ["Not ranked:", ""]
        lines += [f"- {row}: {why}" for row, why in sorted(board.not_ranked.items())]
        lines.append("")
    return lines


def overall_ranks(boards: Iterable[ArtifactBoard]) -> list[tuple[str, float, float, int]]:
    """Every ranked row's mean rank over the artifacts that ranked two rows or more
    (:func:`mean_ranks`; a row alone on its board was compared with nothing)."""
    entries = [(board.spec.key, s.row, s.rank, len(board.standings))
               for board in boards if len(board.standings) > 1 for s in board.standings]
    return mean_ranks(entries)


def leaderboard_markdown(boards: list[ArtifactBoard], scale: str) -> str:
    """The whole page."""
    overall = overall_ranks(boards)
    lines = [f"# Leaderboard ({scale} scale)", "",
             "Every method that ran on an artifact whose report names leaderboard metrics, "
             "ranked from the records (`python -m bench.report --leaderboard`). Only healthy "
             "fits on every seed count: a row with a failed fit or a failed job on any seed, "
             "or whose records predate fit health, is listed under its artifact as not "
             "ranked. Where an artifact has a "
             "corrected protocol beside the paper's, the corrected one is ranked (the paper "
             "code's quirks are not a method's merit). Row names are each table's own.", "",
             "## Across artifacts", "",
             "Mean rank on each artifact's primary metric, and the mean normalised rank "
             "(rank - 1) / (rows ranked - 1): 0 first, 1 last, so that artifacts with many "
             "rows do not weigh more; artifacts that ranked fewer than two rows are left out. "
             "Ranks are by mean: rows tied within their intervals still get distinct ranks "
             "here (the ties are marked per artifact). Sorted by the normalised rank.", "",
             "| row | mean normalised rank | mean rank | artifacts |", "|---|---|---|---|"]
    lines += [f"| {_cell(row)} | {norm:.2f} | {rank:.2f} | {count} |"
              for row, rank, norm, count in overall]
    if not overall:
        lines.append("| – | no ranked row | | |")
    lines += ["", f"![ranks]({PAGE_NAME}.png)", ""]
    for board in boards:
        lines += board_markdown(board)
    return "\n".join(lines).rstrip() + "\n"


def ranks_figure(boards: list[ArtifactBoard]):
    """A heat map of normalised ranks: rows by their mean, one column per artifact."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    overall = overall_ranks(boards)
    ranked_boards = [b for b in boards if len(b.standings) > 1]
    rows = [row for row, *_ in overall]
    grid = np.full((len(rows), max(len(ranked_boards), 1)), np.nan)
    for j, board in enumerate(ranked_boards):
        count = len(board.standings)
        for s in board.standings:
            grid[rows.index(s.row), j] = (s.rank - 1) / (count - 1) if count > 1 else 0.0
    figure, axes = plt.subplots(figsize=(2 + 1.2 * grid.shape[1], 1 + 0.35 * max(len(rows), 1)))
    if not rows:
        axes.text(0.5, 0.5, "no ranked row at this scale", ha="center", va="center")
        axes.set_axis_off()
        return figure
    image = axes.imshow(grid, cmap="viridis_r", vmin=0, vmax=1, aspect="auto")
    axes.set_xticks(range(len(ranked_boards)),
                    [b.spec.key for b in ranked_boards], rotation=30, ha="right")
    axes.set_yticks(range(len(rows)), rows)
    figure.colorbar(image, ax=axes, label="normalised rank (0 first)")
    axes.set_title("Leaderboard: normalised rank per artifact (blank: not ranked)")
    figure.tight_layout()
    return figure


def leaderboard_boards(specs: Iterable[ArtifactSpec], results_dir: Path,
                       scale: str) -> list[ArtifactBoard]:
    """One board per spec with leaderboard metrics, from its records at ``scale``."""
    boards = []
    for spec in specs:
        if spec.leaderboard:
            records = list(iter_records(results_dir, spec.experiment, scale))
            boards.append(artifact_board(spec, records))
    return boards


def write_leaderboard(specs: Iterable[ArtifactSpec], results_dir: Path, out_dir: Path,
                      scale: str) -> list[Path]:
    """Render ``<out>/leaderboard.md``, ``.png`` and ``.csv`` (smoke scale: under
    ``<out>/smoke/``, as the smoke reports); returns the paths written."""
    import matplotlib.pyplot as plt

    folder = Path(out_dir) / "smoke" if scale == "smoke" else Path(out_dir)
    boards = leaderboard_boards(specs, results_dir, scale)
    figure = ranks_figure(boards)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(figure)
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(["artifact", "protocol", "row", "rank", "score", "mean", "ci_low",
                     "ci_high", "n_seeds", "tied_with"])
    for board in boards:
        for s in board.standings:
            writer.writerow([board.spec.key, board.protocol, s.row, s.rank,
                             board.spec.leaderboard[0].label, repr(s.mean), repr(s.ci_low),
                             repr(s.ci_high), s.n_seeds, "; ".join(s.tied_with)])
    return [write_atomically(folder / f"{PAGE_NAME}.md", leaderboard_markdown(boards, scale)),
            write_atomically(folder / f"{PAGE_NAME}.png", buffer.getvalue()),
            write_atomically(folder / f"{PAGE_NAME}.csv", table.getvalue())]
