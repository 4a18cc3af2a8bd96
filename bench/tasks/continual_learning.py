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
killed job also resumes its evaluations.

Cells (row ``KFAC`` or ``DIAG``, values in %): ``mean_accuracy`` (the paper's metric: mean
over all tasks after the last), ``task=<s>`` (each task after the last), and where evaluated
``after=<t>/task=<s>`` and ``after=<t>/mean`` (mean over tasks 1..t); the same with a ``map/``
prefix for the network's argmax. Arrays: both accuracy matrices (row = after task t, column =
test task s, NaN where not evaluated) and the tuned prior precisions in order.
"""

from __future__ import annotations

import math

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor, nn

from bench.contracts.capabilities import ContinualLearner
from bench.datasets.continual_tasks import PermutedImageTasks, permuted_task
from bench.datasets.training_set import TrainingSet
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.state_store import stored_state
from bench.harness.task_inputs import capability, takes
from bench.harness.timing import Stopwatch
from bench.metrics.classification import accuracy

ROWS = {"kron": "KFAC", "diag": "DIAG"}
ACCURACY_KIND = "continual_laplace_accuracy"
PERCENT = 100.0


def network_layers(network: nn.Module) -> list[int]:
    """Widths of a fully connected network: its first layer's inputs, then every layer's
    outputs (``[784, 100, 100, 10]`` for the MLP)."""
    linear = [m for m in network.modules() if isinstance(m, nn.Linear)]
    return [linear[0].in_features, *(m.out_features for m in linear)] if linear else []


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


def add_matrix_cells(result: TaskResult, row: str, prefix: str, matrix: Tensor) -> None:
    """``<prefix>after=<t>/task=<s>`` and ``<prefix>after=<t>/mean`` for every evaluated
    entry (lower triangle rows without NaN), in %."""
    for t in range(matrix.shape[0]):
        seen = matrix[t, :t + 1]
        if torch.isnan(seen).any():
            continue
        for s, value in enumerate(seen.tolist()):
            result.add(row, f"{prefix}after={t + 1}/task={s + 1}", PERCENT * value)
        result.add(row, f"{prefix}after={t + 1}/mean", PERCENT * float(seen.mean()))


@takes(datasets=(PermutedImageTasks,), methods=(ContinualLearner,))
def run(cfg: DictConfig) -> TaskResult:
    """Learn the dataset node's permuted tasks in order; score the accuracy matrices."""
    data: PermutedImageTasks = instantiate(cfg.dataset)
    n_tasks = data.n_tasks
    seed = int(cfg.seed)
    splits = data.splits(seed)
    method = capability(instantiate_method(cfg.method), ContinualLearner)
    row = ROWS[method.hessian_structure]
    la_matrix = torch.full((n_tasks, n_tasks), math.nan, dtype=torch.float64)
    map_matrix = la_matrix.clone()
    result = TaskResult(timings={"fit_s": 0.0, "la_eval_s": 0.0})
    tests, tasks = [], []
    for t in range(n_tasks):
        training = TrainingSet(permuted_task(splits.x_train, t), splits.y_train,
                               data.task_name(t), data.normalisation,
                               str(cfg.results_dir), str(cfg.device))
        tests.append(permuted_task(splits.x_test, t))
        watch = Stopwatch()
        tasks.append(method.fit(training, seed))
        result.timings[f"task={t + 1}/fit_s"] = watch.elapsed()
        result.timings["fit_s"] += result.timings[f"task={t + 1}/fit_s"]
        for s, x in enumerate(tests):
            map_matrix[t, s] = accuracy(method.map_predict(x), splits.y_test)
        if data.evaluated_after(t):
            watch = Stopwatch()
            for s, x in enumerate(tests):
                la_matrix[t, s] = stored_accuracy(method, x, splits.y_test, data, s, seed,
                                                  str(cfg.results_dir))
            result.timings[f"task={t + 1}/la_eval_s"] = watch.elapsed()
            result.timings["la_eval_s"] += result.timings[f"task={t + 1}/la_eval_s"]
    final = la_matrix[-1]
    result.add(row, "mean_accuracy", PERCENT * float(final.mean()))
    for s, value in enumerate(final.tolist()):
        result.add(row, f"task={s + 1}", PERCENT * value)
    result.add(row, "map/mean_accuracy", PERCENT * float(map_matrix[-1].mean()))
    add_matrix_cells(result, row, "", la_matrix)
    add_matrix_cells(result, row, "map/", map_matrix)
    result.metrics.update({"mean_accuracy": float(final.mean()),
                           "map_mean_accuracy": float(map_matrix[-1].mean())})
    result.fitted.update({
        "row": row, "n_tasks": n_tasks, "evaluate_after": data.evaluate_after, "tasks": tasks,
        "network_layers": network_layers(method.network),
        "n_parameters": sum(p.numel() for p in method.network.parameters()),
        "train_points": len(splits.y_train), "test_points": len(splits.y_test)})
    result.arrays.update({
        "accuracy_matrix": la_matrix.flatten().tolist(),
        "map_accuracy_matrix": map_matrix.flatten().tolist(),
        "prior_precision_trace": [p for task in tasks for p in task["tuned_prior_precisions"]]})
    return result
