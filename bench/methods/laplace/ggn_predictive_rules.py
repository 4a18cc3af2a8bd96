"""The predictives of a Gaussian posterior over a network by name (GGN thesis, Section 3.4):
what ``method.predictive`` selects, looked up once (:data:`GGN_PREDICTIVES`).

* ``nn`` (:class:`NetworkSampling`): the network at each parameter draw (eq. 3.14); a
  regression predictive takes the draws' mean and variance;
* ``glm`` (:class:`GLMSampling`): the network linearised at ``theta*`` at each draw (eq. 3.15);
  a regression predictive is the linearised function's closed-form Gaussian;
* ``blr`` (:class:`BLRClosedForm`): the closed-form Gaussian of the Bayesian linear regression
  the GLM defines, for a Gaussian likelihood only (``classifies`` is False).

A regression predictive adds the noise variance; a classifier averages ``s(f)`` over the
rule's function draws.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from bench.methods.laplace.ggn_laplace import GGNPredictive
from bench.predictive.densities import Gaussian

# Parameter draws evaluated at once (bounds the memory of NN sampling on many inputs).
DRAW_CHUNK = 100


class GGNPredictiveRule:
    """Function draws and the regression predictive of one predictive."""

    classifies: ClassVar[bool] = True

    def outputs(self, model: GGNPredictive, thetas: Tensor, x: Tensor) -> Tensor:
        """The function values ``[S, m]`` of parameter draws ``thetas`` ``[S, P]``."""
        raise NotImplementedError

    def function_draws(self, model: GGNPredictive, draws: Tensor, x: Tensor) -> Tensor:
        """:meth:`outputs` of every draw, :data:`DRAW_CHUNK` draws at a time, no gradients."""
        with torch.no_grad():
            return torch.cat([self.outputs(model, chunk, x) for chunk in draws.split(DRAW_CHUNK)])

    def regression(self, model: GGNPredictive, draws: Tensor, x: Tensor,
                   noise_variance: float) -> Gaussian:
        """The Gaussian over ``y`` at ``x``: the linearised function's closed form plus the
        noise variance (the draws are not read)."""
        mean, variance = model.glm_function_moments(x)
        return Gaussian(mean, variance + noise_variance)


class NetworkSampling(GGNPredictiveRule):
    """NN sampling: the network at each draw; regression by the draws' moments."""

    def outputs(self, model: GGNPredictive, thetas: Tensor, x: Tensor) -> Tensor:
        """``f(x; theta_s)``."""
        return model.network_outputs(thetas, x)

    def regression(self, model: GGNPredictive, draws: Tensor, x: Tensor,
                   noise_variance: float) -> Gaussian:
        """The draws' mean and variance, plus the noise variance."""
        values = self.function_draws(model, draws, x)
        return Gaussian(values.mean(0), values.var(0) + noise_variance)


class GLMSampling(GGNPredictiveRule):
    """GLM sampling: the linearised network at each draw; regression in closed form."""

    def outputs(self, model: GGNPredictive, thetas: Tensor, x: Tensor) -> Tensor:
        """``f(x; theta*) + J(x) (theta_s - theta*)``."""
        return model.linearised_outputs(thetas, x)


class BLRClosedForm(GLMSampling):
    """The Bayesian linear regression's closed-form Gaussian over ``y`` (regression only)."""

    classifies: ClassVar[bool] = False


GGN_PREDICTIVES: dict[str, GGNPredictiveRule] = {
    "glm": GLMSampling(), "nn": NetworkSampling(), "blr": BLRClosedForm()}
# The predictives that draw functions (``function_samples``' kinds).
FUNCTION_DRAWS = {name: GGN_PREDICTIVES[name] for name in ("nn", "glm")}
