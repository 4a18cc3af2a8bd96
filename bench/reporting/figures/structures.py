"""Figures of the Generalized Laplace paper drawn from the records' arrays and cells."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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
