"""Self-Supervised Laplace (SSLA, eq. 12 / Algorithm 1) and its approximation ASSLA (Algorithm 2).

Both are written against :class:`bench.models.parametric.LaplaceModel` only. Settings that
the paper's text and the authors' code disagree on are explicit arguments:

* ``objective``: fit theta-hat / theta-tilde by maximum likelihood (``"mle"``, the authors'
  conjugate code) or by MAP (``"map"``, Algorithm 1).
* ``curvature_includes_prior``: J is the likelihood's observed information (code, Tables 7/8)
  or that plus the prior's (Algorithm 1 lines 6-7).
* ``refit`` (a :class:`ConjugateRefit`): :class:`CandidateRefit` refits on D plus (x, y) for
  every candidate y (eq. 12 at each y, what the authors' code does; exact for linear-Gaussian
  models with a MAP refit and posterior curvature); :class:`SelfPredictionRefit` is the
  literal Algorithm 1 (one refit on D plus (x, y-hat), then log p(y | x, theta-tilde)).
* ``increment`` (a :class:`LikelihoodIncrement`): ASSLA's likelihood increment as the
  difference of two aggregated log-likelihoods (:class:`AggregateLikelihoodIncrement`, the
  paper's float32 computation behind Table 1) or the point log-likelihood directly
  (:class:`DirectLikelihoodIncrement`).

The config names a refit and an increment by the names of :data:`CONJUGATE_REFITS` and
:data:`LIKELIHOOD_INCREMENTS` (``method.refit: candidate``, ``method.increment: aggregate``);
:func:`conjugate_refit` and :func:`likelihood_increment` turn a name into its strategy once, at
the method's construction, so the numerics below never compare strings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from bench.curvature.linalg import logdet_spd
from bench.harness.errors import require_choice
from bench.models.parametric import Data, LaplaceModel

OBJECTIVES = ("mle", "map")


@dataclass
class LogPPD:
    """Approximate log posterior predictive at candidate values, with its components."""

    values: Tensor
    theta_hat: Tensor
    parts: dict[str, Tensor] = field(default_factory=dict)


def curvature(model: LaplaceModel, theta: Tensor, data: Data, include_prior: bool) -> Tensor:
    """J(theta) on ``data``: observed information, plus the prior's if ``include_prior``."""
    info = model.information(theta, data)
    return info + model.prior_precision(theta) if include_prior else info


# SSLA's log-PPD increment at one candidate: (theta-tilde, augmented data, y) -> value.
Increments = Callable[[Tensor, Data, Tensor], Tensor]


