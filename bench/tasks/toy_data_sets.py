"""GGN thesis Figure 5.1: the two toy data sets as drawn, with the statistics the reproduction
notes print as checksums (notes sections 2.1 and 2.2).

One job = one data set (``snelson_gap`` or ``two_moons``); the sets are fixed by the data set's
own train / test seeds, so the job seed changes nothing. Cells of row ``<dataset name>``, for
each split ``<split>`` in ``train``, ``test``: ``<split>/n``; ``<split>/x<j>_min``,
``x<j>_max``, ``x<j>_mean`` per input coordinate ``j`` (from 1); ``<split>/y_mean`` and
``y_sd`` (population sd); ``<split>/positives`` (labels equal to 1; binary targets only); and
the first three points, ``<split>/point<k>/x<j>`` and ``<split>/point<k>/y`` (``k`` from 1,
in draw order). Arrays ``<split>/x<j>`` and ``<split>/y`` hold every point for the figure.
"""

from __future__ import annotations

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from bench.datasets.snelson import SnelsonGapData
from bench.datasets.two_moons import TwoMoonsData
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes

FIRST_POINTS = 3


def is_binary(targets: Tensor) -> bool:
    """Whether every target is 0 or 1 (a binary classification set)."""
    return bool(((targets == 0) | (targets == 1)).all())


def split_statistics(x: Tensor, y: Tensor) -> dict[str, float]:
    """The cells of one split (module docstring), keys without the split prefix."""
    cells = {"n": float(len(y)), "y_mean": float(y.mean()),
             "y_sd": float(y.std(correction=0))}
    for j, column in enumerate(x.T, start=1):
        cells |= {f"x{j}_min": float(column.min()), f"x{j}_max": float(column.max()),
                  f"x{j}_mean": float(column.mean())}
    if is_binary(y):
        cells["positives"] = float((y == 1).sum())
    for k, (point, target) in enumerate(zip(x[:FIRST_POINTS], y[:FIRST_POINTS], strict=True),
                                        start=1):
        cells |= {f"point{k}/x{j}": float(value) for j, value in enumerate(point, start=1)}
        cells[f"point{k}/y"] = float(target)
    return cells


@takes(datasets=(SnelsonGapData, TwoMoonsData))
def run(cfg: DictConfig) -> TaskResult:
    """Draw the data set's training and test sets; record their checksums and points."""
    data = instantiate(cfg.dataset).splits()
    result = TaskResult()
    for split, x, y in (("train", data.x_train, data.y_train), ("test", data.x_test, data.y_test)):
        for column, value in split_statistics(x.to(torch.float64), y.to(torch.float64)).items():
            result.add(data.name, f"{split}/{column}", value)
        for j, column in enumerate(x.T, start=1):
            result.arrays[f"{split}/x{j}"] = column.tolist()
        result.arrays[f"{split}/y"] = y.tolist()
    return result
