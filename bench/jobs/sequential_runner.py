"""The runner of continual learning (Laplace Redux appendix C.4): tasks learned in order by
one method with a running posterior -> accuracy matrices -> the task's cells.

:class:`SequentialRunner`: the dataset node (:class:`~bench.datasets.continual_tasks.
PermutedImageTasks`) gives ``n_tasks`` tasks of one seed's splits; the method node, a
:class:`~bench.contracts.capabilities.ContinualLearner`, fits each task in turn
(``task=<t>/fit_s``, summed in ``fit_s``). After task ``t`` the network's own argmax accuracy
is measured on the test sets of every task seen so far, and where the dataset node evaluates
after ``t`` the method's predictive accuracy on them too (``task=<t>/la_eval_s``, summed in
``la_eval_s``). Each predictive accuracy is stored once per (posterior state, test task, test
points) in the state store, so a killed job resumes its evaluations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from torch import Tensor

from bench.contracts.capabilities import ContinualLearner
from bench.datasets.continual_tasks import PermutedImageTasks, permuted_task
from bench.datasets.image_classification import ImageSplits
from bench.datasets.training_set import TrainingSet
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.state_store import stored_state
from bench.harness.task_inputs import capability
from bench.harness.timing import Stopwatch
from bench.metrics.classification import accuracy

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


@dataclass(frozen=True)
class SequentialRunner:
    """Tasks learned in order (:func:`learn_in_order`) -> ``cells(cfg, job)``."""

    cells: Callable[[DictConfig, SequentialJob], None]

    def run(self, cfg: DictConfig) -> TaskResult:
        """One job's record."""
        job = learn_in_order(cfg)
        self.cells(cfg, job)
        return job.result
