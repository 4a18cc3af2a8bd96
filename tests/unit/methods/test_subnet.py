"""Subnetwork LLA (Raha, Khare, Patra): selectors, surrogates, W2, data, training, baselines."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest
import scipy.integrate
import scipy.linalg
import scipy.stats
import torch
from torch.utils.data import DataLoader, TensorDataset

from bench.benchmarks.subset_selection_speed import (
    fit_exponent,
    greedy_timing,
    random_precision,
    scaling_exponents,
)
from bench.datasets.synthetic_networks import input_covariance, make_dataset, sample_test_inputs
from bench.harness.errors import ConfigError
from bench.harness.method_nodes import instantiate_method, method_variants
from bench.harness.rng import make_generator
from bench.methods.baselines.split_bootstrap import bootstrap_interval, split_interval
from bench.methods.laplace import linearised as lla
from bench.methods.laplace import subset_selection as selection
from bench.methods.laplace.subnet_masks import (
    DiagonalSubnetMask,
    GradientSubnetMask,
    GreedySubnetMask,
    LastKSubnetMask,
    NeuralLinearSubnetMask,
)
from bench.methods.laplace.subnetwork import SubnetLaplaceMethod
from bench.metrics.wasserstein import gaussian_w2, mean_predictive_w2, univariate_gaussian_w2
from bench.models.mlp import MLPShape
from bench.training.working_network import (
    Schedule,
    TrainedWorkingModel,
    train_working_network,
)
from tests.helpers import compose_config

TINY = MLPShape((3, 4, 3, 1), ("tanh", "sigmoid"))


def random_spd(p: int, seed: int) -> torch.Tensor:
    """A dense SPD matrix with a spread spectrum (no GGN structure)."""
    a = torch.randn(p, p, generator=make_generator(seed), dtype=torch.float64)
    return a @ a.T + 0.1 * torch.eye(p, dtype=torch.float64)


def brute_force_greedy(omega: torch.Tensor, k: int) -> list[int]:
    """Algorithm 1 from its definition: each step takes the remaining parameter whose variance
    conditional on the other remaining ones (selected ones marginalised out) is largest."""
    sigma = torch.linalg.inv(omega)
    remaining, chosen = list(range(omega.shape[0])), []
    for _ in range(k):
        best, best_var = None, -math.inf
        for i in remaining:
            rest = [r for r in remaining if r != i]
            var = sigma[i, i]
            if rest:
                cross = sigma[i, rest]
                var = var - cross @ torch.linalg.solve(sigma[rest][:, rest], cross)
            if var > best_var:
                best, best_var = i, var
        chosen.append(best)
        remaining.remove(best)
    return chosen


def tiny_laplace(likelihood: str = "regression", seed: int = 1) -> lla.LinearisedLaplace:
    """LLA of a random tiny network on 12 random inputs."""
    g = make_generator(seed)
    theta = torch.randn(TINY.n_params, generator=g, dtype=torch.float64)
    x = torch.randn(12, 3, generator=g, dtype=torch.float64)
    return lla.fit_linearised_laplace(TINY, theta, x, likelihood)


# ---------------------------------------------------------------- selectors


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("make", [random_spd, lambda p, s: random_precision(p, make_generator(s))])
def test_greedy_matches_brute_force_definition(seed, make):
    omega = make(7, seed)
    expected = brute_force_greedy(omega, 7)
    for k in (1, 3, 7):
        assert selection.greedy_subnet_indices(omega, k).tolist() == expected[:k]
        assert selection.naive_greedy_subnet_indices(omega, k).tolist() == expected[:k]
        assert selection.partial_cholesky_greedy_subnet_indices(omega, k).tolist() == expected[:k]


def test_greedy_implementations_agree_on_larger_ggn_like_precision():
    omega = random_precision(60, make_generator(5))
    greedy = selection.greedy_subnet_indices(omega, 20)
    assert torch.equal(greedy, selection.naive_greedy_subnet_indices(omega, 20))
    assert torch.equal(greedy, selection.partial_cholesky_greedy_subnet_indices(omega, 20))


def test_schur_update_equals_inverting_and_reinverting():
    omega = random_spd(8, 3)
    sigma = torch.linalg.inv(omega)
    order = selection.greedy_subnet_indices(omega, 4).tolist()
    current, remaining = omega, list(range(8))
    for j in order:
        current = selection.schur_remove(current, remaining.index(j))
        remaining.remove(j)
        expected = torch.linalg.inv(sigma[remaining][:, remaining])
        torch.testing.assert_close(current, expected)


def test_greedy_picks_the_smallest_diagonal_first():
    omega = random_spd(9, 4)
    assert int(selection.greedy_subnet_indices(omega, 1)[0]) == int(omega.diagonal().argmin())


def test_every_selector_returns_k_distinct_indices():
    fit = tiny_laplace()
    p, k = TINY.n_params, 6
    reference = fit.jacobians(torch.randn(10, 3, generator=make_generator(9), dtype=torch.float64))
    subsets = [
        selection.greedy_subnet_indices(fit.omega, k),
        selection.partial_cholesky_greedy_subnet_indices(fit.omega, k),
        selection.naive_greedy_subnet_indices(fit.omega, k),
        selection.gradient_subnet_indices(reference, k),
        selection.subnet_diagonal_indices(fit.omega, k),
        selection.last_k_indices(p, k),
    ]
    for subset in subsets:
        assert subset.dtype == torch.long and len(subset) == k == len(set(subset.tolist()))
        assert 0 <= int(subset.min()) and int(subset.max()) < p
    last_layer = selection.neural_linear_indices(TINY)
    assert last_layer.tolist() == list(range(p - 4, p))
    with pytest.raises(ConfigError):
        selection.greedy_subnet_indices(fit.omega, p + 1)


def test_gradient_and_diagonal_selectors_rank_correctly():
    jac = torch.tensor([[1.0, -5.0, 0.5, 2.0], [-1.0, 1.0, 0.5, -2.0]], dtype=torch.float64)
    assert selection.gradient_subnet_indices(jac, 2).tolist() == [1, 3]
    omega = torch.diag(torch.tensor([3.0, 1.0, 2.0, 0.5], dtype=torch.float64))
    assert selection.subnet_diagonal_indices(omega, 2).tolist() == [3, 1]
    assert selection.last_k_indices(4, 2).tolist() == [2, 3]


# ---------------------------------------------------------------- surrogates


def test_subnet_variance_is_below_full_and_grows_with_greedy_k():
    fit = tiny_laplace()
    g = fit.jacobians(torch.randn(20, 3, generator=make_generator(8), dtype=torch.float64))
    full = lla.full_covariance(fit.omega).function_variance(g)
    torch.testing.assert_close(full, ((g @ torch.linalg.inv(fit.omega)) * g).sum(1))
    order = selection.greedy_subnet_indices(fit.omega, TINY.n_params)
    previous = torch.zeros_like(full)
    for k in range(1, TINY.n_params + 1):
        variance = lla.subnetwork_covariance(fit.omega, order[:k]).function_variance(g)
        assert torch.all(variance >= previous - 1e-10) and torch.all(variance <= full + 1e-10)
        previous = variance
    torch.testing.assert_close(previous, full)


def subnet_method_variants() -> dict:
    """The paper's rows as ``conf/method/subnet_laplace.yaml`` configures them."""
    cfg = compose_config(["experiment=subnet/figure-1", "scale=smoke"])
    return {row: instantiate_method(cfg.method, **arguments)
            for row, arguments in method_variants(cfg.method).items()}


