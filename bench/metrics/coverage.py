"""Credible intervals for the mean function and their empirical coverage (Experiment 2).

Section 4.2: for each test input ``x*`` the 95% interval for ``f_theta(x*)`` is checked for
containing the true mean function ``f_theta0(x*)``; coverage is the fraction of test inputs
covered (then averaged over replications by the caller).

* The Laplace interval is the central interval of the *function-space* distribution
  ``N(f_theta-hat(x*), g^T Sigma g)`` (Appendix D: "the credible interval of f_theta(x)"),
  without the observation noise ``sigma0^2`` of eq. (1), which would widen an interval for
  ``y*``, not for the mean; Split and Ensemble give intervals for the mean, too.
* Classification: ``f`` is the logit and the interval is taken on the logit scale. Because
  ``sigmoid`` is increasing, ``[sigmoid(lo), sigmoid(hi)]`` covers ``sigmoid(f_theta0)`` exactly
  when ``[lo, hi]`` covers ``f_theta0``, and the Split min/max and Ensemble quantiles commute
  with it too, so the coverage is the same on the probability scale.
"""

from __future__ import annotations

from torch import Tensor

from bench.predictive.densities import Gaussian


def gaussian_interval(mean: Tensor, variance: Tensor, level: float = 0.95):
    """Central ``level`` interval ``(lower, upper)`` of ``N(mean, variance)`` per point."""
    predictive = Gaussian(mean, variance)
    tail = (1 - level) / 2
    return predictive.quantile(tail), predictive.quantile(1 - tail)


def empirical_coverage(lower: Tensor, upper: Tensor, truth: Tensor) -> float:
    """Fraction of points with ``lower <= truth <= upper``."""
    return float(((lower <= truth) & (truth <= upper)).double().mean())
