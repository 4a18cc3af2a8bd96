"""The Laplace evidence of online marginal-likelihood training: laplace-torch fits, and the
log marginal likelihood of a full-curvature Laplace approximation from one eigendecomposition.

:func:`laplace_evidence` is the ``evidence`` function
:func:`bench.methods.laplace.marglik_training.train_online_marglik` calls at every update epoch: it
fits laplace-torch's ``Laplace(network, "classification", subset_of_weights,
hessian_structure, backend=...)`` around the current weights and returns the negative log
marginal likelihood as a function of the prior precision, either laplace-torch's own
``log_marginal_likelihood`` (``log_det="exact"``: a log-determinant of the posterior precision
at every call, ``O(P^3)`` for the full structure) or :class:`EigenLogMarginalLikelihood`
(``log_det="eigen"``, full structure, scalar prior: one eigendecomposition per refit, then
``O(P)`` per call), as reproduction notes section 2 propose for the all-weights FULL row.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from bench.curvature.linalg import logdet_shifted
from bench.harness.errors import require_choice
from bench.methods.laplace.la_backends import backend_class
from bench.methods.laplace.marglik_training import Evidence, HyperObjective


def fit_laplace(network: nn.Module, loader: DataLoader, subset_of_weights: str,
                hessian_structure: str, backend: str, prior: Tensor | float,
                last_layer: str | None = None, temperature: float = 1.0):
    """laplace-torch's ``Laplace`` of ``network`` fitted on ``loader`` (the network itself, not
    a copy, for the all-weights classes), with prior precision ``prior`` (scalar or one per
    parameter tensor) and the named ``backend`` class; ``last_layer`` names the layer of a
    last-layer approximation. ``temperature`` < 1 scales the curvature and the log likelihood
    of a subset of the training set up by ``1 / temperature``."""
    from laplace import Laplace

    options = {"last_layer_name": last_layer} if subset_of_weights == "last_layer" else {}
    if isinstance(prior, Tensor):
        prior = prior.detach()
    la = Laplace(network, "classification", subset_of_weights=subset_of_weights,
                 hessian_structure=hessian_structure, prior_precision=prior,
                 temperature=temperature, backend=backend_class(backend), **options)
    la.fit(loader)
    return la


class EigenLogMarginalLikelihood:
    """laplace-torch's Laplace log marginal likelihood of a fitted full-curvature Laplace
    approximation ``la`` under a scalar prior ``delta``, from one eigendecomposition:

        ``log p(D) ~ log lik - 0.5 * (sum_i log(lambda_i + delta) - P log delta
                     + delta * ||theta - mu_0||^2)``

    with ``lambda_i`` the eigenvalues of the scaled curvature ``H / (sigma^2 T)`` (laplace's
    ``_H_factor * H``), ``P`` its size. Equal to ``la.log_marginal_likelihood(delta)``, whose
    log-determinant costs ``O(P^3)`` at every call; differentiable in ``delta``."""

    def __init__(self, la) -> None:
        curvature = (la._H_factor * la.H).detach()
        self.eigenvalues = torch.linalg.eigvalsh((curvature + curvature.mT) / 2)
        self.log_likelihood = la.log_likelihood.detach()
        offset = (la.mean - la.prior_mean).detach()
        self.square_norm = offset @ offset
        self.n_params = int(la.n_params)

    def __call__(self, prior_precision: Tensor) -> Tensor:
        """The log marginal likelihood at the scalar ``prior_precision``."""
        delta = prior_precision.reshape(())
        log_det_ratio = (logdet_shifted(self.eigenvalues, delta)
                         - self.n_params * torch.log(delta))
        return self.log_likelihood - 0.5 * (log_det_ratio + delta * self.square_norm)


# The log marginal likelihood of a fitted laplace-torch object by ``method.log_det``: its own
# (a log-determinant per call) or from one eigendecomposition.
LOG_MARGINAL_LIKELIHOODS: dict[str, Callable[..., Callable[[Tensor], Tensor]]] = {
    "exact": lambda la: la.log_marginal_likelihood, "eigen": EigenLogMarginalLikelihood}
LOG_DETS = tuple(LOG_MARGINAL_LIKELIHOODS)


def laplace_evidence(subset_of_weights: str, hessian_structure: str, backend: str,
                     log_det: str = "exact") -> Evidence:
    """The ``evidence`` function of online marginal-likelihood training for laplace-torch's
    ``(subset_of_weights, hessian_structure, backend)`` (module docstring)."""
    log_marginal_likelihood = LOG_MARGINAL_LIKELIHOODS[
        require_choice("method.log_det", log_det, LOG_DETS)]

    def evidence(network: nn.Module, loader: DataLoader, prior: Tensor, temperature: float,
                 last_layer: str) -> HyperObjective:
        la = fit_laplace(network, loader, subset_of_weights, hessian_structure, backend, prior,
                         last_layer, temperature)
        marglik = log_marginal_likelihood(la)
        return lambda precision: -marglik(precision)

    return evidence
