"""The pseudo-data rules of the GGN natural-gradient algorithms by name (GGN thesis, Table
4.2): what ``method.algorithm`` selects, looked up once (:func:`pseudo_data_rule`).

Each rule maps the variational Gaussian ``N(mu_t, Sigma_t)`` to ``f-hat`` ``[S, N]`` and
``J-hat`` ``[S, N, P]``:

* ``voggn`` (:class:`SampledNetwork`): ``theta_s ~ N(mu_t, Sigma_t)``; the network and its
  Jacobian at each draw;
* ``lgva`` (:class:`LinearisedSamples`): the same draws through the network linearised at
  ``mu_t``;
* ``oggn`` (:class:`MeanOnly`): no draw (``S = 1``); the network and its Jacobian at ``mu_t``.

``averaged`` says whether the stopping rule averages the window (the sampling rules, whose
gradient is a Monte Carlo estimate) or checks every iterate (OGGN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor
from torch.func import vmap

from bench.harness.errors import require_choice
from bench.models.mlp import MLPShape

if TYPE_CHECKING:
    from bench.methods.variational.ggn_natural_gradient import NaturalGradientState


class PseudoDataRule:
    """How one algorithm forms its pseudo-data from the current state."""

    averaged: ClassVar[bool] = True

    def __call__(self, network: MLPShape, state: NaturalGradientState, x: Tensor,
                 mc_samples: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``f-hat`` ``[S, N]`` and ``J-hat`` ``[S, N, P]`` at ``state`` on inputs ``x``."""
        raise NotImplementedError


class SampledNetwork(PseudoDataRule):
    """VOGGN: the network and its Jacobian at ``mc_samples`` posterior draws."""

    def __call__(self, network: MLPShape, state: NaturalGradientState, x: Tensor,
                 mc_samples: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Draws ``theta_s``; ``f(x; theta_s)`` and ``J(x; theta_s)``."""
        thetas = state.posterior.sample(mc_samples, generator)
        f_hat = vmap(network.forward_1d, in_dims=(0, None))(thetas, x)
        return f_hat, torch.stack([network.jacobian(theta, x) for theta in thetas])


class LinearisedSamples(PseudoDataRule):
    """LGVA: ``mc_samples`` posterior draws through the network linearised at the mean."""

    def __call__(self, network: MLPShape, state: NaturalGradientState, x: Tensor,
                 mc_samples: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``f(x; mu) + J(x; mu)(theta_s - mu)`` and ``J(x; mu)`` for each draw."""
        mean = state.mean
        f_mean, jacobian = network.forward_1d(mean, x), network.jacobian(mean, x)
        thetas = state.posterior.sample(mc_samples, generator)
        return f_mean + (thetas - mean) @ jacobian.T, jacobian.expand(mc_samples, -1, -1)


class MeanOnly(PseudoDataRule):
    """OGGN: the network and its Jacobian at the mean, nothing drawn (``S = 1``)."""

    averaged: ClassVar[bool] = False

    def __call__(self, network: MLPShape, state: NaturalGradientState, x: Tensor,
                 mc_samples: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``f(x; mu)`` and ``J(x; mu)`` with a leading axis of one."""
        mean = state.mean
        return (network.forward_1d(mean, x).unsqueeze(0),
                network.jacobian(mean, x).unsqueeze(0))


PSEUDO_DATA_RULES: dict[str, PseudoDataRule] = {
    "voggn": SampledNetwork(), "lgva": LinearisedSamples(), "oggn": MeanOnly()}


def pseudo_data_rule(algorithm: str) -> PseudoDataRule:
    """The rule of ``algorithm`` (a one-line ConfigError naming ``method.algorithm`` and the
    choices for any other name)."""
    return PSEUDO_DATA_RULES[require_choice("method.algorithm", algorithm, PSEUDO_DATA_RULES)]
