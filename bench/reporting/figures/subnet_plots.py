"""Figures 1 and 2 of the subnetwork paper, drawn from the records' cells.

Cells are named ``<panel>/<metric>@k=<k>`` (subset methods) or ``<panel>/<metric>`` (methods
without a subset size), where ``<panel>`` is ``<specification>/<domain>`` (Figure 1) or
``<likelihood>/<specification>`` (Figure 2). Curves are the mean over seeds (each seed's value
is the mean over its job's replications) with a 95% Student-t band, cut at the metric's
range (:func:`bench.reporting.intervals.measure_range`: W2 at 0, coverage at ``[0, 1]``);
k-free methods are horizontal lines with their band.
"""

from __future__ import annotations

import math
import re
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.reporting.claims import Summary, summarise_cells  # noqa: E402
from bench.reporting.intervals import Range, clip_interval, measure_range  # noqa: E402

SUBSET_ROWS = ("Greedy-Laplace", "Gradient-Laplace", "Gradient-Laplace (test ref.)",
               "Subnet diagonal", "Last k")
PROPOSED_ROWS = ("Greedy-Laplace", "Gradient-Laplace")
FIGURE_1_FLAT_ROWS = ("NeuralLinear", "PrecisionDiag", "Block Laplace")
FIGURE_2_FLAT_ROWS = ("LLA", "Split", "Ensemble", "NeuralLinear", "PrecisionDiag",
                      "Block Laplace")
COLORS = {
    "Greedy-Laplace": "tab:red", "Gradient-Laplace": "tab:blue",
    "Gradient-Laplace (test ref.)": "tab:cyan", "Subnet diagonal": "tab:green",
    "Last k": "tab:orange", "NeuralLinear": "tab:purple", "PrecisionDiag": "tab:brown",
    "Block Laplace": "tab:gray", "LLA": "black", "Split": "tab:olive", "Ensemble": "tab:pink",
}
SPECIFICATIONS = ("misspecified", "wellspecified")
DOMAINS = ("in_distribution", "ood", "mixed")
LIKELIHOODS = ("regression", "classification")
_K_COLUMN = re.compile(r"^(?P<panel>.+)/(?P<metric>[a-z0-9]+)@k=(?P<k>\d+)$")


def subset_curve(values: dict[tuple[str, str], Any], row: str, panel: str,
                 metric: str) -> list[tuple[int, Any]]:
    """``[(k, value)]`` of a subset method in one panel from ``{(row, column): value}``,
    sorted by ``k``."""
    curve = []
    for (name, column), value in values.items():
        match = _K_COLUMN.match(column)
        if name == row and match and match["panel"] == panel and match["metric"] == metric:
            curve.append((int(match["k"]), value))
    return sorted(curve, key=lambda item: item[0])


def _band(summary: Summary, bounds: Range | None) -> tuple[float, float]:
    """The ends of a summary's band cut at ``bounds`` (the mean where it has no band)."""
    if math.isfinite(summary.low) and math.isfinite(summary.high):
        return clip_interval(summary.low, summary.high, bounds)
    return summary.mean, summary.mean


def _draw_panel(ax, summaries, panel: str, metric: str, flat_rows: tuple[str, ...]) -> None:
    """The subset methods' curves of one panel and the k-free methods' lines, each with its
    band cut at the metric's range."""
    curves = {row: subset_curve(summaries, row, panel, metric) for row in SUBSET_ROWS}
    flat = {row: summaries.get((row, f"{panel}/{metric}")) for row in flat_rows}
    bounds = measure_range(metric, [s.mean for curve in curves.values() for _, s in curve]
                           + [s.mean for s in flat.values() if s is not None])
    ks: list[int] = []
    for row, curve in curves.items():
        if not curve:
            continue
        ks = [k for k, _ in curve]
        means = [s.mean for _, s in curve]
        lows, highs = zip(*(_band(s, bounds) for _, s in curve), strict=True)
        style = "--" if "test ref." in row else "-"
        ax.plot(ks, means, style, marker="o", markersize=2.5, linewidth=1.0,
                color=COLORS[row], label=row, zorder=3 if row in PROPOSED_ROWS else 2)
        ax.fill_between(ks, lows, highs, color=COLORS[row], alpha=0.15, linewidth=0)
    for row, summary in flat.items():
        if summary is None or not ks:
            continue
        ax.axhline(summary.mean, color=COLORS[row], linestyle=":", linewidth=1.2, label=row)
        low, high = _band(summary, bounds)
        ax.axhspan(low, high, color=COLORS[row], alpha=0.05, linewidth=0)
    ax.set_xscale("log")
    ax.set_xlabel("subset size k", fontsize=7)
    ax.tick_params(which="both", labelsize=6)


