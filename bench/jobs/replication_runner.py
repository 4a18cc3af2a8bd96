"""The runner of replications on data drawn from a network: the subnetwork paper's two
experiment tasks (Figures 1 and 2).

:func:`replication_means`: per replication, data -> working network -> every variant fitted
(:func:`fit_replication`) -> the task's ``score`` of each (row, group, ``k``) -> the mean over
the job's replications -> cells ``<group>/<metric>`` (``<group>/<metric>@k=<k>`` for a sized
variant) and curves over ``k``.

One replication draws a data-generating network and its data, trains the working network
once and fits every variant of the method node (a
:class:`~bench.contracts.capabilities.SubnetworkPredictives`, ``method=subnet_laplace``) on
it. Variants with a sized
mask get the largest ``k`` of the grid and give every ``k`` from that one ranking (the rankings
are nested); the others are ``k``-free (the full LLA, NeuralLinear, PrecisionDiag, Block
Laplace). Row names are the variants' names, the paper's method names plus ``Gradient-Laplace
(test ref.)``, Algorithm 2 with the test inputs as reference set (the paper allows either;
the plain ``Gradient-Laplace`` row uses the training inputs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from bench.contracts.capabilities import SubnetworkPredictives
from bench.datasets.synthetic_networks import SyntheticDataset
from bench.harness.errors import ConfigError
from bench.harness.fitted_variants import fitted_variants
from bench.harness.progress import progress
from bench.harness.result import TaskResult
from bench.harness.rng import derived_seed, make_generator
from bench.harness.timing import Stopwatch
from bench.training.working_network import (
    Schedule,
    TrainedWorkingModel,
    paper_schedule,
    train_working_network,
)


def replication_seeds(job_seed: int, n_replications: int) -> list[int]:
    """Seeds of a job's replications: ``SeedSequence([job_seed, r])`` for ``r = 0..n-1``.

    Distinct jobs and replications get independent streams; replication ``r`` of a job is
    reproducible on its own from ``(job_seed, r)``.
    """
    return [derived_seed([job_seed, r]) for r in range(n_replications)]


def scaled_schedule(schedule: Schedule, epoch_scale: float) -> Schedule:
    """The paper's schedule with epochs and decay interval multiplied by ``epoch_scale``
    (1 at cpu and paper scale; smaller only for smoke tests)."""
    if epoch_scale == 1:
        return schedule
    return Schedule(schedule.lr, max(1, round(schedule.epochs * epoch_scale)),
                    max(1, round(schedule.decay_every * epoch_scale)), schedule.decay_factor)


@dataclass
class FittedReplication:
    """One replication: data, the trained working network, its schedule and the fitted
    methods (row name -> method; sized ones first, then the ``k``-free ones, config order)."""

    dataset: SyntheticDataset
    model: TrainedWorkingModel
    schedule: Schedule
    k_grid: list[int]
    sized: dict[str, SubnetworkPredictives]
    k_free: dict[str, SubnetworkPredictives]
    timings: dict[str, float]

    @property
    def diagnostics(self) -> dict:
        """Training diagnostics, method fit times, parameter count and epochs."""
        return {**self.model.diagnostics, **self.timings,
                "n_params": self.model.network.n_params, "epochs": self.schedule.epochs}


def fit_replication(cfg: DictConfig, generator: torch.Generator) -> FittedReplication:
    """Draw ``cfg.dataset``'s data, train the working network by the paper's schedule (prior
    variance 1, sigma0^2 = 1) and fit every variant of ``cfg.method`` on it."""
    data = instantiate(cfg.dataset)
    dataset = data.sample(generator)
    network = data.setting.working_network
    schedule = scaled_schedule(
        paper_schedule(data.experiment, data.likelihood, data.specification),
        float(cfg.epoch_scale))
    model = train_working_network(network, dataset.x_train, dataset.y_train, data.likelihood,
                                  schedule, generator)
    k_grid = check_k_grid(list(cfg.k_grid), network.n_params)
    sized, k_free, timings = {}, {}, {}

    def largest_subset(method):
        if method.takes_subset_size:
            return dataclasses.replace(method, n_params_subnet=k_grid[-1])
        return method

    for variant in fitted_variants(cfg.method, dataset, int(cfg.seed),
                                   posterior=cfg.get("posterior"),
                                   protocol=SubnetworkPredictives, base=model,
                                   prepare=largest_subset):
        timings[f"{variant.row}_fit_s"] = variant.fit_s
        (sized if variant.method.takes_subset_size else k_free)[variant.row] = variant.method
    return FittedReplication(dataset, model, schedule, k_grid, sized, k_free, timings)


def check_k_grid(k_grid: list[int], n_params: int) -> list[int]:
    """The grid sorted, each ``k`` in ``1..n_params`` (ConfigError otherwise)."""
    grid = sorted(int(k) for k in k_grid)
    if not grid or grid[0] < 1 or grid[-1] > n_params:
        raise ConfigError(f"k_grid {grid} must be non-empty within 1..{n_params} (the working "
                          f"network's parameter count)")
    return grid


def mean_over_replications(cfg: DictConfig, replication, result: TaskResult) -> dict:
    """Run ``replication(cfg, generator) -> (values, diagnostics)`` for each of the job's
    replications (timings and diagnostics into ``result``); the mean of each value."""
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    seeds = replication_seeds(int(cfg.seed), int(cfg.replications_per_job))
    per_replication = []
    for r, seed in enumerate(progress(seeds, "replications")):
        watch = Stopwatch()
        values, diagnostics = replication(cfg, make_generator(seed))
        result.timings[f"replication_{r}_s"] = watch.elapsed()
        result.fitted[f"replication_{r}"] = {"seed": seed, **diagnostics}
        per_replication.append(values)
    return {key: sum(v[key] for v in per_replication) / len(per_replication)
            for key in per_replication[0]}



# A replication's values: (row, group, k or None) -> value.
ReplicationValues = dict[tuple[str, str, int | None], float]


ReplicationScore = Callable[[DictConfig, FittedReplication, torch.Generator],
                            tuple[ReplicationValues, dict]]


def value_column(metric: str, group: str, k: int | None) -> str:
    """Cell column of a value (``k`` None for methods without a subset size)."""
    return f"{group}/{metric}" + ("" if k is None else f"@k={k}")


def replication_means(cfg: DictConfig, metric: str, score: ReplicationScore) -> TaskResult:
    """The mean of ``score`` over a job's replications, as cells and curves.

    ``score(cfg, fitted, generator) -> (values, diagnostics)`` scores one
    :class:`FittedReplication` (``values`` keyed ``(row, group, k or None)``; ``diagnostics``
    added to the replication's fit diagnostics). Cell of a mean: row ``row``, column
    ``<group>/<metric>`` or ``<group>/<metric>@k=<k>``; arrays ``k`` (the grid) and
    ``<row>/<group>/<metric>`` (over the grid, or one value for a ``k``-free row).
    """

    def replication(cfg: DictConfig, generator: torch.Generator
                    ) -> tuple[ReplicationValues, dict]:
        fitted = fit_replication(cfg, generator)
        values, diagnostics = score(cfg, fitted, generator)
        return values, {**fitted.diagnostics, **diagnostics}

    result = TaskResult()
    means = mean_over_replications(cfg, replication, result)
    for (row, group, k), value in means.items():
        result.add(row, value_column(metric, group, k), value)
    k_grid = sorted({k for (_, _, k) in means if k is not None})
    result.arrays["k"] = [float(k) for k in k_grid]
    for row, group in dict.fromkeys((r, g) for (r, g, _) in means):
        ks = k_grid if (row, group, k_grid[0]) in means else [None]
        result.arrays[f"{row}/{group}/{metric}"] = [means[(row, group, k)] for k in ks]
    return result
