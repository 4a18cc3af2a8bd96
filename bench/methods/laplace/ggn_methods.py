"""Gaussian posteriors over a small tanh MLP (GGN thesis, Chapters 3-5) behind the method
contract: :class:`LaplaceGGN` (Adam MAP, then the Laplace-GGN) here and
:class:`bench.methods.variational.ggn_natural_gradient.NaturalGradientGGN` (VOGGN, LGVA,
OGGN), both on :class:`GGNPosteriorMethod`.

``fit(data, seed)`` starts from the network initialisation of ``seed`` (PyTorch's default
``nn.Linear`` init drawn from ``make_generator(seed)``), so every method fitted with the same
seed starts from the same mean (thesis Section 5.2), then draws ``n_predictive_samples``
parameter vectors from the posterior once (stream ``derived_seed([seed, 2])``): NN and GLM
sampling use the same draws. ``predict(x)`` returns the predictive named by ``predictive``
(``glm``, ``nn`` or ``blr``); :attr:`GGNPosteriorMethod.model` exposes all three.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.harness.rng import derived_seed, make_generator
from bench.harness.timing import Stopwatch
from bench.methods.laplace.ggn_laplace import (
    GGNPredictive,
    blr_mean,
    laplace_ggn_log_evidence,
    laplace_ggn_posterior,
)
from bench.methods.laplace.ggn_predictive_rules import (
    FUNCTION_DRAWS,
    GGN_PREDICTIVES,
    GGNPredictiveRule,
)
from bench.models.glm_likelihoods import BernoulliLikelihood, Likelihood, make_likelihood
from bench.models.mlp import MLPShape, init_parameters
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian
from bench.training.network_grid import GridFit, polish_network_grid, train_network_grid

PREDICTIVES = tuple(GGN_PREDICTIVES)
LR_SCHEDULES = ("none", "cosine")
# derived_seed([seed, stream]) streams of one job: Monte Carlo draws during fitting, then
# the predictive's parameter draws.
FIT_STREAM, DRAW_STREAM = 1, 2


@dataclass
class GGNPosteriorMethod:
    """What every Gaussian posterior over the network shares: the model (likelihood, prior
    precision ``delta``, noise variance, network widths) and the predictive settings."""

    name: str = "ggn_posterior"
    likelihood: str = "gaussian"
    prior_precision: float = 1.0
    noise_variance: float = 1.0
    hidden: tuple[int, ...] = (25, 25, 25, 25, 25)
    activation: str = "tanh"
    n_predictive_samples: int = 1000
    predictive: str = "glm"
    model: GGNPredictive | None = field(default=None, init=False, repr=False)
    draws: Tensor | None = field(default=None, init=False, repr=False)
    predictive_rule: GGNPredictiveRule = field(init=False, repr=False, compare=False)

    fits_on_base: ClassVar[bool] = False

    def __post_init__(self) -> None:
        self.hidden = tuple(int(width) for width in self.hidden)
        require_positive("method.prior_precision", self.prior_precision)
        require_positive("method.n_predictive_samples", self.n_predictive_samples)
        self.predictive_rule = GGN_PREDICTIVES[require_choice("method.predictive",
                                                              self.predictive, PREDICTIVES)]
        self.likelihood_model()
        if not self.predictive_rule.classifies and self.likelihood == "bernoulli":
            raise ConfigError("method.predictive='blr' gives a Gaussian over y; with "
                              "likelihood=bernoulli choose one of: glm, nn")

    def likelihood_model(self) -> Likelihood:
        """The likelihood object (one-line ConfigError for an unknown name)."""
        return make_likelihood(self.likelihood, self.noise_variance)

    def network(self, input_dim: int) -> MLPShape:
        """``input_dim -> hidden... -> 1`` with ``activation``."""
        return MLPShape((input_dim, *self.hidden, 1), self.activation)

    def initial_mean(self, network: MLPShape, seed: int) -> Tensor:
        """The shared initialisation of ``seed`` (float64)."""
        return init_parameters(network, make_generator(seed), torch.float64)

    def _finish(self, model: GGNPredictive, seed: int) -> None:
        self.model = model
        self.draws = model.posterior.sample(self.n_predictive_samples,
                                            make_generator(derived_seed([seed, DRAW_STREAM])))

    def function_samples(self, x: Tensor, kind: str) -> Tensor:
        """The predictive's function draws ``[S, m]``: ``nn`` (the network at each draw) or
        ``glm`` (the linearised network at each draw)."""
        rule = FUNCTION_DRAWS[require_choice("predictive", kind, FUNCTION_DRAWS)]
        if self.model is None:
            raise RuntimeError(f"{self.name}: fit before predicting")
        return rule.function_draws(self.model, self.draws, x)

    def predict(self, x: Tensor) -> Gaussian | Categorical:
        """Regression: a Gaussian over y (``glm`` / ``blr``: closed form, sigma^2 added;
        ``nn``: the moments of the draws' mixture). Classification: class probabilities, the
        mean of ``s(f)`` over the draws."""
        if self.model is None:
            raise RuntimeError(f"{self.name}: fit before predicting")
        if isinstance(self.model.likelihood, BernoulliLikelihood):
            draws = self.predictive_rule.function_draws(self.model, self.draws, x)
            p = torch.sigmoid(draws).mean(0)
            return Categorical(torch.stack([1 - p, p], dim=1))
        return self.predictive_rule.regression(self.model, self.draws, x,
                                               float(self.noise_variance))


@dataclass
class LaplaceGGN(GGNPosteriorMethod):
    """L-GGN: full-batch Adam MAP (``lr``, ``steps``, ``lr_schedule`` ``none`` or ``cosine``)
    from the shared initialisation, then the Laplace-GGN posterior
    ``N(theta*, (delta I + G(theta*))^-1)``. With ``polish_iterations > 0`` Adam's end point
    is polished by full-batch L-BFGS until the gradient norm of the negative log joint is at
    most ``polish_tolerance`` (:func:`bench.training.lbfgs_polish.polish_minimum`)."""

    name: str = "L-GGN"
    lr: float = 1e-3
    steps: int = 10000
    lr_schedule: str = "none"
    polish_iterations: int = 0
    polish_tolerance: float = 1e-6

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive("method.lr", self.lr)
        require_positive("method.steps", self.steps)
        require_choice("method.lr_schedule", self.lr_schedule, LR_SCHEDULES)
        if self.polish_iterations:
            require_positive("method.polish_iterations", self.polish_iterations)
            require_positive("method.polish_tolerance", self.polish_tolerance)

    def fit_grid(self, x: Tensor, y: Tensor, likelihood: Likelihood,
                 prior_precisions: list[float], seed: int,
                 desc: str = "L-GGN MAP") -> tuple[GridFit, dict[str, float]]:
        """One MAP network per prior precision, trained at once by full-batch Adam (``lr``,
        ``steps``, ``lr_schedule``) from the seed's shared initialisation, then polished by
        L-BFGS where ``polish_iterations > 0``: the fit and its seconds (``train_s``,
        ``polish_s``). One training for the posterior's own MAP and a model-selection
        grid."""
        network = self.network(int(x.shape[1]))
        precisions = torch.tensor(prior_precisions, dtype=torch.float64)
        watch = Stopwatch()
        fit = train_network_grid(network, x, y, likelihood, precisions,
                                 self.initial_mean(network, seed), lr=float(self.lr),
                                 steps=int(self.steps), schedule=self.lr_schedule, desc=desc)
        seconds = {"train_s": watch.elapsed()}
        if self.polish_iterations:
            watch = Stopwatch()
            fit = polish_network_grid(network, fit, x, y, likelihood, precisions,
                                      max_iterations=int(self.polish_iterations),
                                      gradient_tolerance=float(self.polish_tolerance))
            seconds["polish_s"] = watch.elapsed()
        return fit, seconds

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict[str, Any]:
        """Train the MAP (and polish it, :meth:`fit_grid`), build the posterior; diagnostics:
        the final norm of the gradient of the summed negative log joint (after the polish;
        before it as ``adam_gradient_norm``), the relative distance of eq. 3.12's BLR mean
        from ``theta*`` and the log evidence."""
        x, y = data.train_inputs, data.train_labels
        network = self.network(int(x.shape[1]))
        likelihood = self.likelihood_model()
        fit, _ = self.fit_grid(x, y, likelihood, [float(self.prior_precision)], seed)
        polished = {}
        if self.polish_iterations:
            adam = fit.adam_theta[0]
            polished = {"adam_gradient_norm": float(fit.adam_gradient_norm[0]),
                        "polish_iterations": fit.polish_iterations[0],
                        "polish_cap": int(self.polish_iterations),
                        "polish_theta_shift": float((fit.theta[0] - adam).norm()
                                                    / adam.norm())}
        theta, gradient_norm = fit.theta[0], float(fit.gradient_norm[0])
        model = laplace_ggn_posterior(network, theta, x, likelihood, float(self.prior_precision))
        with torch.no_grad():
            f = network.forward_1d(theta, x)
        jacobian = network.jacobian(theta, x)
        shift = (blr_mean(likelihood, f, y, jacobian, theta, model.posterior) - theta).norm()
        self._finish(model, seed)
        return {"gradient_norm": gradient_norm, **polished,
                "blr_mean_shift": float(shift / theta.norm()),
                "log_evidence": laplace_ggn_log_evidence(likelihood, f, y, jacobian, theta,
                                                         float(self.prior_precision)),
                "n_params": network.n_params}