def _curve_panels(records: list[dict[str, Any]], rows: tuple[str, ...],
                  columns: tuple[str, ...], metric: str, flat_rows: tuple[str, ...],
                  figsize: tuple[float, float]):
    """A figure of ``len(rows) x len(columns)`` panels, panel ``<row>/<column>`` holding the
    curves of ``metric`` (:func:`_draw_panel`); returns the figure, its axes and
    ``[(ax, row, column)]`` for the caller's per-panel styling."""
    summaries = summarise_cells(records)
    fig, axes = plt.subplots(len(rows), len(columns), figsize=figsize, squeeze=False)
    panels = []
    for i, row in enumerate(rows):
        for j, column in enumerate(columns):
            _draw_panel(axes[i][j], summaries, f"{row}/{column}", metric, flat_rows)
            panels.append((axes[i][j], row, column))
    return fig, axes, panels


def _finish(fig, axes, title: str, records: list[dict[str, Any]], bottom: float):
    """One legend for all panels, ``title`` with the seed count, the panels above the legend."""
    _legend(fig, axes)
    fig.suptitle(f"{title} (mean over seeds, 95% CI; {_seed_count(records)})", fontsize=9)
    fig.tight_layout(rect=(0, bottom, 1, 0.96))
    return fig


def w2_curves(records: list[dict[str, Any]], spec=None):
    """Figure 1: mean W2 to the full-LLA predictive vs k, rows = working model, columns =
    test domain (log y axis)."""
    fig, axes, panels = _curve_panels(records, SPECIFICATIONS, DOMAINS, "w2",
                                      FIGURE_1_FLAT_ROWS, (11, 6.2))
    for ax, specification, domain in panels:
        ax.set_yscale("log")
        ax.set_title(f"{specification}, {domain} test", fontsize=8)
        ax.set_ylabel("mean W2 to full LLA", fontsize=7)
    return _finish(fig, axes, "Subnetwork Figure 1: W2 vs k", records, 0.07)


def coverage_curves(records: list[dict[str, Any]], spec=None):
    """Figure 2: coverage of 95% intervals for ``f_theta0`` vs k, rows = task, columns =
    working model; LLA, Split, Ensemble and the other k-free surrogates as horizontal lines."""
    fig, axes, panels = _curve_panels(records, LIKELIHOODS, SPECIFICATIONS, "cov95",
                                      FIGURE_2_FLAT_ROWS, (9, 6.8))
    for ax, likelihood, specification in panels:
        ax.axhline(0.95, color="black", linewidth=0.6, alpha=0.5)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{likelihood}, {specification}", fontsize=8)
        ax.set_ylabel("coverage of f_theta0 (95% intervals)", fontsize=7)
    return _finish(fig, axes, "Subnetwork Figure 2: coverage vs k", records, 0.08)


def _legend(fig, axes) -> None:
    handles, labels = {}, []
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in handles:
                handles[label] = handle
                labels.append(label)
    fig.legend([handles[label] for label in labels], labels, loc="lower center", ncol=6,
               fontsize=7, frameon=False)


def _seed_count(records: list[dict[str, Any]]) -> str:
    seeds = {r["seed"] for r in records}
    replications = {int(r["config"].get("replications_per_job", 1)) for r in records}
    per_job = "/".join(str(n) for n in sorted(replications))
    return f"{len(seeds)} seeds x {per_job} replications each"
