"""Continual-learning figures (Laplace Redux appendix C.4) drawn from record cells.

Cells are named ``[map/]after=<t>/task=<s>`` (accuracy in % on task s after learning task t)
and ``[map/]after=<t>/mean`` (:mod:`bench.tasks.continual_learning`). The figure shows, per
structure row, the task-by-task accuracy matrix of the Laplace predictive where it was
evaluated and of the network's own argmax, and the mean accuracy over the tasks seen so far
against the number of tasks learned; every value is the mean over seeds.
"""

from __future__ import annotations

import math
import re
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.reporting.claims import summarise_cells  # noqa: E402

_MATRIX_COLUMN = re.compile(r"^(?P<map>map/)?after=(?P<t>\d+)/task=(?P<s>\d+)$")
_MEAN_COLUMN = re.compile(r"^(?P<map>map/)?after=(?P<t>\d+)/mean$")


def accuracy_matrix(means: dict[tuple[str, str], float], row: str, network: bool
                    ) -> list[list[float]]:
    """``matrix[t-1][s-1]``: one row's mean accuracy on task s after task t (NaN where not
    evaluated), from ``{(row, column): mean}``; ``network`` picks the ``map/`` cells."""
    entries = {}
    for (name, column), value in means.items():
        match = _MATRIX_COLUMN.match(column)
        if name == row and match and bool(match["map"]) == network:
            entries[(int(match["t"]), int(match["s"]))] = value
    size = max((max(key) for key in entries), default=0)
    return [[entries.get((t, s), math.nan) for s in range(1, size + 1)]
            for t in range(1, size + 1)]


def mean_curve(means: dict[tuple[str, str], float], row: str, network: bool
               ) -> list[tuple[int, float]]:
    """``[(t, mean accuracy over tasks 1..t after task t)]`` where evaluated, sorted by t."""
    curve = []
    for (name, column), value in means.items():
        match = _MEAN_COLUMN.match(column)
        if name == row and match and bool(match["map"]) == network:
            curve.append((int(match["t"]), value))
    return sorted(curve)


def continual_figure(records: list[dict[str, Any]], spec=None):
    """Per structure row: the Laplace predictive's accuracy matrix, the network's argmax
    matrix (rows: after task t, columns: test task s) and the mean-over-seen-tasks curves."""
    means = {key: summary.mean for key, summary in summarise_cells(records).items()}
    present = {row for row, _ in means}
    order = [row for row in (spec.row_order if spec is not None else ()) if row in present]
    rows = order + sorted(present - set(order))
    if not rows:
        raise LookupError("no continual-learning cells in the records")
    fig, axes = plt.subplots(len(rows), 3, figsize=(11.0, 3.4 * len(rows)), squeeze=False)
    for line, row in zip(axes, rows, strict=True):
        for ax, network, label in ((line[0], False, "Laplace GLM-probit"),
                                   (line[1], True, "network argmax (MAP)")):
            matrix = accuracy_matrix(means, row, network)
            image = ax.imshow(matrix, vmin=0, vmax=100, cmap="viridis")
            size = len(matrix)
            for t in range(size):
                for s in range(size):
                    if not math.isnan(matrix[t][s]):
                        ax.text(s, t, f"{matrix[t][s]:.0f}", ha="center", va="center",
                                fontsize=6, color="white" if matrix[t][s] < 60 else "black")
            ax.set_xticks(range(size), [str(s + 1) for s in range(size)], fontsize=7)
            ax.set_yticks(range(size), [str(t + 1) for t in range(size)], fontsize=7)
            ax.set_xlabel("test task", fontsize=8)
            ax.set_ylabel("after learning task", fontsize=8)
            ax.set_title(f"{row}: {label} accuracy (%)", fontsize=9)
            fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        for network, label, style in ((False, "Laplace GLM-probit", "o-"),
                                      (True, "network argmax", "s--")):
            curve = mean_curve(means, row, network)
            line[2].plot([t for t, _ in curve], [v for _, v in curve], style, label=label,
                         markersize=4)
        line[2].xaxis.get_major_locator().set_params(integer=True)
        line[2].set_xlabel("tasks learned", fontsize=8)
        line[2].set_ylabel("mean accuracy over seen tasks (%)", fontsize=8)
        line[2].set_title(row, fontsize=9)
        line[2].legend(fontsize=7)
    seeds = sorted({r["seed"] for r in records})
    fig.suptitle(f"Permuted MNIST, mean over seeds {', '.join(map(str, seeds))}; blank: not "
                 "evaluated at this scale", fontsize=9)
    fig.tight_layout()
    return fig
