"""Shared steps of the subnetwork paper's two experiment tasks (Figures 1 and 2).

One replication draws a data-generating network and its data, trains the working network
once, forms the full linearised Laplace precision ``Omega`` and then derives every surrogate
from it: the subset methods at every ``k`` of the grid (their rankings are nested, so each is
computed once at the largest ``k``) and the ``k``-free surrogates. Row names are the paper's
method names (:data:`bench.methods.laplace.subnetwork.PAPER_NAMES`) plus
``Gradient-Laplace (test ref.)``, Algorithm 2 with the test inputs as reference set (the
paper allows either; the plain
``Gradient-Laplace`` row uses the training inputs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from omegaconf import DictConfig
from torch import Tensor

from bench.datasets.synthetic_networks import SETTINGS, SyntheticDataset, make_dataset
from bench.harness.errors import ConfigError, require_choice
from bench.harness.rng import derived_seed
from bench.methods.laplace import linearised as lla
from bench.methods.laplace import subset_selection as selection
from bench.methods.laplace.subnetwork import PAPER_NAMES
from bench.training.working_network import (
    Schedule,
    TrainedWorkingModel,
    paper_schedule,
    train_working_network,
)

SUBSET_METHODS = ("greedy", "gradient", "gradient_test", "subnet_diagonal", "last_k")
FIXED_METHODS = ("neural_linear", "precision_diag", "block")
ROW_NAMES = {**PAPER_NAMES, "gradient_test": "Gradient-Laplace (test ref.)"}


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
    """One replication: data, trained working network and its linearised Laplace."""

    dataset: SyntheticDataset
    model: TrainedWorkingModel
    laplace: lla.LinearisedLaplace
    schedule: Schedule


def fit_replication(cfg: DictConfig, generator: torch.Generator) -> FittedReplication:
    """Draw ``cfg.dataset``'s data, train the working network by the paper's schedule and
    form ``Omega`` on the points it was fitted on (prior variance 1, sigma0^2 = 1)."""
    data = cfg.dataset
    experiment, specification = str(data.experiment), str(data.specification)
    likelihood = str(data.likelihood)
    dataset = make_dataset(experiment, specification, likelihood, generator,
                           n_train=int(data.n_train), n_test=int(data.n_test))
    network = SETTINGS[(experiment, specification)].working_network
    schedule = scaled_schedule(paper_schedule(experiment, likelihood, specification),
                               float(cfg.epoch_scale))
    model = train_working_network(network, dataset.x_train, dataset.y_train, likelihood,
                                  schedule, generator)
    laplace = lla.fit_linearised_laplace(network, model.theta, model.x_fit, likelihood)
    return FittedReplication(dataset, model, laplace, schedule)


def check_k_grid(k_grid: list[int], n_params: int) -> list[int]:
    """The grid sorted, each ``k`` in ``1..n_params`` (ConfigError otherwise)."""
    grid = sorted(int(k) for k in k_grid)
    if not grid or grid[0] < 1 or grid[-1] > n_params:
        raise ConfigError(f"k_grid {grid} must be non-empty within 1..{n_params} (the working "
                          f"network's parameter count)")
    return grid


def subset_rankings(laplace: lla.LinearisedLaplace, k_max: int, train_jacobians: Tensor,
                    test_jacobians: Tensor) -> dict[str, Tensor]:
    """For each nested subset method, its first ``k_max`` indices in selection order.

    Greedy (Algorithm 1), Gradient (Algorithm 2 with the training or the test inputs as
    reference set), Subnet diagonal and Last k all select nested sets, so ``ranking[:k]`` is
    the method's subset of size ``k``.
    """
    omega = laplace.omega
    p = omega.shape[0]
    return {
        "greedy": selection.greedy_subnet_indices(omega, k_max),
        "gradient": selection.gradient_subnet_indices(train_jacobians, k_max),
        "gradient_test": selection.gradient_subnet_indices(test_jacobians, k_max),
        "subnet_diagonal": selection.subnet_diagonal_indices(omega, k_max),
        "last_k": torch.arange(p - 1, p - 1 - k_max, -1),
    }


def fixed_covariance(method: str, laplace: lla.LinearisedLaplace) -> lla.Covariance:
    """The ``k``-free surrogate (or the full LLA covariance for ``full``)."""
    require_choice("method", method, ("full", *FIXED_METHODS))
    omega = laplace.omega
    if method == "full":
        return lla.full_covariance(omega)
    if method == "precision_diag":
        return lla.precision_diagonal_covariance(omega)
    if method == "block":
        return lla.layer_block_covariance(omega, laplace.network)
    return lla.subnetwork_covariance(omega, selection.neural_linear_indices(laplace.network))


def subset_function_variances(laplace: lla.LinearisedLaplace, rankings: dict[str, Tensor],
                              k_grid: list[int], jacobians: Tensor
                              ) -> Iterator[tuple[str, int, Tensor]]:
    """``(method, k, g^T Sigma_S g per test point)`` for every subset method and ``k``."""
    for method, ranking in rankings.items():
        for k in k_grid:
            covariance = lla.subnetwork_covariance(laplace.omega, ranking[:k])
            yield method, k, covariance.function_variance(jacobians)
