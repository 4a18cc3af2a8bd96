"""The corrected SSLA refit: damped Newton to the MAP of D + (x, y), checked against closed forms
(Bayesian linear regression, Sherman-Morrison) and an independent long L-BFGS refit."""

from __future__ import annotations

import pytest
import torch

from bench.curvature.dense import Dense
from bench.datasets.toy import heteroscedastic_toy
from bench.harness.errors import ConfigError
from bench.methods.ssla.network import NetworkSSLA
from bench.methods.ssla.refit_gauss_newton import GaussNewtonRefit
from bench.methods.ssla.refit_newton import (
    LogJointProblem,
    NewtonRefit,
    NewtonSettings,
    RankOnePreconditioner,
    damped_newton,
    gradient_norm,
    lbfgs_refit,
)
from bench.methods.ssla.ssla_objectives import AuthorsObjective, GaussianObjective
from bench.training.regression_network import train_map_mlp
from tests.unit.methods.test_nn_laplace import _exact_predictive, _linear_problem


def test_converged_refit_is_exact_in_one_step_on_bayesian_linear_regression():
    splits, base, mean, cov = _linear_problem()
    method = NetworkSSLA(structure="kfac", objective=GaussianObjective(), refit=NewtonRefit())
    diagnostics = method.fit(splits, 0, base)
    density = method.predict(splits.x_test)
    exact = _exact_predictive(splits.x_test, mean, cov)
    exact_log = torch.distributions.Normal(exact.mean[:, None], exact.stddev[:, None]).log_prob(
        method.last["grid"])
    assert (density.log_density - exact_log).abs().max() <= 1e-8
    assert diagnostics["base_map_steps"] == 0 and diagnostics["base_map_converged"]
    summary = method.prediction_diagnostics()
    assert summary["refit_steps_max"] == 1 and summary["refit_not_converged"] == 0
    assert summary["refit_grad_norm_max"] <= method.refit.grad_tol


def test_rank_one_preconditioner_is_the_inverse_of_the_updated_precision():
    g = torch.Generator().manual_seed(0)
    root = torch.randn(6, 6, generator=g, dtype=torch.float64)
    precision = root @ root.T + torch.eye(6, dtype=torch.float64)
    u = torch.randn(2, 6, generator=g, dtype=torch.float64)
    owner = torch.tensor([0, 0, 1])
    preconditioner = RankOnePreconditioner(Dense(precision), u, owner)
    residual = torch.randn(3, 6, generator=g, dtype=torch.float64)
    rows = torch.arange(3)
    solved = preconditioner.solve(residual, rows)
    for k in range(3):
        updated = precision + torch.outer(u[owner[k]], u[owner[k]])
        torch.testing.assert_close(solved[k], torch.linalg.solve(updated, residual[k]),
                                   rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(preconditioner.multiply(residual, rows)[k],
                                   updated @ residual[k], rtol=1e-12, atol=1e-12)


class _RoundedQuadratic:
    """``Phi(theta) = C + |theta|^2 / 2`` whose evaluation rounds up by 2 machine epsilons
    relative at the minimum, as a sum over D can: next to it the value cannot show the decrease
    a Newton step promises (``|g|^2 / 2`` is far below ``C``'s last place)."""

    offset = 1e3

    def values(self, thetas, rows):
        value = self.offset + 0.5 * thetas.pow(2).sum(-1)
        at_minimum = thetas.abs().amax(-1) == 0
        return torch.where(at_minimum, value * (1 + 2 * torch.finfo(value.dtype).eps), value)

    def chunk_size(self) -> int:
        return 8


def test_a_newton_step_whose_decrease_is_below_the_values_rounding_is_taken():
    """Found on an AVX-512 Xeon: a refit of the tanh network below stalled at |g| = 1.7e-8 for
    90 steps (the Armijo test rejected the exact Newton step, whose promised decrease 8e-17
    was below the log joint's rounding 3e-15). The step to the minimum is taken at once."""
    start = torch.tensor([[1e-9, -2e-9]], dtype=torch.float64)
    preconditioner = RankOnePreconditioner(Dense(torch.eye(2, dtype=torch.float64)))
    outcome = damped_newton(_RoundedQuadratic(), start, preconditioner,
                            NewtonSettings(grad_tol=1e-14, max_steps=5))
    assert bool(outcome.converged[0]) and int(outcome.steps[0]) == 1
    assert float(outcome.thetas.abs().max()) == 0.0


@pytest.fixture(scope="module")
def small_tanh_network():
    """A network of Table 2's kind at test size: the heteroscedastic toy (40 training points),
    a 1-8-8-1 MLP (tanh: its MAP is a smooth stationary point, which a ReLU network's
    generally is not), MAP-trained with fitted sigma."""
    splits = heteroscedastic_toy(42, n_points=50)
    base = train_map_mlp(splits, seed=42, max_epochs=500, activation="tanh", n_hidden=(8, 8))
    return splits, base


@pytest.mark.second_tier
def test_converged_refit_matches_a_long_lbfgs_refit(small_tanh_network):
    """Within ±2 predictive sd (where the MAP of D + (x, y) is the one next to the MAP of D),
    the normalised log PPD (both normalised by the same quadrature constant) agrees with
    the one from independent L-BFGS refits to 1e-3 nats, and both optimisers converged."""
    splits, base = small_tanh_network
    method = NetworkSSLA(structure="dense", objective=GaussianObjective(),
                         refit=NewtonRefit(grad_tol=1e-8), fine_grid_points=9, fine_grid_sds=2.0)
    diagnostics = method.fit(splits, 42, base)
    assert diagnostics["base_map_converged"] and diagnostics["base_map_log_joint_gain"] > 0
    x = splits.x_test[:1].double()
    density = method.predict(x)
    assert method.prediction_diagnostics()["refit_not_converged"] == 0
    grid = method.last["grid"][0]
    problem = LogJointProblem(base.shape, method.x, method.y, base.noise_variance,
                              base.prior_precision, x.expand(len(grid), -1), grid)
    pairs = [1, 4, 7]
    reference = method.refit.outcome.thetas.clone()
    for row in pairs:
        reference[row] = lbfgs_refit(problem, method.anchor, row, grad_tol=1e-8)
    assert gradient_norm(problem, reference[pairs], pairs).max() <= 1e-5
    newton_log = density.log_density[0, pairs]
    method._refits = lambda x, grid: reference
    lbfgs_log = method.predict(x).log_density[0, pairs]
    assert (newton_log - lbfgs_log).abs().max() <= 1e-3
    assert method.refit.outcome is not None


def test_refits_stopped_by_the_step_limit_are_counted_as_not_converged(small_tanh_network):
    splits, base = small_tanh_network
    method = NetworkSSLA(structure="diag", objective=GaussianObjective(), refit=NewtonRefit(),
                         fine_grid_points=5, refit_max_steps=1, base_max_steps=2)
    diagnostics = method.fit(splits, 42, base)
    assert diagnostics["base_map_steps"] == 2 and not diagnostics["base_map_converged"]
    method.predict(splits.x_test[:2].double())
    summary = method.prediction_diagnostics()
    assert summary["refit_not_converged"] == 10 and summary["refit_steps_max"] == 1
    assert summary["refit_grad_norm_median"] > method.refit.grad_tol


@pytest.mark.parametrize("refit", [NewtonRefit, GaussNewtonRefit])
def test_newton_refits_need_the_corrected_protocol(refit):
    with pytest.raises(ConfigError, match="protocol=corrected"):
        NetworkSSLA(structure="diag", objective=AuthorsObjective(), refit=refit())
