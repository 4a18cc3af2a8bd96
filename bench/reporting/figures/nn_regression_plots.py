"""Figure 2 of the SSLA paper: predictive mean and band on the heteroscedastic toy test points."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = (
    ("SSLA/KFAC", "SSLA/DIAG", "SSLA/DENSE"),
    ("ASSLA/KFAC", "ASSLA/DIAG", "ASSLA/DENSE"),
    ("LA/KFAC", "LA/DIAG", "LA/DENSE"),
    ("VI/MFVI", "VI/VI", "MCMC/HMC"),
)
PROTOCOLS = ("paper", "corrected")


def predictive_bands(records: list[dict[str, Any]], *, seed: int, band: float = 2.0):
    """4 x 3 panels per protocol (side by side): test points, mean and mean ± ``band``·sd.

    ``band=2`` is what the authors' plot drew under a "95 %" label (notes §10.16).
    """
    chosen = [r for r in records if r["seed"] == seed]
    protocols = [p for p in PROTOCOLS if any(r["protocol"] == p for r in chosen)]
    if not protocols:
        raise LookupError(f"no records at seed {seed}")
    fig, axes = plt.subplots(len(PANELS), 3 * len(protocols), squeeze=False,
                             figsize=(2.4 * 3 * len(protocols), 2.0 * len(PANELS)))
    for p, protocol in enumerate(protocols):
        arrays = {}
        for record in (r for r in chosen if r["protocol"] == protocol):
            arrays.update(record["arrays"])
        for i, row in enumerate(PANELS):
            for j, label in enumerate(row):
                ax = axes[i][3 * p + j]
                ax.set_title(f"{label} [{protocol}]", fontsize=7)
                ax.tick_params(labelsize=5)
                if f"{label}/mean" not in arrays:
                    ax.text(0.5, 0.5, "missing", ha="center", transform=ax.transAxes)
                    continue
                order = sorted(range(len(arrays["x_test"])), key=lambda k: arrays["x_test"][k])
                x = [arrays["x_test"][k] for k in order]
                mean = [arrays[f"{label}/mean"][k] for k in order]
                sd = [arrays[f"{label}/sd"][k] for k in order]
                ax.fill_between(x, [m - band * s for m, s in zip(mean, sd, strict=True)],
                                [m + band * s for m, s in zip(mean, sd, strict=True)],
                                alpha=0.3, color="tab:blue", linewidth=0)
                ax.plot(x, mean, color="tab:blue", linewidth=0.8)
                ax.scatter(x, [arrays["y_test"][k] for k in order], s=3, color="black")
    fig.suptitle(f"Heteroscedastic toy, seed {seed}: mean ± {band:g}·sd on the test points",
                 fontsize=9)
    fig.tight_layout()
    return fig
