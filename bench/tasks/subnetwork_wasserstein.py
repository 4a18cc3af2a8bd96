"""Subnetwork paper Figure 1: mean W2 between the full-LLA predictive and each surrogate's.

One job = (working model setting, seed) with ``cfg.replications_per_job`` replications, seeds
from :func:`bench.jobs.replication_runner.replication_seeds`. Per replication the working network
is trained once; for each test domain (in-distribution, OOD, mixed) and method the mean over
test points of ``W2(N(f, 1 + g^T Omega^-1 g), N(f, 1 + g^T Sigma g))`` is computed (Section
4.1). Cells (means over the job's replications): row = the method's paper name, column
``<specification>/<domain>/w2@k=<k>`` for subset methods and ``<specification>/<domain>/w2``
for the ``k``-free ones (NeuralLinear, PrecisionDiag, Block Laplace). Arrays: ``k`` and
``<row>/<specification>/<domain>/w2`` (the per-k curve or the single value).
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from bench.contracts.capabilities import SubnetworkPredictives
from bench.datasets.synthetic_networks import TEST_DOMAINS, SyntheticNetworkData
from bench.harness.errors import ConfigError
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.jobs.replication_runner import FittedReplication, ReplicationValues, replication_means
from bench.metrics.wasserstein import mean_predictive_w2


def replication_w2(cfg: DictConfig, fitted: FittedReplication,
                   generator: torch.Generator) -> tuple[ReplicationValues, dict]:
    """``({(row, "<specification>/<domain>", k or None): W2}, {})`` of one replication; the
    reference is the variant that is the full LLA."""
    full = [method for method in fitted.k_free.values() if method.is_full_lla]
    if not full:
        raise ConfigError("method.variants needs the full LLA (a variant without mask, "
                          "covariance: full): it is the reference of every W2")
    values: ReplicationValues = {}
    for domain in TEST_DOMAINS:
        group = f"{cfg.dataset.specification}/{domain}"
        x = fitted.dataset.x_test[domain]
        full_variance = full[0].function_predictive(x).variance
        for row, method in fitted.sized.items():
            predictives = method.function_predictives(x, fitted.k_grid)
            for k, predictive in zip(fitted.k_grid, predictives, strict=True):
                values[(row, group, k)] = mean_predictive_w2(full_variance, predictive.variance)
        for row, method in fitted.k_free.items():
            if not method.is_full_lla:
                variance = method.function_predictive(x).variance
                values[(row, group, None)] = mean_predictive_w2(full_variance, variance)
    return values, {}


@takes(datasets=(SyntheticNetworkData,), methods=(SubnetworkPredictives,))
def run(cfg: DictConfig) -> TaskResult:
    """All methods, domains and ``k`` of one working model setting, averaged over the job's
    replications."""
    return replication_means(cfg, "w2", replication_w2)
