"""The subnetwork selectors as masks with laplace-torch 0.3's ``SubnetMask`` interface.

Each mask selects which parameters of ``model`` (indices into
``torch.nn.utils.parameters_to_vector(model.parameters())``) keep their Laplace covariance:
``compute_param_scores(train_loader)``, ``get_subnet_mask(train_loader)`` (a boolean vector)
and ``select(train_loader)`` (the sorted indices, also kept as ``indices``), as
``laplace.utils.subnetmask`` defines them, so the indices drive ``laplace.SubnetLaplace``
(``subnetwork_indices=mask.select(train_loader)``) for networks of any size. On top of it,
``ranking(train_loader)`` gives the first ``n_params_subnet`` indices *in selection order*:
every selector here picks nested subsets, so ``ranking[:k]`` is the subnetwork of size ``k``
for every ``k`` up to ``n_params_subnet`` -- the fast path the subnetwork tasks use for a
whole grid of ``k`` from one ranking.

What a mask ranks by comes from the caller when it already has it, else from the model and
the loader: ``precision`` is the full Laplace precision ``Omega`` (our linearised Laplace
passes it; otherwise laplace-torch's full-GGN ``Laplace`` over all weights is fitted on the
loader with ``likelihood``, ``sigma_noise`` and ``prior_precision``), ``jacobians`` maps inputs
``[n, d]`` to the rows ``d f / d theta`` ``[n, p]`` of a single-output model (otherwise autograd
through ``model``). The ranking rules are :mod:`bench.methods.laplace.subset_selection`'s.

The masks implement the interface rather than subclass laplace-torch's classes: importing
``laplace`` takes seconds (and warns about ``torch.jit``) in every process that selects a
subset, so it is imported only where a precision has to be fitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from bench.curvature.jacobians import output_jacobians
from bench.harness.errors import ConfigError, require_choice
from bench.methods.laplace import subset_selection as selection

LIKELIHOODS = ("regression", "classification")


class PrecisionPart:
    """Which part of the Laplace precision ``Omega`` a ranking reads, and the laplace-torch
    ``hessian_structure`` that fits just that part."""

    hessian_structure: ClassVar[str]

    def of(self, precision: Tensor) -> Tensor:
        """This part of a full precision matrix."""
        raise NotImplementedError


class FullPrecision(PrecisionPart):
    """The whole matrix ``Omega``."""

    hessian_structure = "full"

    def of(self, precision: Tensor) -> Tensor:
        """``precision`` itself."""
        return precision


class PrecisionDiagonal(PrecisionPart):
    """The diagonal of ``Omega``."""

    hessian_structure = "diag"

    def of(self, precision: Tensor) -> Tensor:
        """The diagonal of ``precision``."""
        return precision.diagonal()


def loader_inputs(train_loader: DataLoader) -> Tensor:
    """The inputs of every batch (first element of each), concatenated in order."""
    return torch.cat([batch[0] for batch in train_loader])


class SubnetworkMask:
    """laplace-torch's ``SubnetMask`` interface plus :meth:`ranking` (see the module)."""

    # Whether n_params_subnet sets the size (False: the subnetwork is fixed by the model).
    sized: ClassVar[bool] = True

    def __init__(self, model: nn.Module, n_params_subnet: int | None = None, *,
                 precision: Tensor | None = None,
                 jacobians: Callable[[Tensor], Tensor] | None = None,
                 likelihood: str = "regression", sigma_noise: float = 1.0,
                 prior_precision: float = 1.0) -> None:
        self.model = model
        self.parameter_vector = nn.utils.parameters_to_vector(model.parameters()).detach()
        self._n_params = len(self.parameter_vector)
        if self.sized and (n_params_subnet is None or not 1 <= n_params_subnet <= self._n_params):
            raise ConfigError(f"n_params_subnet={n_params_subnet!r} must lie in "
                              f"1..{self._n_params} (the model's parameter count)")
        self._n_params_subnet = n_params_subnet if self.sized else None
        self.precision, self.jacobians = precision, jacobians
        self.likelihood = require_choice("likelihood", likelihood, LIKELIHOODS)
        self.sigma_noise, self.prior_precision = sigma_noise, prior_precision
        self._indices: Tensor | None = None

    @property
    def indices(self) -> Tensor:
        """The selected indices (after :meth:`select`)."""
        if self._indices is None:
            raise AttributeError("Subnetwork mask not selected. Run select() first.")
        return self._indices

    @property
    def n_params_subnet(self) -> int:
        """Size of the subnetwork."""
        if self._n_params_subnet is None:
            self._n_params_subnet = len(self.indices)
        return self._n_params_subnet

    def ranking(self, train_loader: DataLoader | None = None) -> Tensor:
        """The first ``n_params_subnet`` indices in the order the rule selects them."""
        raise NotImplementedError

    def compute_param_scores(self, train_loader: DataLoader | None = None) -> Tensor:
        """Scores per parameter, higher first: ``n_params_subnet - position`` for the ranked
        parameters, ``-inf`` for the others."""
        ranking = self.ranking(train_loader)
        scores = torch.full_like(self.parameter_vector, -torch.inf)
        scores[ranking] = torch.arange(len(ranking), 0, -1, dtype=scores.dtype)
        return scores

    def get_subnet_mask(self, train_loader: DataLoader | None = None) -> Tensor:
        """Boolean vector over the parameters, True on the subnetwork."""
        mask = torch.zeros(self._n_params, dtype=torch.bool)
        mask[self.ranking(train_loader)] = True
        return mask

    def select(self, train_loader: DataLoader | None = None) -> Tensor:
        """The subnetwork's indices in increasing order (laplace-torch's convention)."""
        if self._indices is not None:
            raise ValueError("Subnetwork mask already selected.")
        self._indices = self.get_subnet_mask(train_loader).nonzero(as_tuple=True)[0]
        return self._indices

    def _omega(self, train_loader: DataLoader | None, part: PrecisionPart) -> Tensor:
        """``part`` of ``Omega``: of the given precision, else of laplace-torch's fit of that
        part on ``train_loader``."""
        if self.precision is not None:
            return part.of(self.precision)
        if train_loader is None:
            raise ValueError(f"{type(self).__name__} needs the precision or a train_loader")
        from laplace import Laplace

        laplace = Laplace(self.model, self.likelihood, subset_of_weights="all",
                          hessian_structure=part.hessian_structure, sigma_noise=self.sigma_noise,
                          prior_precision=self.prior_precision)
        laplace.fit(train_loader)
        return laplace.posterior_precision.detach()

    def _reference_jacobians(self, train_loader: DataLoader | None) -> Tensor:
        if train_loader is None:
            raise ValueError(f"{type(self).__name__} needs a loader of reference inputs")
        x = loader_inputs(train_loader)
        if self.jacobians is not None:
            return self.jacobians(x)
        return output_jacobians(self.model, x.to(self.parameter_vector))


