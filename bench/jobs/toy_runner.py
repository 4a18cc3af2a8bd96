"""The steps the GGN thesis' toy tasks share (Section 5.1 and 5.2: Snelson's gap data, two
moons): the job's data and record before the fit, the figure's inputs and the training data in
the record after the cells.

A task is ``toy_job(cfg)`` -> its fit (through :func:`bench.harness.fitted_variants.
fitted_variants` or its own training of the method's networks) -> its cells on the figure's
inputs ``job.x_plot`` -> :func:`finished_toy_record`, which keeps the figure's inputs and the
training data as arrays ``x_plot``, ``x_train``, ``y_train`` and the inputs' shape as
``fitted.plot_shape``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from bench.datasets.train_test import TrainTest
from bench.harness.result import TaskResult


@dataclass
class ToyJob:
    """What the steps of one job share: the splits, the figure's inputs (set before the
    cells), the seed and the record being filled."""

    data: TrainTest
    seed: int
    x_plot: Tensor | None = None
    result: TaskResult = field(default_factory=TaskResult)


def toy_job(cfg: DictConfig) -> tuple[Any, ToyJob]:
    """The dataset node and the job on its fixed splits with the job seed; ``job.x_plot``
    holds the figure's inputs."""
    dataset = instantiate(cfg.dataset)
    job = ToyJob(dataset.splits(), int(cfg.seed))
    job.x_plot = dataset.plot_inputs()
    return dataset, job


def finished_toy_record(job: ToyJob) -> TaskResult:
    """The record with the figure's inputs, the training data and the inputs' shape."""
    result, data = job.result, job.data
    result.arrays["x_plot"] = job.x_plot.reshape(-1).tolist()
    result.arrays["x_train"] = data.x_train.reshape(-1).tolist()
    result.arrays["y_train"] = data.y_train.tolist()
    result.fitted["plot_shape"] = list(job.x_plot.shape)
    return result
