"""Laplace Redux Figure 10 from record cells: per WILDS data set and metric, each method's
in-distribution and OOD mean over seeds with its standard error, the error bar cut at the
metric's range (:func:`bench.reporting.intervals.measure_range`).

Cells are named row ``<data set>/<method>``, column ``<id|ood>/<metric>``
(:mod:`bench.tasks.wilds_benchmark`).
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.reporting.claims import Summary, summarise_cells  # noqa: E402
from bench.reporting.intervals import Range, clip_interval, measure_range  # noqa: E402

DATASETS = ("camelyon17", "fmow", "civilcomments", "amazon", "poverty")
# Figure 10's rows, top to bottom (regression takes mse / calibration in the first / fourth).
METRIC_ROWS = (("accuracy", "mse"), ("confidence",), ("nll",), ("ece", "calibration"),
               ("mce",), ("brier",))


def standard_error(summary: Summary) -> float:
    """Half-width of the 95% interval divided by 1.96 (0 with one seed)."""
    if summary.n < 2 or not math.isfinite(summary.high):
        return 0.0
    return (summary.high - summary.mean) / 1.96


def error_bar(summary: Summary, bounds: Range | None) -> tuple[float, float]:
    """Lengths below and above the mean of the bar mean ± SE cut at ``bounds``."""
    error = standard_error(summary)
    low, high = clip_interval(summary.mean - error, summary.mean + error, bounds)
    return summary.mean - low, high - summary.mean


def method_order(summaries: dict[tuple[str, str], Any], spec=None) -> list[str]:
    """The methods of the ``<data set>/<method>`` rows present: in the spec's row order
    first, then the others by name."""
    present = {row.split("/", 1)[1] for row, _ in summaries if "/" in row}
    order = [row.split("/", 1)[1] for row in (spec.row_order if spec is not None else ())]
    ordered = [method for method in dict.fromkeys(order) if method in present]
    return ordered + sorted(present - set(ordered))


def wilds_figure(records: list[dict[str, Any]], spec=None):
    """The figure: one column per data set present, one row per metric group; bars ID
    (plain) and OOD (hatched) per method."""
    summaries = summarise_cells(records)
    present = [d for d in DATASETS if any(row.startswith(f"{d}/") for row, _ in summaries)]
    if not present:
        raise LookupError("no WILDS cells in the records")
    methods = method_order(summaries, spec)
    fig, axes = plt.subplots(len(METRIC_ROWS), len(present), squeeze=False,
                             figsize=(2.6 * len(present), 1.7 * len(METRIC_ROWS)))
    for column, dataset in enumerate(present):
        axes[0][column].set_title(dataset, fontsize=9)
        for line, names in enumerate(METRIC_ROWS):
            ax = axes[line][column]
            drawn = False
            for metric in names:
                bars = {(k, j, split): summaries.get((f"{dataset}/{method}",
                                                      f"{split}/{metric}"))
                        for k, method in enumerate(methods)
                        for j, split in enumerate(("id", "ood"))}
                bounds = measure_range(metric, [s.mean for s in bars.values() if s is not None])
                for (k, j, split), summary in bars.items():
                    if summary is None:
                        continue
                    below, above = error_bar(summary, bounds)
                    ax.bar(k + 0.4 * j, summary.mean, width=0.38,
                           yerr=[[below], [above]], color=f"C{k}",
                           hatch="//" if split == "ood" else None, edgecolor="black",
                           linewidth=0.3)
                    drawn = True
                if drawn:
                    ax.set_ylabel(metric, fontsize=8)
                    break
            ax.set_xticks([k + 0.2 for k in range(len(methods))], methods, fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
            if not drawn:
                ax.set_axis_off()
    seeds = sorted({r["seed"] for r in records})
    fig.suptitle("mean ± SE over model seeds " + ", ".join(map(str, seeds))
                 + "; plain: in distribution, hatched: OOD", fontsize=9)
    fig.tight_layout()
    return fig
