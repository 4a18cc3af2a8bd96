"""The runner of the GGN thesis' toy tasks (Section 5.1 and 5.2: Snelson's gap data, two
moons): data -> method -> fit -> predictives on the test set and the figure's inputs -> cells.

:class:`ToyRunner`: the dataset node's fixed splits, the method node (with the task's
``arguments``, e.g. the job's posterior variant) asked for the task's capability, the task's
``fit`` step, then its ``cells`` step on the fitted state and the figure's inputs (timed as
``cells_timing``). Every record keeps the figure's inputs and the training data as arrays
``x_plot``, ``x_train``, ``y_train`` and the inputs' shape as ``fitted.plot_shape``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from bench.datasets.train_test import TrainTest
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.task_inputs import capability
from bench.harness.timing import Stopwatch


@dataclass
class ToyJob:
    """What the steps of one job share: the splits, the figure's inputs (set before the
    ``cells`` step), the seed and the record being filled."""

    data: TrainTest
    seed: int
    x_plot: Tensor | None = None
    result: TaskResult = field(default_factory=TaskResult)


def no_arguments(cfg: DictConfig) -> dict:
    """No arguments over the method node's values."""
    return {}


@dataclass(frozen=True)
class ToyRunner:
    """Data -> ``method`` (``arguments(cfg)`` over the node, asked for ``protocol``) ->
    ``fit(cfg, method, job) -> fitted`` -> ``cells(cfg, method, job, fitted)``.

    ``fit`` writes its own timings (one or several stages); ``cells`` is timed as
    ``cells_timing``.
    """

    protocol: type
    fit: Callable[[DictConfig, Any, ToyJob], Any]
    cells: Callable[[DictConfig, Any, ToyJob, Any], None]
    arguments: Callable[[DictConfig], dict] = no_arguments
    cells_timing: str = "predict_s"

    def run(self, cfg: DictConfig) -> TaskResult:
        """One job's record."""
        dataset = instantiate(cfg.dataset)
        job = ToyJob(dataset.splits(), int(cfg.seed))
        method = capability(instantiate_method(cfg.method, **self.arguments(cfg)),
                            self.protocol)
        fitted = self.fit(cfg, method, job)
        watch = Stopwatch()
        job.x_plot = dataset.plot_inputs()
        self.cells(cfg, method, job, fitted)
        result, data = job.result, job.data
        result.timings[self.cells_timing] = watch.elapsed()
        result.arrays["x_plot"] = job.x_plot.reshape(-1).tolist()
        result.arrays["x_train"] = data.x_train.reshape(-1).tolist()
        result.arrays["y_train"] = data.y_train.tolist()
        result.fitted["plot_shape"] = list(job.x_plot.shape)
        return result
