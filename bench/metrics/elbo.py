"""The evidence lower bound of a Gaussian q over a single-output network's flat parameters
(GGN thesis, eq. 2.14), one definition for every variational fit and its oracle.

Model: ``y_i ~ p(y_i | f(x_i; theta))`` (:mod:`bench.models.glm_likelihoods`: Gaussian with a
known ``sigma^2`` or Bernoulli with logit ``f``), prior ``theta ~ N(0, delta^-1 I)``, the
network's forward :meth:`bench.models.mlp.MLPShape.forward_1d`.

``ELBO(q) = E_q[sum_i log p(y_i | f(x_i; theta))] - KL(q || N(0, delta^-1 I))``:

* the expected log likelihood by Monte Carlo, ``1/S sum_s l(theta_s)`` over ``S`` draws of q
  from an explicit ``torch.Generator``, with standard error ``sd_s(l(theta_s)) / sqrt(S)``
  (the draws are independent, so this is the estimate's standard error; the KL adds none);
* the KL in closed form, ``1/2 [delta (tr Sigma + |m|^2) - P - P log delta - log det Sigma]``.

The likelihood term is always estimated, never taken in closed form, so the one definition
serves nonlinear networks (where no closed form exists) and the linear known answers alike.

A q is anything with ``mean`` ``[P]``, ``sample(n, generator)`` ``[n, P]``,
``log_det_covariance()`` and ``covariance_trace()`` (:class:`GaussianQ`): the VOGGN, LGVA and
OGGN states and the Laplace-GGN posterior (:class:`~bench.methods.laplace.ggn_laplace.
GaussianPosterior`, precision form) and the reference VI's guides
(:class:`~bench.methods.variational.covariance_gaussian.CovarianceGaussian`, covariance form).
Everything is computed in the dtype of q's mean (float64 in the GGN experiments).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor
from torch.func import vmap

from bench.harness.errors import ConfigError, require_int_at_least, require_positive
from bench.harness.rng import make_generator
from bench.models.glm_likelihoods import Likelihood
from bench.models.mlp import MLPShape

# Draws per batched forward pass: bounds the [batch, N] outputs and the activations kept.
FORWARD_BATCH = 256


@runtime_checkable
class GaussianQ(Protocol):
    """A Gaussian over the flat parameters, in whatever form it is stored."""

    mean: Tensor

    def sample(self, n: int, generator: torch.Generator) -> Tensor:
        """``n`` draws ``[n, P]`` from ``generator``."""

    def log_det_covariance(self) -> float:
        """``log det Sigma``."""

    def covariance_trace(self) -> float:
        """``tr Sigma``."""


@dataclass(frozen=True)
class ElboEstimate:
    """A Monte Carlo ELBO: ``elbo = expected_log_likelihood - kl``, ``standard_error`` the
    Monte Carlo standard error of ``expected_log_likelihood`` (hence of ``elbo``) from
    ``mc_samples`` draws."""

    elbo: float
    standard_error: float
    expected_log_likelihood: float
    kl: float
    mc_samples: int

    def as_dict(self) -> dict[str, float | int]:
        """The fields by name (for a record's ``fitted`` or a table row)."""
        return {"elbo": self.elbo, "elbo_standard_error": self.standard_error,
                "expected_log_likelihood": self.expected_log_likelihood, "kl": self.kl,
                "elbo_mc_samples": self.mc_samples}


def kl_to_isotropic_prior(q: GaussianQ, prior_precision: float) -> float:
    """``KL(q || N(0, delta^-1 I))`` in closed form:
    ``1/2 [delta (tr Sigma + |m|^2) - P - P log delta - log det Sigma]``."""
    delta = float(require_positive("prior_precision", prior_precision))
    p = int(q.mean.shape[0])
    return 0.5 * (delta * (q.covariance_trace() + float(q.mean @ q.mean)) - p
                  - p * math.log(delta) - q.log_det_covariance())


def log_likelihoods(network: MLPShape, thetas: Tensor, x: Tensor, y: Tensor,
                    likelihood: Likelihood) -> Tensor:
    """``sum_i log p(y_i | f(x_i; theta_s))`` per draw ``[S]`` for draws ``[S, P]``, the
    network evaluated :data:`FORWARD_BATCH` draws at a time."""
    forward = vmap(network.forward_1d, in_dims=(0, None))
    with torch.no_grad():
        return torch.cat([likelihood.log_prob(forward(batch, x), y).sum(1)
                          for batch in thetas.split(FORWARD_BATCH)])


def elbo_draws(network: MLPShape, x: Tensor, y: Tensor, likelihood: Likelihood,
               prior_precision: float, q: GaussianQ, *, mc_samples: int,
               generator: torch.Generator,
               samples_key: str = "elbo.mc_samples") -> tuple[Tensor, float]:
    """The per-draw log likelihoods ``l(theta_s)`` ``[S]`` of ``mc_samples`` draws of ``q``
    from ``generator`` and ``KL(q || prior)``: what :func:`gaussian_elbo` averages. Two q's
    scored with generators of the same seed share their standard normal draws (common random
    numbers), so their per-draw differences give a paired standard error of their ELBO
    difference (:class:`bench.training.elbo_plateau.ElboPlateauMonitor`).

    One-line ConfigErrors: fewer than 2 draws (no standard error; named ``samples_key``, the
    caller's config key), a q of another dimension than the network's, inputs and targets of
    different lengths, a non-positive ``delta``.
    """
    require_int_at_least(samples_key, mc_samples, 2, "the standard error needs at least 2 draws")
    if int(q.mean.shape[0]) != network.n_params:
        raise ConfigError(f"q is over {int(q.mean.shape[0])} parameters but the network "
                          f"{network.widths} has {network.n_params}")
    if x.shape[0] != y.shape[0]:
        raise ConfigError(f"{x.shape[0]} inputs but {y.shape[0]} targets")
    kl = kl_to_isotropic_prior(q, prior_precision)
    draws = log_likelihoods(network, q.sample(mc_samples, generator), x.to(q.mean.dtype),
                            y.to(q.mean.dtype), likelihood)
    return draws, kl


def gaussian_elbo(network: MLPShape, x: Tensor, y: Tensor, likelihood: Likelihood,
                  prior_precision: float, q: GaussianQ, *, mc_samples: int,
                  generator: torch.Generator,
                  samples_key: str = "elbo.mc_samples") -> ElboEstimate:
    """The ELBO of ``q`` (module docstring) with ``mc_samples`` draws from ``generator``
    (the errors of :func:`elbo_draws`)."""
    draws, kl = elbo_draws(network, x, y, likelihood, prior_precision, q,
                           mc_samples=mc_samples, generator=generator, samples_key=samples_key)
    expected = float(draws.mean())
    standard_error = float(draws.std(correction=1)) / math.sqrt(mc_samples)
    return ElboEstimate(expected - kl, standard_error, expected, kl, mc_samples)


def fitted_posterior_elbo(model, prior_precision: float, x: Tensor, y: Tensor, *,
                          mc_samples: int = 1000, seed: int = 0,
                          samples_key: str = "elbo.mc_samples") -> ElboEstimate:
    """The ELBO of a fitted GGN posterior (a
    :class:`~bench.methods.laplace.ggn_laplace.GGNPredictive`: its ``network``,
    ``posterior`` and ``likelihood``; any object with those members) on the training data
    ``(x, y)``, with ``mc_samples`` draws from ``make_generator(seed)`` (a bad count is an
    error naming ``samples_key``): what a report calls for a record's q."""
    return gaussian_elbo(model.network, x, y, model.likelihood, prior_precision,
                         model.posterior, mc_samples=mc_samples, generator=make_generator(seed),
                         samples_key=samples_key)
