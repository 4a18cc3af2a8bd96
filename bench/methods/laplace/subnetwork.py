"""Subnetwork linearised Laplace (Raha, Khare, Patra) behind the method contract.

:class:`SubnetLaplaceMethod` forms the linearised Laplace precision ``Omega`` of a trained
network (the task's base: the working network at theta-hat) and replaces ``Omega^-1`` in the
predictive (eq. 1) by a surrogate: the full LLA covariance itself, PrecisionDiag, Block
Laplace, or the subnetwork covariance ``pinv([Omega_SS]^0)`` on the parameters ``S`` a mask of
:mod:`bench.methods.laplace.subnet_masks` selects (Greedy-, Gradient-Laplace, Subnet
diagonal, Last k, NeuralLinear). The masks select nested subsets, so every subnetwork size
of a grid comes from one ranking (:meth:`SubnetLaplaceMethod.function_predictives`). The
config's variants (``conf/method/subnet_laplace.yaml``) are the paper's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from bench.datasets.synthetic_networks import SyntheticDataset
from bench.harness.errors import ConfigError, require_choice
from bench.methods.laplace import linearised as lla
from bench.methods.laplace.subnet_masks import SubnetworkMask
from bench.models.mlp import MLPShape
from bench.predictive.densities import Gaussian
from bench.training.working_network import TrainedWorkingModel

COVARIANCES = tuple(lla.SURROGATE_COVARIANCES)


class TrainingReference:
    """A mask ranks by the points the network was fitted on, once, at fit."""

    def fit_ranking(self, rank: Callable[[Tensor], Tensor], x_fit: Tensor) -> Tensor | None:
        """The ranking by ``x_fit``."""
        return rank(x_fit)

    def ranking(self, fitted: Tensor | None, rank: Callable[[Tensor], Tensor], x: Tensor
                ) -> Tensor:
        """The ranking made at fit."""
        return fitted


class PredictedInputsReference:
    """A mask ranks by the inputs being predicted, at every prediction."""

    def fit_ranking(self, rank: Callable[[Tensor], Tensor], x_fit: Tensor) -> Tensor | None:
        """Nothing to rank yet."""
        return None

    def ranking(self, fitted: Tensor | None, rank: Callable[[Tensor], Tensor], x: Tensor
                ) -> Tensor:
        """The ranking by ``x``."""
        return rank(x)


RANKING_REFERENCES = {"train": TrainingReference(), "test": PredictedInputsReference()}
REFERENCES = tuple(RANKING_REFERENCES)


@dataclass
class SubnetLaplaceMethod:
    """Linearised Laplace of ``base`` with ``Omega^-1`` replaced by a surrogate covariance.

    ``mask`` (a mask class, e.g. ``GreedySubnetMask``; the config gives it with
    ``_partial_: true``) selects the subnetwork of ``n_params_subnet`` parameters (NeuralLinear:
    the last layer, whatever the size); without a mask, ``covariance`` is ``full`` (the LLA),
    ``precision_diag`` or ``block``. ``reference`` is the set of inputs a mask ranks by where
    it uses inputs (Gradient-Laplace): ``train``, the points the network was fitted on, or
    ``test``, the inputs being predicted (then the subnetwork depends on them). The prior
    variance and the noise variance sigma0^2 are the paper's (1 and 1).
    """

    name: str = "subnet_laplace"
    mask: Callable[..., SubnetworkMask] | None = None
    n_params_subnet: int | None = None
    covariance: str = "full"
    reference: str = "train"
    noise_variance: float = 1.0
    prior_variance: float = 1.0
    fits_on_base: ClassVar[bool] = True
    surrogate_covariance: Callable[[Tensor, MLPShape], lla.Covariance] = field(
        init=False, repr=False, compare=False)
    ranking_reference: TrainingReference | PredictedInputsReference = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.surrogate_covariance = lla.SURROGATE_COVARIANCES[
            require_choice("method.covariance", self.covariance, COVARIANCES)]
        self.ranking_reference = RANKING_REFERENCES[
            require_choice("method.reference", self.reference, REFERENCES)]
        if self.mask is not None and not self.is_lla_covariance:
            raise ConfigError(f"method.covariance={self.covariance!r} with a mask is not "
                              "valid; a mask's covariance is the subnetwork's (leave 'full')")

    @property
    def takes_subset_size(self) -> bool:
        """Whether ``n_params_subnet`` sets the subnetwork's size (a sized mask)."""
        mask_class = getattr(self.mask, "func", self.mask)
        return mask_class is not None and mask_class.sized

    @property
    def is_lla_covariance(self) -> bool:
        """Whether the covariance without a mask is the LLA's own ``Omega^-1``."""
        return self.surrogate_covariance is lla.SURROGATE_COVARIANCES["full"]

    @property
    def is_full_lla(self) -> bool:
        """Whether this is the full linearised Laplace (no surrogate)."""
        return self.mask is None and self.is_lla_covariance

    def fit(self, data: SyntheticDataset, seed: int,
            base: TrainedWorkingModel | None = None) -> dict:
        """Form ``Omega`` at ``base``'s theta-hat on the points it was fitted on and, for a mask
        ranking by the training inputs, select the subnetwork; draws nothing."""
        if base is None:
            raise ValueError("SubnetLaplaceMethod.fit needs the trained network (base=)")
        if self.takes_subset_size and self.n_params_subnet is None:
            raise ConfigError("method.n_params_subnet is required with a sized mask")
        self.laplace = lla.fit_linearised_laplace(
            base.network, base.theta, base.x_fit, data.likelihood, self.noise_variance,
            self.prior_variance)
        self.ranking = None
        if self.mask is not None:
            self.ranking = self.ranking_reference.fit_ranking(self._rank, base.x_fit)
        return {"n_params": int(self.laplace.omega.shape[0]), "n_fit": int(len(base.x_fit))}

    def _rank(self, inputs: Tensor) -> Tensor:
        """The mask's selection order with ``inputs`` as its reference set."""
        laplace = self.laplace
        mask = self.mask(laplace.network.module(laplace.theta), self.n_params_subnet,
                         precision=laplace.omega, jacobians=laplace.jacobians,
                         likelihood=laplace.likelihood)
        return mask.ranking(DataLoader(TensorDataset(inputs), batch_size=len(inputs)))

    def _subnetwork_ranking(self, x: Tensor) -> Tensor:
        return self.ranking_reference.ranking(self.ranking, self._rank, x)

    def surrogate(self, x: Tensor | None = None) -> lla.Covariance:
        """The covariance replacing ``Omega^-1`` (``x``: the inputs of a test reference)."""
        omega = self.laplace.omega
        if self.mask is not None:
            ranking = self._subnetwork_ranking(x)
            return lla.subnetwork_covariance(omega, ranking[:self.n_params_subnet])
        return self.surrogate_covariance(omega, self.laplace.network)

    def function_predictives(self, x: Tensor, sizes: Sequence[int]) -> list[Gaussian]:
        """``N(f(x), g^T Sigma_S g)`` for the subnetworks of each size in ``sizes`` (each at
        most ``n_params_subnet``): the first ``k`` parameters of one ranking."""
        if not self.takes_subset_size:
            raise ConfigError(f"method {self.name!r} has no sized mask; function_predictives "
                              "needs one")
        ranking = self._subnetwork_ranking(x)
        mean, jacobians = self.laplace.mean(x), self.laplace.jacobians(x)
        return [Gaussian(mean, lla.subnetwork_covariance(self.laplace.omega, ranking[:k])
                         .function_variance(jacobians)) for k in sizes]

    def function_predictive(self, x: Tensor) -> Gaussian:
        """``N(f(x), g^T Sigma g)``: the linearised function (a logit for classification)."""
        return self.laplace.function_predictive(x, self.surrogate(x))

    def predict(self, x: Tensor) -> Gaussian:
        """Regression: the predictive of y, ``N(f(x), sigma0^2 + g^T Sigma g)`` (eq. 1).
        Classification: the linearised logit's Gaussian (:meth:`function_predictive`)."""
        return self.laplace.likelihood_predictive(x, self.surrogate(x))
