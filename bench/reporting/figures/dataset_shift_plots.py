"""Figures of metrics against shift intensity (Laplace Redux Figure 9), from record cells.

Cells are named ``<kind>=<level>/<metric>`` (:mod:`bench.tasks.dataset_shift`); a panel draws
one line per method row: the mean over seeds with its 95% band, cut at the metric's range
(:func:`bench.reporting.intervals.measure_range`: accuracy at ``[0, 1]``, the Brier score at
``[0, 2]``).
"""

from __future__ import annotations

import re
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.reporting.claims import Summary, summarise_cells  # noqa: E402
from bench.reporting.intervals import clip_band, measure_range  # noqa: E402

_LEVEL_COLUMN = re.compile(r"^(?P<kind>[a-z]+)=(?P<level>[-0-9.e+]+)/(?P<metric>[a-z_]+)$")


def shift_curve(summaries: dict[tuple[str, str], Any], row: str, metric: str
                ) -> list[tuple[float, Any]]:
    """``[(level, value)]`` of one row's metric sorted by level, from ``{(row, column): v}``."""
    curve = []
    for (name, column), value in summaries.items():
        match = _LEVEL_COLUMN.match(column)
        if name == row and match and match["metric"] == metric:
            curve.append((float(match["level"]), value))
    return sorted(curve, key=lambda item: item[0])


def shift_rows(summaries: dict[tuple[str, str], Any], order: tuple[str, ...] = ()) -> list[str]:
    """Rows with shift cells: those of ``order`` (the spec's row order) first, in it, then
    the others sorted."""
    rows = {row for row, column in summaries if _LEVEL_COLUMN.match(column)}
    return [r for r in order if r in rows] + sorted(rows - set(order))


def shift_curves(metrics: tuple[str, ...], axis_label: str):
    """A figure function: one panel per metric, each method's mean over seeds against the
    shift level with its 95% band cut at the metric's range (no band with one seed)."""

    def draw(records: list[dict[str, Any]], spec=None):
        summaries: dict[tuple[str, str], Summary] = summarise_cells(records)
        rows = shift_rows(summaries, tuple(spec.row_order) if spec is not None else ())
        if not rows:
            raise LookupError("no shift cells in the records")
        fig, axes = plt.subplots(1, len(metrics), figsize=(3.8 * len(metrics), 3.0),
                                 squeeze=False)
        for ax, metric in zip(axes[0], metrics, strict=True):
            curves = {row: shift_curve(summaries, row, metric) for row in rows}
            bounds = measure_range(metric, [s.mean for curve in curves.values()
                                            for _, s in curve])
            for row, curve in curves.items():
                levels = [level for level, _ in curve]
                line, = ax.plot(levels, [s.mean for _, s in curve], marker=".", label=row)
                lows, highs = clip_band([s.low for _, s in curve], [s.high for _, s in curve],
                                        bounds)
                ax.fill_between(levels, lows, highs, color=line.get_color(), alpha=0.15,
                                linewidth=0)
            ax.set_xlabel(axis_label)
            ax.set_ylabel(metric)
        axes[0][0].legend(fontsize=7)
        seeds = sorted({r["seed"] for r in records})
        fig.suptitle(f"mean over model seeds {', '.join(map(str, seeds))} with 95% band "
                     "(cut at the metric's range)", fontsize=9)
        fig.tight_layout()
        return fig

    return draw
