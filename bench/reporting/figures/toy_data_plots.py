"""GGN thesis Figure 5.1 drawn from the records' arrays: the Snelson-with-gap training and test
points (the gap shaded) and the two-moons training points by class."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The gap of notes section 2.1, shaded on the Snelson panel.
SNELSON_GAP = (1.5, 2.4)


def _arrays(records: list[dict[str, Any]], name: str) -> dict[str, list[float]] | None:
    for record in records:
        if record.get("dataset") == name:
            return record.get("arrays") or None
    return None


def toy_data_figure(records: list[dict[str, Any]], spec=None):
    """Left: Snelson with a gap (training points black, test points grey); right: two moons
    (training points coloured by label). A panel without a record says so."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    snelson = _arrays(records, "snelson_gap")
    if snelson:
        left.scatter(snelson["test/x1"], snelson["test/y"], s=2, color="0.75", label="test")
        left.scatter(snelson["train/x1"], snelson["train/y"], s=6, color="black", label="train")
        left.axvspan(*SNELSON_GAP, color="tab:orange", alpha=0.15, label="gap")
        left.legend(fontsize=8)
    else:
        left.text(0.5, 0.5, "no record", ha="center", transform=left.transAxes)
    left.set_title("Snelson with a gap (N = 150)", fontsize=10)
    moons = _arrays(records, "two_moons")
    if moons:
        for label, colour in ((0.0, "tab:blue"), (1.0, "tab:red")):
            chosen = [i for i, y in enumerate(moons["train/y"]) if y == label]
            right.scatter([moons["train/x1"][i] for i in chosen],
                          [moons["train/x2"][i] for i in chosen], s=8, color=colour,
                          label=f"y = {int(label)}")
        right.legend(fontsize=8)
    else:
        right.text(0.5, 0.5, "no record", ha="center", transform=right.transAxes)
    right.set_title("two moons (N = 150)", fontsize=10)
    fig.tight_layout()
    return fig
