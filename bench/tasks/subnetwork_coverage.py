"""Subnetwork paper Figure 2: coverage of 95% intervals for the true mean function, vs k.

One job = ((likelihood, specification), seed) with ``cfg.replications_per_job`` replications
(seeds from :func:`bench.jobs.replication_runner.replication_seeds`). Per replication the working
network is trained once and its linearised Laplace gives the intervals of every Laplace
method; Split (``d =
cfg.split_parts`` disjoint parts of the training data) and Ensemble (``cfg.ensemble_members``
bootstrap refits) refit the same network by the same schedule. Coverage is the fraction of
test inputs whose ``f_theta0(x*)`` lies in the interval (logit scale for classification).

Cells (means over the job's replications): row = method (paper names; ``LLA`` is the full
linearised Laplace, ``Split`` and ``Ensemble`` the refit baselines), column
``<likelihood>/<specification>/cov95@k=<k>`` for subset methods and
``<likelihood>/<specification>/cov95`` for the others. Arrays: ``k`` and
``<row>/<likelihood>/<specification>/cov95``.

The Laplace interval is the central interval of the function-space distribution
``N(f_theta-hat(x*), g^T Sigma g)`` (Appendix D: "the credible interval of f_theta(x)"),
without the observation noise sigma0^2 of eq. (1), which would widen an interval for ``y*``,
not for the mean; Split and Ensemble give intervals for the mean too. For classification the
interval is taken on the logit scale: ``sigmoid`` is increasing, so the coverage is the same
on the probability scale.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from bench.contracts.capabilities import SubnetworkPredictives
from bench.datasets.synthetic_networks import SyntheticNetworkData
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.jobs.replication_runner import FittedReplication, ReplicationValues, replication_means
from bench.methods.baselines.split_bootstrap import bootstrap_interval, split_interval
from bench.metrics.regression import central_interval, fraction_inside
from bench.predictive.densities import Gaussian
from bench.training.working_network import mean_function_fitter


def replication_coverage(cfg: DictConfig, fitted: FittedReplication,
                         generator: torch.Generator) -> tuple[ReplicationValues, dict]:
    """``({(row, "<likelihood>/<specification>", k or None): coverage}, timings)`` of one
    replication: the Laplace rows, then Split and Ensemble refitted from its data."""
    level = float(cfg.level)
    dataset = fitted.dataset
    group = f"{cfg.dataset.likelihood}/{cfg.dataset.specification}"
    x_test = dataset.x_test["mixed"]
    truth = dataset.true_mean(x_test)

    def covered(function: Gaussian) -> float:
        lower, upper = central_interval(function, level)
        return fraction_inside(lower, upper, truth)

    values: ReplicationValues = {}
    for row, method in fitted.k_free.items():
        values[(row, group, None)] = covered(method.function_predictive(x_test))
    for row, method in fitted.sized.items():
        predictives = method.function_predictives(x_test, fitted.k_grid)
        for k, predictive in zip(fitted.k_grid, predictives, strict=True):
            values[(row, group, k)] = covered(predictive)
    fit = mean_function_fitter(fitted.model.network, dataset.likelihood, fitted.schedule)
    timings = {}
    watch = Stopwatch()
    lower, upper = split_interval(dataset.x_train, dataset.y_train, x_test, fit, generator,
                                  n_splits=int(cfg.split_parts))
    values[("Split", group, None)] = fraction_inside(lower, upper, truth)
    timings["split_s"] = watch.elapsed()
    watch = Stopwatch()
    lower, upper = bootstrap_interval(dataset.x_train, dataset.y_train, x_test, fit, generator,
                                      n_models=int(cfg.ensemble_members), level=level)
    values[("Ensemble", group, None)] = fraction_inside(lower, upper, truth)
    timings["ensemble_s"] = watch.elapsed()
    return values, timings


@takes(datasets=(SyntheticNetworkData,), methods=(SubnetworkPredictives,))
def run(cfg: DictConfig) -> TaskResult:
    """Coverage of every method and ``k`` in one (likelihood, specification) setting,
    averaged over the job's replications."""
    return replication_means(cfg, "cov95", replication_coverage)
