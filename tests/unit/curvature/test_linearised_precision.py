"""The linearised Laplace precision (a weighted dense GGN plus the prior) and the covariance
surrogates built on its structures, against their definitions."""

from __future__ import annotations

import torch

from bench.harness.rng import make_generator
from bench.methods.laplace import linearised as lla
from bench.models.mlp import MLPShape

TINY = MLPShape((3, 4, 3, 1), ("tanh", "sigmoid"))


def random_spd(p: int, seed: int) -> torch.Tensor:
    """A dense SPD matrix with a spread spectrum (no GGN structure)."""
    a = torch.randn(p, p, generator=make_generator(seed), dtype=torch.float64)
    return a @ a.T + 0.1 * torch.eye(p, dtype=torch.float64)


def tiny_problem(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Random parameters of the tiny network and 12 random inputs."""
    g = make_generator(seed)
    theta = torch.randn(TINY.n_params, generator=g, dtype=torch.float64)
    return theta, torch.randn(12, 3, generator=g, dtype=torch.float64)


def test_classification_precision_is_the_bernoulli_weighted_ggn_plus_prior():
    theta, x = tiny_problem()
    fit = lla.fit_linearised_laplace(TINY, theta, x, "classification")
    jac, s = TINY.jacobian(theta, x), torch.sigmoid(TINY.forward_1d(theta, x))
    expected = jac.T @ torch.diag(s * (1 - s)) @ jac + torch.eye(TINY.n_params)
    torch.testing.assert_close(fit.omega, expected)


def test_regression_precision_scales_with_noise_and_prior_variance():
    theta, x = tiny_problem(2)
    fit = lla.fit_linearised_laplace(TINY, theta, x, "regression", noise_variance=0.25,
                                     prior_variance=2.0)
    jac = torch.func.jacrev(lambda t: TINY.forward_1d(t, x))(theta)
    expected = jac.T @ jac / 0.25 + 0.5 * torch.eye(TINY.n_params, dtype=torch.float64)
    torch.testing.assert_close(fit.omega, expected)


def test_moore_penrose_surrogate_is_the_conditional_covariance():
    omega = random_spd(7, 6)
    subset = torch.tensor([1, 4, 5])
    rest = torch.tensor([0, 2, 3, 6])
    padded = torch.zeros_like(omega)
    padded[subset.unsqueeze(1), subset.unsqueeze(0)] = omega[subset][:, subset]
    pinv = torch.linalg.pinv(padded)
    surrogate = lla.subnetwork_covariance(omega, subset)
    torch.testing.assert_close(surrogate.dense(), pinv)
    sigma = torch.linalg.inv(omega)
    s_s, s_r = sigma[subset][:, subset], sigma[subset][:, rest]
    conditional = s_s - s_r @ torch.linalg.solve(sigma[rest][:, rest], s_r.T)
    torch.testing.assert_close(pinv[subset][:, subset], conditional)
    assert not torch.allclose(conditional, s_s)  # the marginal covariance differs
    g = torch.randn(5, 7, generator=make_generator(7), dtype=torch.float64)
    torch.testing.assert_close(surrogate.function_variance(g), ((g @ pinv) * g).sum(1))


def test_diagonal_and_block_surrogates():
    theta, x = tiny_problem()
    fit = lla.fit_linearised_laplace(TINY, theta, x, "regression")
    diag = lla.precision_diagonal_covariance(fit.omega)
    torch.testing.assert_close(diag.dense(), torch.diag(1 / fit.omega.diagonal()))
    blocks = lla.layer_block_covariance(fit.omega, TINY)
    expected = torch.block_diag(*[torch.linalg.inv(fit.omega[s, s]) for s in TINY.layer_slices()])
    torch.testing.assert_close(blocks.dense(), expected)
    g = fit.jacobians(torch.randn(4, 3, generator=make_generator(2), dtype=torch.float64))
    torch.testing.assert_close(blocks.function_variance(g), ((g @ expected) * g).sum(1))
    torch.testing.assert_close(diag.function_variance(g), (g**2 / fit.omega.diagonal()).sum(1))
    full = lla.full_covariance(fit.omega)
    torch.testing.assert_close(full.function_variance(g), ((g @ torch.linalg.inv(fit.omega))
                                                           * g).sum(1))