def tiny_base(seed: int = 1) -> TrainedWorkingModel:
    """The random tiny network of :func:`tiny_laplace` as a trained working model."""
    g = make_generator(seed)
    theta = torch.randn(TINY.n_params, generator=g, dtype=torch.float64)
    x = torch.randn(12, 3, generator=g, dtype=torch.float64)
    y = torch.randn(12, generator=g, dtype=torch.float64)
    return TrainedWorkingModel(TINY, theta, x, y, x[:0], y[:0])


def test_every_configured_method_gives_finite_variances_and_full_is_exact():
    fit, base = tiny_laplace(), tiny_base()
    data = SimpleNamespace(likelihood="regression")
    x_test = torch.randn(6, 3, generator=make_generator(3), dtype=torch.float64)
    g = fit.jacobians(x_test)
    full = lla.full_covariance(fit.omega).function_variance(g)
    variants = subnet_method_variants()
    assert list(variants) == ["LLA", "Greedy-Laplace", "Gradient-Laplace",
                              "Gradient-Laplace (test ref.)", "Subnet diagonal", "Last k",
                              "NeuralLinear", "PrecisionDiag", "Block Laplace"]
    for row, method in variants.items():
        if method.takes_subset_size:
            method = dataclasses.replace(method, n_params_subnet=5)
        method.fit(data, 0, base=base)
        variance = method.function_predictive(x_test).variance
        assert variance.shape == (6,) and torch.isfinite(variance).all()
        w2 = mean_predictive_w2(full, variance)
        assert w2 >= 0 and (w2 == 0) == (row == "LLA")
        predictive = method.predict(x_test)
        torch.testing.assert_close(predictive.variance, 1.0 + variance)
        if method.takes_subset_size:
            nested = method.function_predictives(x_test, [1, 3, 5])
            torch.testing.assert_close(nested[-1].variance, variance)
    greedy = dataclasses.replace(variants["Greedy-Laplace"], n_params_subnet=5)
    greedy.fit(data, 0, base=base)
    expected = lla.subnetwork_covariance(fit.omega, selection.greedy_subnet_indices(fit.omega, 5))
    torch.testing.assert_close(greedy.function_predictive(x_test).variance,
                               expected.function_variance(g))
    with pytest.raises(ConfigError, match="n_params_subnet"):
        variants["Gradient-Laplace"].fit(data, 0, base=base)
    with pytest.raises(ConfigError, match="method.covariance='diag'.*full, precision_diag"):
        SubnetLaplaceMethod(covariance="diag")


