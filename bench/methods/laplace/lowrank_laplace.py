"""Low-rank Laplace over all weights (Laplace Redux section 2 and Figure 8), as laplace-torch's
``LowRankLaplace`` computes it, with the eigenpairs from the GGN.

laplace-torch 0.3's ``LowRankLaplace`` holds ``H = (U, lambda)`` and forms the posterior
precision ``U diag(lambda) U^T + prior``; its predictive, sampling, log determinant and marginal
likelihood work on that pair through ``k x k`` algebra. Only its eigenpair source is missing
here: it asks the old ``asdfghjkl`` module for the top Hessian eigenpairs, and the installed
asdfghjkl 0.1a4 wheel provides only ``asdl``. :class:`GGNLowRankLaplace` keeps the library's
class and hands it the ``low_rank`` largest eigenpairs of the GGN from
:func:`bench.curvature.top_eigenpairs.top_ggn_eigenpairs` (the paper: "the entire Hessian or
GGN can also be approximated by a low-rank structure"; the library's default is the Hessian,
ours the GGN, the curvature every other structure of the grid uses).
"""

from __future__ import annotations

from typing import Any

import torch
from laplace.baselaplace import LowRankLaplace, ParametricLaplace
from laplace.curvature import CurvlinopsGGN
from torch import Tensor, nn
from torch.nn.utils import parameters_to_vector
from torch.utils.data import DataLoader

from bench.curvature.top_eigenpairs import top_ggn_eigenpairs
from bench.harness.rng import make_generator

DEFAULT_RANK = 10


def leading_batches(loader: DataLoader, n_points: int | None) -> tuple[list, float]:
    """The loader's batches up to the first ``n_points`` points (all when None) and the factor
    ``N / n`` that scales a sum over them to an estimate of the sum over all ``N`` points."""
    batches, seen, total = [], 0, len(loader.dataset)
    for x, y in loader:
        if n_points is not None and seen >= n_points:
            break
        take = len(x) if n_points is None else min(len(x), n_points - seen)
        batches.append((x[:take], y[:take]))
        seen += take
    return batches, total / seen


class GGNEigenpairs(CurvlinopsGGN):
    """laplace-torch's curvlinops GGN backend (its Jacobians serve the GLM predictive) with the
    ``eig_lowrank`` that ``LowRankLaplace.fit`` calls: the ``low_rank`` largest GGN eigenpairs,
    the Lanczos start drawn from ``seed``. With ``data_size`` set, the GGN is summed over the
    first ``data_size`` training points (in loader order) and scaled by ``N / data_size`` (a
    cheaper estimate of the full sum, for laptop scales); None: every point."""

    def __init__(self, model: nn.Module, likelihood: Any, low_rank: int = DEFAULT_RANK,
                 seed: int = 0, data_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(model, likelihood, **kwargs)
        self.low_rank, self.seed, self.data_size = int(low_rank), int(seed), data_size

    def eig_lowrank(self, data_loader: DataLoader) -> tuple[Tensor, Tensor, Tensor]:
        """``(eigenvectors [P, k], factor * eigenvalues [k], factor * summed loss)``; the loss
        is summed over every point."""
        batches, scale = leading_batches(data_loader, self.data_size)
        values, vectors = top_ggn_eigenpairs(self.model, batches, self.low_rank,
                                             make_generator(self.seed))
        values = values * scale
        device = next(self.model.parameters()).device
        with torch.no_grad():
            loss = sum(self.lossfunc(self.model(x.to(device)), y.to(device))
                       for x, y in data_loader)
        return vectors.to(device), self.factor * values.to(device), self.factor * loss


class GGNLowRankLaplace(LowRankLaplace):
    """laplace-torch's ``LowRankLaplace`` on :class:`GGNEigenpairs` (module docstring);
    ``backend_kwargs`` take ``low_rank`` (k, default 10 as laplace-torch's), ``seed`` and
    ``data_size``."""

    def __init__(self, model: nn.Module, likelihood: Any, **kwargs: Any) -> None:
        kwargs["backend"] = GGNEigenpairs
        # LowRankLaplace.__init__ only checks for the asdfghjkl module, then does this.
        ParametricLaplace.__init__(self, model, likelihood, **kwargs)

    def fit(self, train_loader: DataLoader, override: bool = True,
            progress_bar: bool = False) -> None:
        """The library's fit, with the mean over the posterior's parameters (``self.params``,
        the trainable ones) as every other structure takes it: laplace-torch 0.3's low-rank
        fit takes every parameter, so with frozen ones (the WRN's BatchNorm under
        ``frozen_batchnorm``) its mean outgrows its precision and the marglik fails."""
        super().fit(train_loader, override=override, progress_bar=progress_bar)
        mean = parameters_to_vector(self.params)
        self.mean = mean if self.enable_backprop else mean.detach()