class ConjugateRefit:
    """Where SSLA refits theta-tilde: the log-PPD increments at every candidate y."""

    name: ClassVar[str]

    def values(self, model: LaplaceModel, data: Data, x_new: Tensor | None,
               y_candidates: Tensor, theta_hat: Tensor, objective: str,
               increments: Increments) -> Tensor:
        """``increments`` at each candidate, with theta-tilde refitted by this rule."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class CandidateRefit(ConjugateRefit):
    """A refit on D + (x, y) for every candidate y (eq. 12 at each y; the authors' code)."""

    name = "candidate"

    def values(self, model: LaplaceModel, data: Data, x_new: Tensor | None,
               y_candidates: Tensor, theta_hat: Tensor, objective: str,
               increments: Increments) -> Tensor:
        """One refit per candidate."""
        values = []
        for y in y_candidates:
            augmented = data.with_point(x_new, y)
            values.append(increments(model.fit(augmented, objective), augmented, y))
        return torch.stack(values)


class SelfPredictionRefit(ConjugateRefit):
    """The literal Algorithm 1: one refit on D + (x, y-hat), every candidate scored there."""

    name = "self_prediction"

    def values(self, model: LaplaceModel, data: Data, x_new: Tensor | None,
               y_candidates: Tensor, theta_hat: Tensor, objective: str,
               increments: Increments) -> Tensor:
        """One refit at the self-prediction y-hat."""
        y_hat = model.predict_point(theta_hat, x_new)
        augmented = data.with_point(x_new, y_hat)
        theta_tilde = model.fit(augmented, objective)
        return torch.stack([increments(theta_tilde, augmented, y) for y in y_candidates])


class LikelihoodIncrement:
    """ASSLA's likelihood increment log p(y | x, theta-hat) of one candidate."""

    name: ClassVar[str]

    def __call__(self, model: LaplaceModel, theta_hat: Tensor, data: Data, log_lik_hat: Tensor,
                 x_new: Tensor | None, y: Tensor) -> Tensor:
        """The increment at candidate ``y`` (``log_lik_hat``: the log-likelihood of ``data``
        at ``theta_hat``)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AggregateLikelihoodIncrement(LikelihoodIncrement):
    """The difference of the aggregated log-likelihoods of D + (x, y) and D (the paper's
    computation; cancels catastrophically in float32 for large n, SSLA Table 1)."""

    name = "aggregate"

    def __call__(self, model: LaplaceModel, theta_hat: Tensor, data: Data, log_lik_hat: Tensor,
                 x_new: Tensor | None, y: Tensor) -> Tensor:
        """``log p(D + (x, y)) - log p(D)`` at theta-hat."""
        return model.log_likelihood(theta_hat, data.with_point(x_new, y)) - log_lik_hat


class DirectLikelihoodIncrement(LikelihoodIncrement):
    """The point log-likelihood log p(y | x, theta-hat) itself."""

    name = "direct"

    def __call__(self, model: LaplaceModel, theta_hat: Tensor, data: Data, log_lik_hat: Tensor,
                 x_new: Tensor | None, y: Tensor) -> Tensor:
        """``log p(y | x, theta-hat)``."""
        return model.log_likelihood(theta_hat, data.point(x_new, y))


CONJUGATE_REFITS: dict[str, type[ConjugateRefit]] = {
    rule.name: rule for rule in (CandidateRefit, SelfPredictionRefit)}
LIKELIHOOD_INCREMENTS: dict[str, type[LikelihoodIncrement]] = {
    rule.name: rule for rule in (AggregateLikelihoodIncrement, DirectLikelihoodIncrement)}


def conjugate_refit(choice: str | ConjugateRefit) -> ConjugateRefit:
    """The refit named ``choice`` (one of :data:`CONJUGATE_REFITS`; a one-line ConfigError
    listing them otherwise), or ``choice`` itself when it is already a refit."""
    if isinstance(choice, ConjugateRefit):
        return choice
    return CONJUGATE_REFITS[require_choice("method.refit", choice, CONJUGATE_REFITS)]()


def likelihood_increment(choice: str | LikelihoodIncrement) -> LikelihoodIncrement:
    """The increment named ``choice`` (one of :data:`LIKELIHOOD_INCREMENTS`; a one-line
    ConfigError listing them otherwise), or ``choice`` itself when it is already one."""
    if isinstance(choice, LikelihoodIncrement):
        return choice
    return LIKELIHOOD_INCREMENTS[require_choice("method.increment", choice,
                                                LIKELIHOOD_INCREMENTS)]()


def fitted_theta(model: LaplaceModel, data: Data, objective: str,
                 theta_hat: Tensor | None) -> Tensor:
    """``theta_hat`` when given, else the model's fit to ``data`` by ``objective`` (checked
    against :data:`OBJECTIVES` either way, a one-line ConfigError otherwise)."""
    require_choice("method.fit_objective", objective, OBJECTIVES)
    return model.fit(data, objective) if theta_hat is None else theta_hat


def ssla_log_ppd(
    model: LaplaceModel,
    data: Data,
    x_new: Tensor | None,
    y_candidates: Tensor,
    *,
    objective: str = "mle",
    curvature_includes_prior: bool = False,
    refit: ConjugateRefit | None = None,
    theta_hat: Tensor | None = None,
) -> LogPPD:
    """SSLA log posterior predictive (eq. 12) at each candidate y, up to a constant
    (``refit``: :class:`CandidateRefit` when None)."""
    refit = CandidateRefit() if refit is None else refit
    theta_hat = fitted_theta(model, data, objective, theta_hat)
    log_lik_hat = model.log_likelihood(theta_hat, data)
    log_prior_hat = model.log_prior(theta_hat)
    half_logdet_hat = 0.5 * logdet_spd(
        curvature(model, theta_hat, data, curvature_includes_prior)
    )

    def increments(theta_tilde: Tensor, augmented: Data, y_eval: Tensor) -> Tensor:
        delta_lik = model.log_likelihood(theta_tilde, data) - log_lik_hat
        delta_prior = model.log_prior(theta_tilde) - log_prior_hat
        half_logdet_tilde = 0.5 * logdet_spd(
            curvature(model, theta_tilde, augmented, curvature_includes_prior)
        )
        point = model.log_likelihood(theta_tilde, data.point(x_new, y_eval))
        return delta_lik + point + delta_prior - half_logdet_tilde + half_logdet_hat

    values = refit.values(model, data, x_new, y_candidates, theta_hat, objective, increments)
    parts = {
        "log_lik_hat": log_lik_hat,
        "log_prior_hat": log_prior_hat,
        "half_logdet_hat": half_logdet_hat,
    }
    return LogPPD(values=values, theta_hat=theta_hat, parts=parts)


def assla_log_ppd(
    model: LaplaceModel,
    data: Data,
    x_new: Tensor | None,
    y_candidates: Tensor,
    *,
    objective: str = "mle",
    curvature_includes_prior: bool = False,
    increment: LikelihoodIncrement | None = None,
    theta_hat: Tensor | None = None,
) -> LogPPD:
    """ASSLA log posterior predictive (Algorithm 2, eq. 14-15) at each candidate y.

    theta-tilde is replaced by theta-hat, the prior increment is dropped, and the curvature
    increment uses J(theta-hat) plus the candidate point's own information (which depends on
    y for e.g. the Poisson model, and cancels after normalisation when it does not).
    ``increment``: :class:`AggregateLikelihoodIncrement` when None.
    """
    increment = AggregateLikelihoodIncrement() if increment is None else increment
    theta_hat = fitted_theta(model, data, objective, theta_hat)
    curv_hat = curvature(model, theta_hat, data, curvature_includes_prior)
    half_logdet_hat = 0.5 * logdet_spd(curv_hat)
    log_lik_hat = model.log_likelihood(theta_hat, data)
    values, deltas, curvature_terms = [], [], []
    for y in y_candidates:
        delta = increment(model, theta_hat, data, log_lik_hat, x_new, y)
        curv_tilde = curv_hat + model.information(theta_hat, data.point(x_new, y))
        deltas.append(delta)
        curvature_terms.append(half_logdet_hat - 0.5 * logdet_spd(curv_tilde))
        values.append(delta + curvature_terms[-1])
    parts = {
        "log_lik_hat": log_lik_hat,
        "half_logdet_hat": half_logdet_hat,
        "likelihood_increment": torch.stack(deltas),
        "curvature_increment": torch.stack(curvature_terms),
    }
    return LogPPD(values=torch.stack(values), theta_hat=theta_hat, parts=parts)