class GreedySubnetMask(SubnetworkMask):
    """Greedy-Laplace (Algorithm 1): the smallest diagonal entry of the marginal precision of
    the not-yet-selected parameters, step by step (rank-one Schur downdates)."""

    def ranking(self, train_loader: DataLoader | None = None) -> Tensor:
        """Algorithm 1's selection order."""
        omega = self._omega(train_loader, FullPrecision())
        return selection.greedy_subnet_indices(omega, self.n_params_subnet)


class GradientSubnetMask(SubnetworkMask):
    """Gradient-Laplace (Algorithm 2): the largest ``mean |d f / d theta|`` over the loader's
    inputs (the reference set: training or test inputs)."""

    def ranking(self, train_loader: DataLoader | None = None) -> Tensor:
        """Parameters by decreasing mean absolute gradient."""
        jacobians = self._reference_jacobians(train_loader)
        return selection.gradient_subnet_indices(jacobians, self.n_params_subnet)


class DiagonalSubnetMask(SubnetworkMask):
    """Subnet diagonal: the smallest diagonal entries of ``Omega``, i.e. the largest variances
    of a diagonal Laplace (laplace-torch's ``LargestVarianceDiagLaplaceSubnetMask``)."""

    def ranking(self, train_loader: DataLoader | None = None) -> Tensor:
        """Parameters by increasing ``Omega_ii``."""
        diagonal = self._omega(train_loader, PrecisionDiagonal())
        return selection.smallest_diagonal_indices(diagonal, self.n_params_subnet)


class LastKSubnetMask(SubnetworkMask):
    """Last k (Appendix B): the last ``k`` parameters, layers ordered input to output."""

    def ranking(self, train_loader: DataLoader | None = None) -> Tensor:
        """From the last parameter backwards."""
        p = self._n_params
        return torch.arange(p - 1, p - 1 - self.n_params_subnet, -1)


class NeuralLinearSubnetMask(SubnetworkMask):
    """NeuralLinear (Appendix B): every parameter of the last layer (the last module that has
    parameters; its size fixes the subnetwork, ``n_params_subnet`` is not used)."""

    sized = False

    def ranking(self, train_loader: DataLoader | None = None) -> Tensor:
        """The last layer's indices in increasing order."""
        modules = [m for m in self.model.modules()
                   if not list(m.children()) and list(m.parameters(recurse=False))]
        if not modules:
            raise ValueError("the model has no parameters")
        n_last = sum(p.numel() for p in modules[-1].parameters())
        return torch.arange(self._n_params - n_last, self._n_params)
