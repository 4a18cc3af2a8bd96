"""Laplace Redux Figure 8's two scatter rows: every variant of the grid as a point of
in-distribution accuracy (x) against OOD AUROC averaged over the OOD sets (y), one column per
(training data, augmentation) panel; row 1 coloured by Hessian structure, row 2 by link
approximation; the marker says the subset of weights and the hyperparameter fitting, the MAP
network is a black star.

Rows of the records read ``"<data>, <DA|no DA> / <subset> <structure> <hyper> <link>"`` or
``"<data>, <DA|no DA> / MAP"`` (:mod:`bench.tasks.laplace_variants`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bench.reporting.claims import cell_means  # noqa: E402

STRUCTURE_COLORS = {"diag": "tab:blue", "kron": "tab:orange", "full": "tab:green",
                    "lowrank": "tab:brown"}
# A variant whose predictive misstates its own accuracy by more than this (corrected ECE, %)
# is broken, not a contender: it stays in the tables but no anchor compares with it and the
# figure leaves it out of its axes (it names how many). On the MNIST / FMNIST grid these are
# the low-rank posteriors' probit rows, near-uniform predictives (mean confidence about 11 % at
# 89-99 % accuracy) whose confidences still rank the OOD sets above the test sets (notes).
BROKEN_ECE = 50.0
LINK_COLORS = {"mc": "tab:purple", "probit": "tab:red", "bridge": "tab:cyan"}
MARKERS = {("LL", "post-hoc"): "o", ("all", "post-hoc"): "s", ("all", "online"): "^",
           ("LL", "online"): "v"}


@dataclass(frozen=True)
class VariantRow:
    """A row of the grid's table, parsed: its panel and its value on each axis."""

    panel: str
    subset: str
    structure: str
    hyper: str
    link: str

    @property
    def is_default(self) -> bool:
        """Laplace Redux's default: last-layer KFAC, post-hoc marglik, probit."""
        return (self.subset, self.structure, self.hyper, self.link) == (
            "LL", "kron", "post-hoc", "probit")


def parse_row(row: str) -> VariantRow | None:
    """The parsed variant row, or None for the MAP row and anything else."""
    panel, _, rest = row.partition(" / ")
    parts = rest.split()
    if len(parts) != 4:
        return None
    return VariantRow(panel, *parts)


def is_broken(cells: dict[str, float]) -> bool:
    """Whether a variant's corrected ECE is above :data:`BROKEN_ECE` (records without the
    column count as not broken)."""
    return cells.get("ece_corrected", 0.0) > BROKEN_ECE


def panels(means: dict[tuple[str, str], float]) -> list[str]:
    """The (data, augmentation) panels the cells cover, in name order."""
    return sorted({row.partition(" / ")[0] for row, _ in means})


def variant_scatter(records: list[dict[str, Any]], spec=None):
    """Two rows of scatter panels (module docstring), mean over seeds per variant."""
    means = cell_means(records)
    names = panels(means)
    fig, axes = plt.subplots(2, len(names), figsize=(3.3 * len(names), 6.0), squeeze=False)
    for column, panel in enumerate(names):
        for row_index, (attribute, colors) in enumerate(
                (("structure", STRUCTURE_COLORS), ("link", LINK_COLORS))):
            ax = axes[row_index][column]
            excluded = 0
            for (row, cell), acc in means.items():
                if cell != "acc" or not row.startswith(panel + " / "):
                    continue
                auroc = means.get((row, "auroc"))
                if auroc is None:
                    continue
                if is_broken({"ece_corrected": means.get((row, "ece_corrected"), 0.0)}):
                    excluded += 1
                    continue
                parsed = parse_row(row)
                if parsed is None:
                    ax.scatter(acc, auroc, marker="*", s=90, color="black", zorder=3)
                    continue
                ax.scatter(acc, auroc, color=colors.get(getattr(parsed, attribute), "grey"),
                           marker=MARKERS.get((parsed.subset, parsed.hyper), "x"), s=28,
                           edgecolors="black" if parsed.is_default else "none", zorder=2)
            if excluded:
                ax.text(0.02, 0.02, f"{excluded} broken predictive(s) not shown "
                        f"(corrected ECE > {BROKEN_ECE:g} %)", transform=ax.transAxes,
                        fontsize=6, color="dimgrey")
            ax.set_title(f"{panel} ({'structure' if row_index == 0 else 'link'})", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.set_xlabel("Acc. (ID, %)", fontsize=7)
            ax.set_ylabel("mean OOD AUROC (%)", fontsize=7)
    handles = [plt.Line2D([], [], linestyle="", marker="o", color=c, label=k)
               for k, c in {**STRUCTURE_COLORS, **LINK_COLORS}.items()]
    handles += [plt.Line2D([], [], linestyle="", marker=m, color="grey",
                           label=f"{subset} {hyper}") for (subset, hyper), m in MARKERS.items()
                if (subset, hyper) != ("LL", "online")]
    handles.append(plt.Line2D([], [], linestyle="", marker="*", color="black", label="MAP"))
    fig.legend(handles=handles, loc="lower center", ncol=5, fontsize=7, frameon=False)
    fig.suptitle("Laplace variants: accuracy vs mean OOD AUROC (black edge: the default "
                 "LL kron post-hoc probit)", fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    return fig
