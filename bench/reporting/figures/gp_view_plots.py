"""GGN thesis Figure 5.6, drawn from the arrays of one record of ``bench.tasks.gp_explanations``:
(a) the sorted training importances with example images at both ends and in the middle,
(b) three test images, each with its 8 training images of largest GGN-kernel value."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.gridspec import GridSpec  # noqa: E402

IMPORTANCE_BOUND = 0.2


def images_of(arrays: dict[str, list], key: str) -> np.ndarray:
    """The images stored under ``key`` (``round(255 x)`` pixels, flattened) as ``[n, H, W]``
    grey values in [0, 1] (the first channel)."""
    channels, height, width = (int(v) for v in arrays["image_shape"])
    flat = np.asarray(arrays[key], dtype=float) / 255.0
    return flat.reshape(-1, channels, height, width)[:, 0]


def _show(ax, image: np.ndarray, title: str, color: str = "black") -> None:
    ax.imshow(image, cmap="gray_r", vmin=0.0, vmax=1.0)
    ax.set_title(title, fontsize=6.5, color=color, pad=2)
    ax.set_xticks([])
    ax.set_yticks([])


def _class_names(record: dict[str, Any]) -> list[str]:
    classes = record["config"]["dataset"].get("classes") or [0, 1]
    return [str(c) for c in classes]


def gp_view_figure(records: list[dict[str, Any]], spec=None):
    """Figure 5.6 of the record with the smallest seed."""
    record = min(records, key=lambda r: r["seed"])
    arrays = record["arrays"]
    names = _class_names(record)
    n_examples = len(arrays["examples/position"])
    n_tests = len(arrays["tests/index"])
    k = int(arrays["neighbours/count"][0])
    columns = max(n_examples, k + 1, 2)
    fig = plt.figure(figsize=(0.85 * columns, 3.4 + 1.0 * (1 + n_tests)))
    grid = GridSpec(2 + n_tests, columns, figure=fig,
                    height_ratios=[2.4, 1.0] + [1.0] * n_tests, hspace=0.95, wspace=0.15)

    curve = fig.add_subplot(grid[0, :])
    sorted_importances = np.asarray(arrays["importances_sorted"])
    ranks = np.arange(len(sorted_importances))
    curve.plot(ranks, sorted_importances, color="tab:blue", linewidth=1.2)
    for bound in (-IMPORTANCE_BOUND, IMPORTANCE_BOUND):
        curve.axhline(bound, color="gray", linestyle="--", linewidth=0.7)
    positions = np.asarray(arrays["examples/position"], dtype=int)
    curve.scatter(positions, sorted_importances[positions], s=10, color="tab:red", zorder=3)
    curve.set_xlabel("training images, sorted by importance", fontsize=7, labelpad=1)
    curve.set_ylabel(r"importance $a_i = y_i - s(f_i)$", fontsize=8)
    curve.tick_params(labelsize=7)
    curve.set_title(f"(a) sorted training importances (N = {len(sorted_importances)}; dashed: "
                    f"+-{IMPORTANCE_BOUND:g}, the thesis' bound); red: the images below",
                    fontsize=9)
    examples = images_of(arrays, "examples/pixels")
    for column, (image, label, value) in enumerate(zip(
            examples, arrays["examples/label"], arrays["examples/importance"], strict=True)):
        _show(fig.add_subplot(grid[1, column]), image,
              f"{names[int(label)]}\na={value:+.3f}")

    tests = images_of(arrays, "tests/pixels")
    neighbours = images_of(arrays, "neighbours/pixels").reshape(n_tests, k, *tests.shape[1:]) \
        if n_tests else []
    kernel = np.asarray(arrays["neighbours/kernel"]).reshape(n_tests, k) if n_tests else []
    labels = np.asarray(arrays["neighbours/label"], dtype=int).reshape(n_tests, k) \
        if n_tests else []
    if n_tests:
        caption = fig.add_subplot(grid[2, :])
        caption.axis("off")
        caption.set_title("(b) test images (green: correct, red: misclassified) and their "
                          f"{k} training images of largest kernel value k (red: the other class)",
                          fontsize=9, pad=26)
    for row in range(n_tests):
        label = int(arrays["tests/label"][row])
        probability = float(arrays["tests/probability"][row])
        predicted = int(probability > 0.5)
        wrong = bool(arrays["tests/misclassified"][row])
        _show(fig.add_subplot(grid[2 + row, 0]), tests[row],
              f"test: true {names[label]}\np({names[1]})={probability:.2f}, "
              f"y^={names[predicted]}", "tab:red" if wrong else "tab:green")
        for rank in range(k):
            neighbour = int(labels[row][rank])
            _show(fig.add_subplot(grid[2 + row, 1 + rank]), neighbours[row][rank],
                  f"#{rank + 1}: {names[neighbour]}\nk={kernel[row][rank]:.3g}",
                  "tab:red" if neighbour != label else "black")
    fig.suptitle(f"GGN thesis Figure 5.6, GP view of the CNN (seed {record['seed']}, "
                 f"delta = {record['config']['method']['prior_precision']:g})", fontsize=10)
    return fig