def test_masks_follow_the_selection_rules_and_laplace_torch_conventions():
    fit = tiny_laplace()
    module = TINY.module(fit.theta)
    p, k = TINY.n_params, 6
    reference = torch.randn(10, 3, generator=make_generator(9), dtype=torch.float64)
    loader = DataLoader(TensorDataset(reference), batch_size=4)
    rankings = {
        GreedySubnetMask: selection.greedy_subnet_indices(fit.omega, k),
        GradientSubnetMask: selection.gradient_subnet_indices(fit.jacobians(reference), k),
        DiagonalSubnetMask: selection.subnet_diagonal_indices(fit.omega, k),
        LastKSubnetMask: torch.arange(p - 1, p - 1 - k, -1),
    }
    for mask_class, expected in rankings.items():
        mask = mask_class(module, k, precision=fit.omega, jacobians=fit.jacobians)
        assert torch.equal(mask.ranking(loader), expected)
        assert torch.equal(mask.select(loader), expected.sort().values)
        assert mask.indices.dtype == torch.long and mask.n_params_subnet == k
        scores = mask.compute_param_scores(loader)
        assert set(scores.topk(k).indices.tolist()) == set(expected.tolist())
        with pytest.raises(ValueError, match="already selected"):
            mask.select(loader)
    autograd = GradientSubnetMask(module, k).ranking(loader)
    assert torch.equal(autograd, rankings[GradientSubnetMask])
    last_layer = NeuralLinearSubnetMask(module)
    assert torch.equal(last_layer.select(), selection.neural_linear_indices(TINY))
    assert last_layer.n_params_subnet == 4
    with pytest.raises(ConfigError, match="n_params_subnet=40 must lie in 1..35"):
        GreedySubnetMask(module, 40, precision=fit.omega)


def test_probit_matches_monte_carlo():
    mean = torch.tensor([-2.0, 0.0, 1.5], dtype=torch.float64)
    variance = torch.tensor([0.5, 3.0, 1.0], dtype=torch.float64)
    probit = lla.probit_probability(mean, variance)
    mc = lla.monte_carlo_probability(mean, variance, 200_000, make_generator(0))
    torch.testing.assert_close(probit, mc, atol=0.02, rtol=0)
    torch.testing.assert_close(lla.probit_probability(mean, 0 * variance), torch.sigmoid(mean))


