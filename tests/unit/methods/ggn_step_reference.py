"""A reference for one step of VOGGN, LGVA and OGGN, written from the GGN thesis (Immer,
Chapter 4; text in ``shared/papers/002_*.txt``) and sharing no code with
``bench.methods.variational`` or ``bench.models`` (torch only), so that a test can hold the
project's step against it on nonlinear networks, where ``J`` depends on the point it is taken at.

Equations used:

* natural parameters ``eta1 = Sigma^-1 mu``, ``eta2 = -1/2 Sigma^-1`` (eq. 4.1);
* the update of ``eta1`` (eq. 4.2) and of ``eta2`` (eq. 4.3) with the prior ``N(mu_0, Sigma_0)``,
  here ``mu_0 = 0`` and ``Sigma_0 = delta^-1 I`` (eq. 4.2's ``Sigma_0, mu_0`` are the prior's:
  "we combine the current posterior approximation q_t with the prior"; Appendix C, eq. C.6-C.9);
* the expected log likelihood as a sum over data points (eq. 4.4) and its gradients in ``mu`` and
  ``Sigma`` as expected gradients (Bonnet / Price, eq. 4.5-4.6), each approximated by the
  algorithm's pseudo-data ``(f-hat_s, J-hat_s)`` (Table 4.2):
  VOGGN eq. 4.7-4.8, LGVA eq. 4.9-4.10, OGGN eq. 4.11-4.12;
* the likelihood's residual ``r = d log p / d f`` and output precision
  ``Lambda = -d^2 log p / d f^2`` (Table 2.1), taken here by automatic differentiation of the
  log density itself.

The Monte Carlo average carries ``1/S`` in every estimate (eq. 4.7, 4.10; the proof of
Theorem 4.1: "a sum over S divided by S"); the text of eq. 4.8 as extracted shows the ``1/2``
but not the ``1/S`` and indexes the samples by ``i``: read as the same average.

The network has its own parameter layout, different from ``bench.models.mlp``'s: per layer the
bias first, then the weight as ``[fan_in, fan_out]`` row-major (the transpose of torch's
``nn.Linear`` weight). :meth:`ReferenceMLP.from_torch_linear_order` maps a vector in the
``nn.Linear`` order into it; the tests check the map on outputs and Jacobians.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import grad, jacrev, vmap

PseudoDataRule = Callable[["ReferenceMLP", Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class ReferenceMLP:
    """A single-output fully connected network ``widths = (d_in, h_1, ..., 1)`` with one
    activation function per hidden layer, evaluated from one flat vector in this module's
    layout (per layer: bias, then the weight ``[fan_in, fan_out]`` row-major)."""

    widths: tuple[int, ...]
    activations: tuple[Callable[[Tensor], Tensor], ...]

    @property
    def n_params(self) -> int:
        """Number of weights and biases."""
        return sum((a + 1) * b for a, b in zip(self.widths[:-1], self.widths[1:], strict=True))

    def layers(self, theta: Tensor) -> list[tuple[Tensor, Tensor]]:
        """(bias ``[fan_out]``, weight ``[fan_in, fan_out]``) per layer, input to output."""
        out, start = [], 0
        for fan_in, fan_out in zip(self.widths[:-1], self.widths[1:], strict=True):
            bias = theta[start:start + fan_out]
            weight = theta[start + fan_out:start + fan_out + fan_in * fan_out]
            out.append((bias, weight.reshape(fan_in, fan_out)))
            start += fan_out * (fan_in + 1)
        return out

    def forward(self, theta: Tensor, x: Tensor) -> Tensor:
        """``f(x; theta)`` ``[N]`` at inputs ``x`` ``[N, d_in]``."""
        *hidden, (bias, weight) = self.layers(theta)
        h = x
        for (b, w), activation in zip(hidden, self.activations, strict=True):
            h = activation(h @ w + b)
        return (h @ weight + bias)[:, 0]

    def jacobian(self, theta: Tensor, x: Tensor) -> Tensor:
        """``J(x; theta) = d f(x; theta) / d theta`` ``[N, P]`` (reverse-mode autodiff)."""
        return jacrev(self.forward)(theta, x)

    def from_torch_linear_order(self) -> Tensor:
        """Indices ``perm`` with ``theta_here = theta_linear[perm]`` for a vector laid out as
        ``nn.Sequential`` of ``nn.Linear`` lays it out (per layer the weight ``[fan_out,
        fan_in]`` row-major, then the bias); a matrix maps as ``matrix[perm][:, perm]``."""
        parts, start = [], 0
        for fan_in, fan_out in zip(self.widths[:-1], self.widths[1:], strict=True):
            weight = start + torch.arange(fan_out * fan_in).reshape(fan_out, fan_in)
            bias = start + fan_out * fan_in + torch.arange(fan_out)
            parts += [bias, weight.T.reshape(-1)]
            start += fan_out * (fan_in + 1)
        return torch.cat(parts)


@dataclass(frozen=True)
class ReferenceLikelihood:
    """A likelihood ``p(y | f)`` given by its log density for scalar ``f`` and ``y``."""

    log_density: Callable[[Tensor, Tensor], Tensor]

    def residual(self, f: Tensor, y: Tensor) -> Tensor:
        """``r(y, f) = d log p(y | f) / d f`` per point (Table 2.1)."""
        return vmap(grad(self.log_density))(f, y)

    def output_precision(self, f: Tensor, y: Tensor) -> Tensor:
        """``Lambda(f) = -d^2 log p(y | f) / d f^2`` per point (Table 2.1)."""
        return -vmap(grad(grad(self.log_density)))(f, y)


def gaussian_likelihood(noise_variance: float) -> ReferenceLikelihood:
    """``y ~ N(f, sigma^2)``: ``log p = -1/2 log(2 pi sigma^2) - (y - f)^2 / (2 sigma^2)``."""
    return ReferenceLikelihood(lambda f, y: -0.5 * math.log(2 * math.pi * noise_variance)
                               - (y - f) ** 2 / (2 * noise_variance))


def bernoulli_likelihood() -> ReferenceLikelihood:
    """``y ~ Bernoulli(sigmoid(f))``, ``y`` in {0, 1}: ``log p = y f - log(1 + e^f)``."""
    return ReferenceLikelihood(lambda f, y: y * f - torch.logaddexp(torch.zeros_like(f), f))


def voggn_pseudo_data(mlp: ReferenceMLP, x: Tensor, mean: Tensor,
                      theta: Tensor) -> tuple[Tensor, Tensor]:
    """VOGGN (eq. 4.7-4.8, Table 4.2 row 1): ``f(x; theta_s)`` and ``J(x; theta_s)``."""
    return mlp.forward(theta, x), mlp.jacobian(theta, x)


def lgva_pseudo_data(mlp: ReferenceMLP, x: Tensor, mean: Tensor,
                     theta: Tensor) -> tuple[Tensor, Tensor]:
    """LGVA (eq. 4.9-4.10, Table 4.2 row 2): the network linearised at ``mu_t`` and evaluated
    at the draw, ``f_lin^mu(x; theta_s) = f(x; mu_t) + J(x; mu_t)(theta_s - mu_t)``, and
    ``J(x; mu_t)``."""
    jacobian = mlp.jacobian(mean, x)
    return mlp.forward(mean, x) + jacobian @ (theta - mean), jacobian


def oggn_pseudo_data(mlp: ReferenceMLP, x: Tensor, mean: Tensor,
                     theta: Tensor) -> tuple[Tensor, Tensor]:
    """OGGN (eq. 4.11-4.12, Table 4.2 row 3): ``f(x; mu_t)`` and ``J(x; mu_t)``; the draw is
    not used (``S = 1``, the mean in place of samples)."""
    return mlp.forward(mean, x), mlp.jacobian(mean, x)


REFERENCE_RULES: dict[str, PseudoDataRule] = {
    "voggn": voggn_pseudo_data, "lgva": lgva_pseudo_data, "oggn": oggn_pseudo_data}


def mutant_jacobian_at_mean_function_at_draw(mlp: ReferenceMLP, x: Tensor, mean: Tensor,
                                             theta: Tensor) -> tuple[Tensor, Tensor]:
    """``f(x; theta_s)`` with ``J(x; mu_t)``: VOGGN with ``J`` at the mean, LGVA with ``f``
    at the draw instead of linearised, OGGN with ``f`` at the draw."""
    return mlp.forward(theta, x), mlp.jacobian(mean, x)


def mutant_jacobian_at_draw_function_at_mean(mlp: ReferenceMLP, x: Tensor, mean: Tensor,
                                             theta: Tensor) -> tuple[Tensor, Tensor]:
    """``f(x; mu_t)`` with ``J(x; theta_s)``: VOGGN with ``f`` at the mean, OGGN with ``J``
    at the draw."""
    return mlp.forward(mean, x), mlp.jacobian(theta, x)


def mutant_linearised_with_jacobian_at_draw(mlp: ReferenceMLP, x: Tensor, mean: Tensor,
                                            theta: Tensor) -> tuple[Tensor, Tensor]:
    """LGVA's linearised ``f`` with ``J(x; theta_s)`` in the gradient and curvature."""
    return lgva_pseudo_data(mlp, x, mean, theta)[0], mlp.jacobian(theta, x)


