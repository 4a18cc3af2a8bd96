"""The runner of methods on released checkpoints (Laplace Redux Figure 10, WILDS): the
seed's checkpoints -> the method -> its predictive on each test split -> the task's scores ->
cells.

:class:`CheckpointRunner`: the dataset node (:class:`~bench.datasets.wilds.WildsData`) gives
the seed's split roles and checkpoints; the method node (with the experiment's
``method_settings``), a :class:`~bench.contracts.method.CheckpointMethod`, checks the files it
reads before any work, fits on them (``fit_s``, its diagnostics as ``fitted.method``) and
predicts on each split role (``<label>/predict_s``). The task's ``scores(cfg, data,
predictive, targets)`` gives a split's metrics; cell row ``<data set>/<method>`` (e.g.
``camelyon17/LA``), column ``<label>/<metric>``, a NaN left out for the metrics in
``nan_means_no_cell``. A method that does not apply to the data set's prediction task leaves a
record without cells that says so (``fitted.not_applicable``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hydra.utils import instantiate
from omegaconf import DictConfig

from bench.contracts.method import CheckpointMethod
from bench.datasets.wilds import WildsData
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.task_inputs import capability
from bench.harness.timing import Stopwatch
from bench.jobs.classification_runner import configured_method_node


def not_applicable(method: CheckpointMethod, data: WildsData) -> str | None:
    """Why the method does not apply to the data set's prediction task (None if it does)."""
    if data.task in method.tasks:
        return None
    return f"{method.name} is for {', '.join(method.tasks)}; {data.name} is {data.task}"


@dataclass(frozen=True)
class CheckpointRunner:
    """Checkpoints -> method -> predictive on each of ``split_labels`` (role -> cell label) ->
    ``scores`` -> cells (module docstring)."""

    split_labels: Mapping[str, str]
    scores: Callable[[DictConfig, WildsData, object, object], dict[str, float]]
    nan_means_no_cell: tuple[str, ...] = ()

    def run(self, cfg: DictConfig) -> TaskResult:
        """One job's record."""
        data: WildsData = instantiate(cfg.dataset)
        seed = int(cfg.seed)
        job = data.for_seed(seed)
        method = capability(instantiate_method(configured_method_node(cfg)), CheckpointMethod)
        result = TaskResult()
        reason = not_applicable(method, data)
        if reason is not None:
            result.fitted["not_applicable"] = reason
            return result
        keys = method.checkpoint_keys(job)
        job.require_checkpoints(keys)
        result.fitted.update(job.provenance(keys))
        watch = Stopwatch()
        result.fitted["method"] = method.fit(job, seed)
        result.timings["fit_s"] = watch.elapsed()
        row = f"{data.wilds_name}/{method.name}"
        for role, label in self.split_labels.items():
            watch = Stopwatch()
            predictive = method.predict(job.loader(role))
            result.timings[f"{label}/predict_s"] = watch.elapsed()
            for metric, value in self.scores(cfg, data, predictive, job.targets(role)).items():
                if math.isfinite(value) or metric not in self.nan_means_no_cell:
                    result.add(row, f"{label}/{metric}", value)
        return result