# ---------------------------------------------------------------- Wasserstein


def test_univariate_w2_matches_quantile_integral():
    for m1, v1, m2, v2 in [(0.0, 1.0, 0.0, 2.5), (1.0, 0.3, -0.5, 4.0), (2.0, 1.0, 2.0, 1.0)]:
        integrand = lambda u, a=(m1, v1), b=(m2, v2): (  # noqa: E731
            scipy.stats.norm.ppf(u, a[0], a[1] ** 0.5) - scipy.stats.norm.ppf(u, b[0], b[1] ** 0.5)
        ) ** 2
        by_quadrature = math.sqrt(scipy.integrate.quad(integrand, 0, 1, limit=200)[0])
        closed = univariate_gaussian_w2(*(torch.tensor(v, dtype=torch.float64)
                                          for v in (m1, v1, m2, v2)))
        assert float(closed) == pytest.approx(by_quadrature, abs=1e-7)


def test_multivariate_w2_against_scipy_and_special_cases():
    g = make_generator(11)
    a, b = random_spd(4, 12), random_spd(4, 13)
    m1, m2 = torch.randn(4, generator=g, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    root_b = scipy.linalg.sqrtm(b.numpy())
    cross = scipy.linalg.sqrtm(root_b @ a.numpy() @ root_b).real
    expected = math.sqrt(float(((m1 - m2) ** 2).sum()) + float(torch.trace(a + b))
                         - 2 * float(cross.trace()))
    assert float(gaussian_w2(m1, a, m2, b)) == pytest.approx(expected, rel=1e-8)
    one = torch.ones(1, dtype=torch.float64)
    assert float(gaussian_w2(0 * one, 2 * one.diag(), one, 5 * one.diag())) == pytest.approx(
        float(univariate_gaussian_w2(0 * one, 2 * one, one, 5 * one)[0]))
    da, db = torch.tensor([1.0, 4.0, 0.0]), torch.tensor([9.0, 1.0, 2.0])
    diag_w2 = gaussian_w2(torch.zeros(3), torch.diag(da), torch.zeros(3), torch.diag(db))
    assert float(diag_w2) == pytest.approx(float(((da.sqrt() - db.sqrt()) ** 2).sum().sqrt()))
    singular = lla.subnetwork_covariance(a, torch.tensor([0, 2])).dense()
    assert float(gaussian_w2(m2, singular, m2, singular)) == pytest.approx(0, abs=1e-6)


# ---------------------------------------------------------------- data


def test_training_inputs_have_the_papers_covariance():
    data = make_dataset("exp1", "misspecified", "regression", make_generator(0), n_train=20000,
                        n_test=10)
    torch.testing.assert_close(torch.cov(data.x_train.T), input_covariance(), atol=0.04, rtol=0)
    assert data.x_train.shape == (20000, 5) and data.y_train.shape == (20000,)
    assert data.true_network.widths == (5, 30, 30, 30, 1)
    residual = data.y_train - data.true_mean(data.x_train)
    assert float(residual.var()) == pytest.approx(1.0, abs=0.05)
    assert float(input_covariance()[0, 2]) == pytest.approx(0.36)


def test_test_domains_and_experiment_shapes():
    g = make_generator(1)
    for name, mean, var in (("in_distribution", 1, 1), ("ood", 6, 1), ("mixed", 0, 25)):
        x = sample_test_inputs(name, 20000, g)
        assert float(x.mean()) == pytest.approx(mean, abs=0.1)
        assert float(x.var()) == pytest.approx(var, rel=0.05)
    exp1 = make_dataset("exp1", "wellspecified", "regression", make_generator(2))
    assert exp1.x_train.shape == (200, 5) and set(exp1.x_test) == {"in_distribution", "ood",
                                                                    "mixed"}
    assert all(x.shape == (500, 5) for x in exp1.x_test.values())
    exp2 = make_dataset("exp2", "misspecified", "classification", make_generator(3))
    assert exp2.x_train.shape == (5000, 5) and set(exp2.x_test) == {"mixed"}
    assert set(exp2.y_train.unique().tolist()) == {0.0, 1.0}
    again = make_dataset("exp2", "misspecified", "classification", make_generator(3))
    assert torch.equal(again.y_train, exp2.y_train) and torch.equal(again.true_theta,
                                                                     exp2.true_theta)
    with pytest.raises(ConfigError):
        make_dataset("exp3", "misspecified", "regression", make_generator(0))


# ---------------------------------------------------------------- training and pipeline


@pytest.mark.parametrize("likelihood", ["regression", "classification"])
def test_training_reduces_loss_and_feeds_the_lla(likelihood):
    data = make_dataset("exp1", "misspecified", likelihood, make_generator(0), n_train=60,
                        n_test=30)
    network = MLPShape((5, 6, 6, 1), ("tanh", "sigmoid"))
    short = train_working_network(network, data.x_train, data.y_train, likelihood,
                                  Schedule(0.01, 1, 100), make_generator(1))
    trained = train_working_network(network, data.x_train, data.y_train, likelihood,
                                    Schedule(0.01, 150, 100), make_generator(1))
    assert trained.x_fit.shape[0] == 54 and trained.x_val.shape[0] == 6
    assert trained.diagnostics["train_loss"] < short.diagnostics["train_loss"]
    x_test = data.x_test["mixed"]
    full, greedy = SubnetLaplaceMethod(), SubnetLaplaceMethod(mask=GreedySubnetMask,
                                                             n_params_subnet=10)
    for method in (full, greedy):
        method.fit(data, 0, base=trained)
    fit = lla.fit_linearised_laplace(network, trained.theta, trained.x_fit, likelihood)
    torch.testing.assert_close(full.laplace.omega, fit.omega)
    variances = [m.function_predictive(x_test).variance for m in (full, greedy)]
    assert 0 < mean_predictive_w2(*variances) < math.inf


# ---------------------------------------------------------------- baselines and coverage


def least_squares_fitter(x, y, generator):
    """A linear model with intercept (stands in for network training)."""
    design = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], 1)
    coef = torch.linalg.lstsq(design, y.unsqueeze(1)).solution[:, 0]
    return lambda z: torch.cat([z, torch.ones(len(z), 1, dtype=z.dtype)], 1) @ coef