def reference_step(rule: PseudoDataRule, mlp: ReferenceMLP, likelihood: ReferenceLikelihood,
                   x: Tensor, y: Tensor, mean: Tensor, precision: Tensor, draws: Tensor,
                   step_size: float, prior_precision: float) -> tuple[Tensor, Tensor]:
    """``(mu_{t+1}, Sigma_{t+1}^-1)`` after one step from ``N(mu_t, precision^-1)`` with the
    draws ``theta_1..theta_S`` (rows of ``draws``; OGGN: one row, unused), step ``gamma`` and the
    prior ``N(0, delta^-1 I)``:

    * ``nabla_mu E[log p(D | theta)] ~ 1/S sum_s sum_i J-hat_s(x_i)^T r(y_i, f-hat_s(x_i))``
      (eq. 4.4, 4.5 with 4.7 / 4.9 / 4.11);
    * ``nabla_Sigma E[log p(D | theta)] ~ -1/(2S) sum_s sum_i J-hat_s^T Lambda(f-hat_s)
      J-hat_s`` (eq. 4.4, 4.6 with 4.8 / 4.10 / 4.12);
    * ``eta2_{t+1} = (1 - gamma) eta2_t + gamma (-1/2 Sigma_0^-1) + gamma nabla_Sigma E``
      (eq. 4.3);
    * ``eta1_{t+1} = (1 - gamma) Sigma_t^-1 mu_t + gamma Sigma_0^-1 mu_0
      + gamma (nabla_mu E - 2 nabla_Sigma E mu_t)`` (eq. 4.2);
    * ``Sigma_{t+1}^-1 = -2 eta2_{t+1}``, ``mu_{t+1} = Sigma_{t+1} eta1_{t+1}`` (eq. 4.1).
    """
    n_draws, n_params = draws.shape
    grad_mean = torch.zeros(n_params, dtype=mean.dtype)
    grad_covariance = torch.zeros(n_params, n_params, dtype=mean.dtype)
    for theta in draws:
        f_hat, j_hat = rule(mlp, x, mean, theta)
        weights = likelihood.output_precision(f_hat, y)
        grad_mean += j_hat.T @ likelihood.residual(f_hat, y) / n_draws
        grad_covariance += -0.5 * j_hat.T @ (weights[:, None] * j_hat) / n_draws
    prior_inverse_covariance = prior_precision * torch.eye(n_params, dtype=mean.dtype)
    prior_mean = torch.zeros(n_params, dtype=mean.dtype)
    eta2 = ((1 - step_size) * (-0.5 * precision) + step_size * (-0.5 * prior_inverse_covariance)
            + step_size * grad_covariance)
    eta1 = ((1 - step_size) * precision @ mean + step_size * prior_inverse_covariance @ prior_mean
            + step_size * (grad_mean - 2 * grad_covariance @ mean))
    new_precision = -2 * eta2
    return torch.linalg.solve(new_precision, eta1), new_precision
