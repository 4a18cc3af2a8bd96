"""Permuted-MNIST continual learning with a running Laplace posterior: Laplace Redux appendix
C.4 (reproduction notes section 7).

One job = (Hessian structure, seed), through
:class:`~bench.jobs.sequential_runner.SequentialRunner`. The dataset node
(:class:`~bench.datasets.continual_tasks.PermutedImageTasks`) gives ``n_tasks`` tasks (10):
task 1 its images as they are, task t > 1 the same images with the pixel order numpy draws for
index t - 1 (the code's task index). The method node
(:class:`~bench.methods.laplace.continual.ContinualLaplace`) learns the tasks one after
another; after each task the network's own argmax accuracy is measured on the test sets of
every task seen so far (cheap), and the GLM-probit predictive's accuracy after every task
(``dataset.evaluate_after=every_task``) or after the last one only (``last_task``). Each
predictive accuracy is stored once per (posterior state, test task) in the state store, so a
killed job also resumes its evaluations.

Cells (row ``KFAC`` or ``DIAG``, accuracies as fractions; the report shows them in %, and
``fitted.cell_units`` marks the record as written so): ``mean_accuracy`` (the paper's metric:
mean over all tasks after the last), ``task=<s>`` (each task after the last), and where evaluated
``after=<t>/task=<s>`` and ``after=<t>/mean`` (mean over tasks 1..t); the same with a ``map/``
prefix for the network's argmax. Arrays: both accuracy matrices (row = after task t, column =
test task s, NaN where not evaluated) and the tuned prior precisions in order.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from bench.contracts.capabilities import ContinualLearner
from bench.datasets.continual_tasks import PermutedImageTasks
from bench.harness.result import CELL_UNITS, NEUTRAL_CELLS, TaskResult
from bench.harness.task_inputs import takes
from bench.jobs.sequential_runner import SequentialJob, SequentialRunner

ROWS = {"kron": "KFAC", "diag": "DIAG"}


def network_layers(network: nn.Module) -> list[int]:
    """Widths of a fully connected network: its first layer's inputs, then every layer's
    outputs (``[784, 100, 100, 10]`` for the MLP)."""
    linear = [m for m in network.modules() if isinstance(m, nn.Linear)]
    return [linear[0].in_features, *(m.out_features for m in linear)] if linear else []


def add_matrix_cells(result: TaskResult, row: str, prefix: str, matrix: Tensor) -> None:
    """``<prefix>after=<t>/task=<s>`` and ``<prefix>after=<t>/mean`` for every evaluated
    entry (lower triangle rows without NaN), as fractions."""
    for t in range(matrix.shape[0]):
        seen = matrix[t, :t + 1]
        if torch.isnan(seen).any():
            continue
        for s, value in enumerate(seen.tolist()):
            result.add(row, f"{prefix}after={t + 1}/task={s + 1}", value)
        result.add(row, f"{prefix}after={t + 1}/mean", float(seen.mean()))


def accuracy_cells(cfg: DictConfig, job: SequentialJob) -> None:
    """Cells, metrics, arrays and the record's description of the network (module
    docstring)."""
    result, method, splits = job.result, job.method, job.splits
    row = ROWS[method.hessian_structure]
    final = job.la_matrix[-1]
    result.add(row, "mean_accuracy", float(final.mean()))
    for s, value in enumerate(final.tolist()):
        result.add(row, f"task={s + 1}", value)
    result.add(row, "map/mean_accuracy", float(job.map_matrix[-1].mean()))
    add_matrix_cells(result, row, "", job.la_matrix)
    add_matrix_cells(result, row, "map/", job.map_matrix)
    result.metrics.update({"mean_accuracy": float(final.mean()),
                           "map_mean_accuracy": float(job.map_matrix[-1].mean())})
    result.fitted.update({
        CELL_UNITS: NEUTRAL_CELLS, "row": row, "n_tasks": job.data.n_tasks,
        "evaluate_after": job.data.evaluate_after,
        "tasks": job.tasks, "network_layers": network_layers(method.network),
        "n_parameters": sum(p.numel() for p in method.network.parameters()),
        "train_points": len(splits.y_train), "test_points": len(splits.y_test)})
    result.arrays.update({
        "accuracy_matrix": job.la_matrix.flatten().tolist(),
        "map_accuracy_matrix": job.map_matrix.flatten().tolist(),
        "prior_precision_trace": [p for task in job.tasks
                                  for p in task["tuned_prior_precisions"]]})


RUNNER = SequentialRunner(cells=accuracy_cells)


@takes(datasets=(PermutedImageTasks,), methods=(ContinualLearner,))
def run(cfg: DictConfig) -> TaskResult:
    """Learn the dataset node's permuted tasks in order; score the accuracy matrices."""
    return RUNNER.run(cfg)
