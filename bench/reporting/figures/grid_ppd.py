"""Panels of grid predictives (SSLA, ASSLA, exact) for the SSLA paper's conjugate figures."""

from __future__ import annotations

import math
import re
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "ssla": {"color": "red", "marker": "o", "label": "SSLA"},
    "assla": {"color": "black", "marker": "x", "label": "ASSLA"},
}
PROTOCOLS = ("paper", "corrected")


def _panel_order(label: str) -> tuple:
    """Sort key putting ``n=20`` before ``n=100`` (records store keys alphabetically)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", label))


def _panel_labels(record: dict[str, Any]) -> list[str]:
    labels = [key.removesuffix("/grid") for key in record["arrays"] if key.endswith("/grid")]
    return sorted(labels, key=_panel_order)


def _kl(record: dict[str, Any], variant: str, label: str) -> float:
    for cell in record["cells"]:
        if cell["row"] == f"{variant}/{label}" and cell["column"].endswith("_kl"):
            return cell["value"]
    return math.nan


def grid_ppd_panels(records: list[dict[str, Any]], *, variant: str, seed: int,
                    title: str, ymax: float | None = None):
    """Rows = protocols, columns = panels (n or prior); exp(log-PPD) of SSLA, ASSLA, exact.

    Densities are drawn unnormalised, as the authors' figures do; legends carry each curve's
    KL score against the exact predictive on the grid.
    """
    chosen = [r for r in records if r["variant"] == variant and r["seed"] == seed]
    protocols = [p for p in PROTOCOLS if any(r["protocol"] == p for r in chosen)]
    if not chosen or not protocols:
        raise LookupError(f"no records for variant {variant!r} at seed {seed}")
    labels = _panel_labels(chosen[0])
    fig, axes = plt.subplots(len(protocols), len(labels), squeeze=False,
                             figsize=(2.6 * len(labels), 2.4 * len(protocols)))
    for i, protocol in enumerate(protocols):
        for j, label in enumerate(labels):
            ax = axes[i][j]
            exact_drawn = False
            for record in (r for r in chosen if r["protocol"] == protocol):
                grid = record["arrays"][f"{label}/grid"]
                if not exact_drawn:
                    exact = [math.exp(v) for v in record["arrays"][f"{label}/exact_log_ppd"]]
                    ax.plot(grid, exact, "--", color="green", label="analytic")
                    exact_drawn = True
                style = STYLE.get(record["method"], {"label": record["method"]})
                values = [math.exp(v) if v is not None else math.nan
                          for v in record["arrays"][f"{label}/log_ppd"]]
                kl = _kl(record, variant, label)
                ax.plot(grid, values, markersize=3, linewidth=0.8, **{
                    **style, "label": f"{style['label']} (KL={kl:.1e})"})
            ax.set_title(f"{label} [{protocol}]", fontsize=8)
            ax.tick_params(labelsize=6)
            if ymax is not None:
                ax.set_ylim(0, ymax)
            ax.legend(fontsize=5, loc="upper right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
