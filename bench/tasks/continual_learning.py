"""Permuted-MNIST continual learning with a running Laplace posterior: Laplace Redux appendix
C.4 (reproduction notes section 7).

One job = (Hessian structure, seed). The dataset node
(:class:`~bench.datasets.continual_tasks.PermutedImageTasks`) gives ``n_tasks`` tasks (10):
task 1 its images as they are, task t > 1 the same images with the pixel order numpy draws for
index t - 1 (the code's task index). The method node
(:class:`~bench.methods.laplace.continual.ContinualLaplace`) learns the tasks one after
another; after each task the network's own argmax accuracy is measured on the test sets of
every task seen so far (cheap), and the GLM-probit predictive's accuracy after every task
(``dataset.evaluate_after=every_task``) or after the last one only (``last_task``). Each
predictive accuracy is stored once per (posterior state, test task) in the state store, so a
killed job also resumes its evaluations. Timings: ``task=<t>/fit_s`` (summed in ``fit_s``) and
``task=<t>/la_eval_s`` (summed in ``la_eval_s``).

Cells (row ``KFAC`` or ``DIAG``, accuracies as fractions; the report shows them in %, and
``fitted.cell_units`` marks the record as written so): ``mean_accuracy`` (the paper's metric:
mean over all tasks after the last), ``task=<s>`` (each task after the last), and where evaluated
``after=<t>/task=<s>`` and ``after=<t>/mean`` (mean over tasks 1..t); the same with a ``map/``
prefix for the network's argmax. Arrays: both accuracy matrices (row = after task t, column =
test task s, NaN where not evaluated) and the tuned prior precisions in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor, nn

from bench.contracts.capabilities import ContinualLearner
from bench.datasets.continual_tasks import PermutedImageTasks, permuted_task
from bench.datasets.image_classification import ImageSplits
from bench.datasets.training_set import TrainingSet
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import CELL_UNITS, NEUTRAL_CELLS, TaskResult
from bench.harness.state_store import stored_state
from bench.harness.task_inputs import capability, takes
from bench.harness.timing import Stopwatch
from bench.metrics.classification_scores import accuracy

ROWS = {"kron": "KFAC", "diag": "DIAG"}
ACCURACY_KIND = "continual_laplace_accuracy"


def evaluation_identity(data: PermutedImageTasks, n_points: int) -> dict:
    """What decides a task's test points apart from the seed and the task."""
    return {"images": data.images, "normalisation": data.normalisation,
            "val_size": data.val_size, "split_seed": data.split_seed, "n_test": data.n_test,
            "points": n_points}


def stored_accuracy(method: ContinualLearner, x: Tensor, y: Tensor, data: PermutedImageTasks,
                    test_task: int, seed: int, results_dir: str) -> float:
    """Accuracy of the method's predictive at its current posterior on one task's test set,
    computed once per (posterior state, test task, test points) and stored."""
    recipe = {"posterior": method.state_hash, "test_task": test_task,
              "test": evaluation_identity(data, len(y)), "predictive": "glm_probit"}

    def compute(_checkpoints) -> tuple[dict, list]:
        return {"accuracy": accuracy(method.predict(x), y)}, []

    stored = stored_state(ACCURACY_KIND, data.task_name(test_task), recipe, seed, compute,
                          results_dir)
    return float(stored.state["accuracy"])


@dataclass
class SequentialJob:
    """A learned sequence: data, splits, the method after the last task, each task's fit
    diagnostics and the accuracy matrices (row = after task t, column = test task s, NaN
    where not evaluated) of the predictive (``la``) and of the network's argmax (``map``)."""

    data: PermutedImageTasks
    splits: ImageSplits
    method: ContinualLearner
    la_matrix: Tensor
    map_matrix: Tensor
    tasks: list[dict] = field(default_factory=list)
    result: TaskResult = field(default_factory=TaskResult)


def add_timing(result: TaskResult, task: int, name: str, seconds: float) -> None:
    """Timing ``task=<task>/<name>`` and its share of the total ``<name>``."""
    result.timings[f"task={task}/{name}"] = seconds
    result.timings[name] += seconds


def learn_in_order(cfg: DictConfig) -> SequentialJob:
    """Learn the dataset node's tasks one after another (module docstring)."""
    data: PermutedImageTasks = instantiate(cfg.dataset)
    n_tasks, seed = data.n_tasks, int(cfg.seed)
    splits = data.splits(seed)
    method = capability(instantiate_method(cfg.method), ContinualLearner)
    matrix = torch.full((n_tasks, n_tasks), math.nan, dtype=torch.float64)
    job = SequentialJob(data, splits, method, matrix, matrix.clone(),
                        result=TaskResult(timings={"fit_s": 0.0, "la_eval_s": 0.0}))
    tests = []
    for t in range(n_tasks):
        training = TrainingSet(permuted_task(splits.x_train, t), splits.y_train,
                               data.task_name(t), data.normalisation,
                               str(cfg.results_dir), str(cfg.device))
        tests.append(permuted_task(splits.x_test, t))
        watch = Stopwatch()
        job.tasks.append(method.fit(training, seed))
        add_timing(job.result, t + 1, "fit_s", watch.elapsed())
        for s, x in enumerate(tests):
            job.map_matrix[t, s] = accuracy(method.map_predict(x), splits.y_test)
        if data.evaluated_after(t):
            watch = Stopwatch()
            for s, x in enumerate(tests):
                job.la_matrix[t, s] = stored_accuracy(method, x, splits.y_test, data, s, seed,
                                                      str(cfg.results_dir))
            add_timing(job.result, t + 1, "la_eval_s", watch.elapsed())
    return job



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


@takes(datasets=(PermutedImageTasks,), methods=(ContinualLearner,))
def run(cfg: DictConfig) -> TaskResult:
    """Learn the dataset node's permuted tasks in order; score the accuracy matrices."""
    job = learn_in_order(cfg)
    accuracy_cells(cfg, job)
    return job.result
