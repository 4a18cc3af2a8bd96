"""Figures of the Generalized Laplace paper drawn from the records' arrays and cells."""

from __future__ import annotations

import math
import re
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.reporting.claims import summarise_cells  # noqa: E402
from bench.reporting.intervals import clip_band, measure_range  # noqa: E402

TOY_PANELS = ("Diag", "KFAC", "EKFAC", "B-Diag")


def toy_predictives(records: list[dict[str, Any]], spec=None, *, activation: str = "relu"):
    """One panel per structure at the smallest seed: data (black dots), ``x^3`` (black line),
    the MAP (red), the NN-sampling mean (blue) and +-1, 2, 3 function-space sd (shading)."""
    chosen = [r for r in records if r["config"]["network"]["activation"] == activation]
    if not chosen:
        raise LookupError(f"no records with network.activation={activation}")
    record = min(chosen, key=lambda r: r["seed"])
    arrays = record["arrays"]
    fig, axes = plt.subplots(1, len(TOY_PANELS), figsize=(3.0 * len(TOY_PANELS), 2.8),
                             sharey=True)
    x = arrays["x"]
    for ax, row in zip(axes, TOY_PANELS, strict=True):
        ax.set_title(row, fontsize=9)
        ax.tick_params(labelsize=7)
        if f"{row}/mean" not in arrays:
            ax.text(0.5, 0.5, "missing", ha="center", transform=ax.transAxes)
            continue
        mean, sd = arrays[f"{row}/mean"], arrays[f"{row}/sd"]
        for k in (3, 2, 1):
            ax.fill_between(x, [m - k * s for m, s in zip(mean, sd, strict=True)],
                            [m + k * s for m, s in zip(mean, sd, strict=True)],
                            color="tab:blue", alpha=0.15, linewidth=0)
        ax.plot(x, arrays["truth"], color="black", linewidth=0.8)
        ax.plot(x, arrays["map"], color="tab:red", linewidth=0.8)
        ax.plot(x, mean, color="tab:blue", linewidth=0.8)
        ax.scatter(arrays["x_train"], arrays["y_train"], s=3, color="black")
        ax.set_ylim(-150, 150)
    fig.suptitle(f"Cubic toy ({activation}, seed {record['seed']}): NN-sampling predictive, "
                 "mean +- 1, 2, 3 sd (function space)", fontsize=9)
    fig.tight_layout()
    return fig


STRUCTURE_COLORS = {"Diag": "tab:blue", "KFAC": "tab:orange", "EKFAC": "tab:green",
                    "B-Diag": "tab:red", "KFAC (paper-like)": "tab:purple"}
_T_COLUMN = re.compile(r"^(?P<set>[^/]+)/(?P<metric>[a-z_]+)@T=(?P<t>[0-9.e+-]+)$")


def temperature_curve(summaries: dict, row: str, data_set: str, metric: str
                      ) -> list[tuple[float, Any]]:
    """``[(T, summary)]`` of one structure's metric on one set, sorted by T, from
    ``{(row, column): summary}`` with columns ``<set>/<metric>@T=<T>``."""
    curve = []
    for (name, column), summary in summaries.items():
        match = _T_COLUMN.match(column)
        if (name == row and match and match["set"] == data_set
                and match["metric"] == metric):
            curve.append((float(match["t"]), summary))
    return sorted(curve, key=lambda item: item[0])


def _temperature_panel(ax, summaries: dict, data_set: str, metric: str) -> None:
    """Each structure's curve of ``metric`` on ``data_set`` with its band, cut at the metric's
    range (:func:`bench.reporting.intervals.measure_range`)."""
    curves = {row: temperature_curve(summaries, row, data_set, metric)
              for row in STRUCTURE_COLORS}
    bounds = measure_range(metric, [s.mean for curve in curves.values() for _, s in curve])
    for row, color in STRUCTURE_COLORS.items():
        curve = curves[row]
        if not curve:
            continue
        ts = [t for t, _ in curve]
        means = [s.mean for _, s in curve]
        low, high = clip_band([s.low if math.isfinite(s.low) else s.mean for _, s in curve],
                              [s.high if math.isfinite(s.high) else s.mean for _, s in curve],
                              bounds)
        ax.plot(ts, means, marker="o", markersize=2, color=color, label=row, linewidth=1)
        ax.fill_between(ts, low, high, color=color, alpha=0.2, linewidth=0)
    ax.set_xscale("log")
    ax.set_xlabel("T", fontsize=8)
    ax.set_title(f"{data_set}: {metric}", fontsize=9)
    ax.tick_params(labelsize=7)


def temperature_curves(panels: tuple[tuple[str, str], ...]):
    """A figure function drawing, per ``(set, metric)`` panel, each structure's mean over
    seeds against T (log axis) with its 95% band, cut at the metric's range."""

    def draw(records: list[dict[str, Any]], spec=None):
        summaries = summarise_cells(records)
        if not summaries:
            raise LookupError("no ok cells")
        fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 3.0),
                                 squeeze=False)
        for ax, (data_set, metric) in zip(axes[0], panels, strict=True):
            _temperature_panel(ax, summaries, data_set, metric)
        axes[0][0].legend(fontsize=7)
        seeds = sorted({r["seed"] for r in records})
        fig.suptitle(f"Tempered Laplace, NN-sampling predictive: mean over seeds "
                     f"{', '.join(map(str, seeds))} with 95% band (cut at the metric's "
                     "range)", fontsize=9)
        fig.tight_layout()
        return fig

    return draw
