"""SSLA/ASSLA against closed forms: exactness for linear-Gaussian models, Table 1's float claims."""

from __future__ import annotations

import math

import pytest
import torch

from bench.methods.ssla.algorithm import (
    AggregateLikelihoodIncrement,
    CandidateRefit,
    DirectLikelihoodIncrement,
    SelfPredictionRefit,
    assla_log_ppd,
    ssla_log_ppd,
)
from bench.models.conjugate_models import (
    LinearGaussianModel,
    NormalMeanModel,
    PoissonRateModel,
    newton_reference_fit,
)
from bench.models.parametric import Data, autograd_information, autograd_prior_precision

DOUBLE = torch.float64


def random_blr(seed: int) -> tuple[LinearGaussianModel, Data, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    n, q = 30 + seed, 3
    x = torch.randn(n, q, generator=gen, dtype=DOUBLE)
    theta = torch.randn(q, generator=gen, dtype=DOUBLE)
    sigma2 = 0.3 + float(torch.rand(1, generator=gen))
    y = x @ theta + math.sqrt(sigma2) * torch.randn(n, generator=gen, dtype=DOUBLE)
    root = torch.randn(q, q, generator=gen, dtype=DOUBLE)
    prior_cov = root @ root.T + 0.5 * torch.eye(q, dtype=DOUBLE)
    prior_mean = torch.randn(q, generator=gen, dtype=DOUBLE)
    x_new = torch.randn(q, generator=gen, dtype=DOUBLE)
    return LinearGaussianModel(sigma2, prior_mean, prior_cov), Data(y=y, x=x), x_new


@pytest.mark.parametrize("seed", range(5))
def test_ssla_map_posterior_curvature_is_exact_for_bayesian_linear_regression(seed):
    model, data, x_new = random_blr(seed)
    mean, var = model.exact_ppd_moments(data, x_new)
    grid = torch.linspace(mean - 4 * math.sqrt(var), mean + 4 * math.sqrt(var), 41, dtype=DOUBLE)
    approx = ssla_log_ppd(model, data, x_new, grid, objective="map", curvature_includes_prior=True)
    exact = model.exact_log_ppd(data, x_new, grid)
    assert (approx.values - exact).abs().max() <= 1e-8


@pytest.mark.parametrize("n", [1, 20, 1000])
def test_ssla_map_posterior_curvature_is_exact_for_normal_normal(n):
    gen = torch.Generator().manual_seed(n)
    data = Data(y=4 + 1.5 * torch.randn(n, generator=gen, dtype=DOUBLE))
    model = NormalMeanModel(sigma2=2.25, prior_mean=1.0, prior_var=0.7, dtype=DOUBLE)
    grid = torch.linspace(-3, 10, 60, dtype=DOUBLE)
    approx = ssla_log_ppd(model, data, None, grid, objective="map", curvature_includes_prior=True)
    assert (approx.values - model.exact_log_ppd(data, grid)).abs().max() <= 1e-8


def test_literal_algorithm_one_differs_from_the_per_candidate_refit():
    model, data, x_new = random_blr(0)
    mean, var = model.exact_ppd_moments(data, x_new)
    grid = torch.tensor([mean - 2 * math.sqrt(var), mean, mean + 2 * math.sqrt(var)], dtype=DOUBLE)
    kwargs = dict(objective="map", curvature_includes_prior=True)
    per_candidate = ssla_log_ppd(model, data, x_new, grid, refit=CandidateRefit(), **kwargs).values
    literal = ssla_log_ppd(model, data, x_new, grid, refit=SelfPredictionRefit(), **kwargs).values
    assert torch.allclose(per_candidate[1], literal[1], atol=1e-10)
    assert (per_candidate - literal).abs().max() > 1e-3


def normal_draws(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.normal(torch.full((n,), 4.0), torch.full((n,), math.sqrt(2.0)), generator=gen)


def test_assla_float64_aggregate_matches_direct_increment_at_one_million():
    draws = normal_draws(1_000_000, seed=0).double()
    model = NormalMeanModel(2.0, 4.0, 1.0, dtype=DOUBLE)
    grid = torch.linspace(0, 10, 50, dtype=DOUBLE)
    data = Data(y=draws)
    aggregate = assla_log_ppd(model, data, None, grid,
                              increment=AggregateLikelihoodIncrement()).values
    direct = assla_log_ppd(model, data, None, grid, increment=DirectLikelihoodIncrement()).values
    assert (aggregate - direct).abs().max() <= 1e-9


def test_assla_float32_aggregate_shows_the_papers_cancellation():
    draws = normal_draws(1_000_000, seed=0)
    model32 = NormalMeanModel(2.0, 4.0, 1.0, dtype=torch.float32)
    grid = torch.linspace(0, 10, 50)
    float32 = assla_log_ppd(model32, Data(y=draws), None, grid,
                            increment=AggregateLikelihoodIncrement())
    reference = assla_log_ppd(
        NormalMeanModel(2.0, 4.0, 1.0, dtype=DOUBLE), Data(y=draws.double()), None,
        grid.double(), increment=DirectLikelihoodIncrement(),
    )
    error = (float32.values.double() - reference.values).abs().max()
    assert 1e-3 < error < 0.5
    increments = float32.parts["likelihood_increment"]
    step = torch.diff(torch.unique(increments.double()))
    assert step.min() >= 0.06  # values quantised to the float32 spacing near |l| ~ 1.77e6


def test_assla_is_plugin_when_curvature_does_not_depend_on_y():
    model, data, x_new = random_blr(1)
    grid = torch.linspace(-3, 3, 25, dtype=DOUBLE)
    assla = assla_log_ppd(model, data, x_new, grid, increment=DirectLikelihoodIncrement()).values
    theta_hat = model.fit(data, "mle")
    plugin = torch.distributions.Normal(x_new @ theta_hat, math.sqrt(model.sigma2)).log_prob(grid)
    assert torch.allclose(assla - plugin, (assla - plugin)[0].expand(25), atol=1e-12)


def test_poisson_assla_curvature_depends_on_the_candidate():
    data = Data(y=torch.tensor([2.0, 4.0, 3.0, 1.0, 5.0], dtype=DOUBLE))
    model = PoissonRateModel(6.0, 2.0, dtype=DOUBLE)
    grid = torch.arange(0, 11, dtype=DOUBLE)
    assla = assla_log_ppd(model, data, None, grid, increment=DirectLikelihoodIncrement()).values
    theta_hat = model.fit(data, "mle")
    plugin = torch.distributions.Poisson(theta_hat[0]).log_prob(grid)
    expected_shift = -0.5 * torch.log((data.y.sum() + grid) / data.y.sum())
    assert torch.allclose(assla - plugin, expected_shift, atol=1e-12)


@pytest.mark.parametrize("objective", ["mle", "map"])
def test_closed_form_fits_and_curvatures_match_autograd(objective):
    gen = torch.Generator().manual_seed(3)
    models_and_data = [
        (NormalMeanModel(2.0, 4.0, 1.0, dtype=DOUBLE),
         Data(y=torch.randn(40, generator=gen, dtype=DOUBLE) + 4)),
        (PoissonRateModel(6.0, 2.0, dtype=DOUBLE),
         Data(y=torch.poisson(torch.full((40,), 3.0), generator=gen).double())),
        random_blr(2)[:2],
    ]
    for model, data in models_and_data:
        closed = model.fit(data, objective)
        assert torch.allclose(closed, newton_reference_fit(model, data, objective), atol=1e-9)
        assert torch.allclose(model.information(closed, data),
                              autograd_information(model, closed, data), rtol=1e-9)
        assert torch.allclose(model.prior_precision(closed),
                              autograd_prior_precision(model, closed), rtol=1e-9)