def test_split_and_bootstrap_intervals():
    g = make_generator(0)
    x = torch.randn(80, 2, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([1.0, -2.0], dtype=torch.float64) + torch.randn(80, generator=g,
                                                                         dtype=torch.float64)
    x_test = torch.randn(15, 2, generator=g, dtype=torch.float64)
    lower, upper = split_interval(x, y, x_test, least_squares_fitter, make_generator(1))
    parts = torch.randperm(80, generator=make_generator(1)).tensor_split(8)
    manual = torch.stack([least_squares_fitter(x[p], y[p], None)(x_test) for p in parts])
    torch.testing.assert_close(lower, manual.min(0).values)
    torch.testing.assert_close(upper, manual.max(0).values)
    lo, hi = bootstrap_interval(x, y, x_test, least_squares_fitter, make_generator(2))
    assert torch.all(lo <= hi) and lo.shape == (15,)
    lo2, hi2 = bootstrap_interval(x, y, x_test, least_squares_fitter, make_generator(2))
    assert torch.equal(lo, lo2) and torch.equal(hi, hi2)


# ---------------------------------------------------------------- timing helper


def test_greedy_timing_rows_and_exponents():
    rows = greedy_timing([20, 40], [2, 4], repeats=1, seed=0)
    assert len(rows) == 4 and all(r["same_indices"] for r in rows)
    assert all(r["greedy_s"] > 0 and r["naive_s"] > 0 for r in rows)
    exponents = scaling_exponents(rows, "greedy_s")
    assert set(exponents) == {"vs_p_at_k=4", "vs_k_at_p=40"}
    assert fit_exponent([10, 20, 40], [3e-3 * s**3 for s in (10, 20, 40)]) == pytest.approx(3)
