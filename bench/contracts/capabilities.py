"""Capabilities beyond ``fit`` / ``predict``: the named vocabulary a task asks for.

Each is a small ``runtime_checkable`` protocol. A task that needs more than the
:class:`~bench.contracts.method.Method` contract declares the capability with
:func:`bench.harness.task_inputs.takes` (the job stops with one line naming the capability and
the method options that have it) and asks the fitted method with
:func:`bench.harness.task_inputs.capability` (an optional one with ``isinstance``) instead of
calling an extra method one class happens to have. A method has a capability by having its
members: no class here is named by a method, and none is imported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from bench.contracts.method import ConjugateMethod, Method, SyntheticNetworkMethod

if TYPE_CHECKING:
    from torch import Tensor, nn

    from bench.predictive.categorical import Categorical
    from bench.predictive.densities import Gaussian


@runtime_checkable
class PredictionDiagnostics(Protocol):
    """Says how its last prediction went (how SSLA's refits converged, say); the regression
    tasks record each value as a metric ``<row>/<name>``."""

    def prediction_diagnostics(self) -> dict[str, float]:
        """Diagnostics of the last ``predict``."""


@runtime_checkable
class StoredTensors(Protocol):
    """Names the tensors it needs to predict (the memory task, Laplace Redux Table 5)."""

    def stored_tensors(self) -> dict[str, Tensor]:
        """The tensors the method reads to predict."""


@runtime_checkable
class HoldsUnreadTensors(StoredTensors, Protocol):
    """A fitted method whose objects keep tensors alive that its predictions never read.

    ``unread_tensors()`` is the rest of what its objects hold, each storage not already among
    the stored ones (laplace-torch's last-layer Laplace: the parameters of the network it was
    handed, ``la.params``). The memory task reports both.
    """

    def unread_tensors(self) -> dict[str, Tensor]:
        """The tensors its objects hold beyond :meth:`stored_tensors`, never read."""


@runtime_checkable
class TemperedPredictive(Method, Protocol):
    """A Laplace posterior ``N(theta-hat, (T F + delta I)^-1)`` of one curvature
    ``structure`` (accumulated as ``accumulation``) predicting at many temperatures ``T`` from
    one set of draws (Generalized Laplace Figures 3-5)."""

    structure: str
    accumulation: str
    prior_precision: float

    def predict_tempered(self, x: Tensor, temperatures: Iterable[float]
                         ) -> dict[float, Categorical]:
        """Temperature -> the predictive at ``x``."""

    def prior_dominated_share(self, temperature: float) -> float:
        """Share of the curvature's eigen-directions where the prior dominates at ``T``."""


@runtime_checkable
class TemperedFunctionSamples(Method, Protocol):
    """Draws of the network function under the tempered posterior (NN sampling)."""

    temperature: float
    prior_precision: float

    def function_samples(self, x: Tensor, temperature: float) -> Tensor:
        """Network outputs ``[S, n, outputs]`` at ``x``, one per posterior draw."""


@runtime_checkable
class NetworkAndLinearisedSamples(Method, Protocol):
    """A Gaussian posterior over the weights whose draws are pushed through the network
    (``nn``) and through the network linearised at its linearisation point (``glm``); ``model``
    holds the likelihood, the network and the BLR view (GGN thesis Section 5.2)."""

    model: Any

    def function_samples(self, x: Tensor, kind: str) -> Tensor:
        """Function draws ``[S, n]`` at ``x`` of kind ``nn`` or ``glm``."""


@runtime_checkable
class FittingTrace(Protocol):
    """Keeps the trace of its iterative fit (per-step training NLL, log-determinant of the
    precision, mean change and gradient norms; VOGGN), None before it is fitted."""

    trace: Any


@runtime_checkable
class FullBatchMAP(Method, Protocol):
    """Trains a grid of MAP networks at once (full-batch Adam from the shared initialisation
    of a seed, then an optional L-BFGS polish), one per prior precision, the way it trains its
    own (GGN thesis Section 5.1)."""

    likelihood: str
    polish_iterations: int
    n_predictive_samples: int

    def network(self, input_dim: int) -> Any:
        """The network shape for inputs of ``input_dim``."""

    def fit_grid(self, x: Tensor, y: Tensor, likelihood: Any, prior_precisions: list[float],
                 seed: int, desc: str = ...) -> tuple[Any, dict[str, float]]:
        """The trained (and polished) networks and their seconds."""


@runtime_checkable
class FunctionPredictive(Protocol):
    """The Gaussian over the network function ``f(x)`` (no observation noise)."""

    def function_predictive(self, x: Tensor) -> Gaussian:
        """``N(f(x), g^T Sigma g)`` at ``x``."""


@runtime_checkable
class SubnetworkPredictives(SyntheticNetworkMethod, FunctionPredictive, Protocol):
    """A subnetwork Laplace: a sized one (``takes_subset_size``, ``n_params_subnet`` weights)
    gives every subnetwork size of a grid from one ranking; ``is_full_lla`` marks the
    reference (the full linearised Laplace)."""

    takes_subset_size: bool
    is_full_lla: bool
    n_params_subnet: int | None

    def function_predictives(self, x: Tensor, sizes: Sequence[int]) -> list[Gaussian]:
        """One function predictive per subnetwork size in ``sizes``."""


@runtime_checkable
class ContinualLearner(Method, Protocol):
    """Learns one task per ``fit`` with a running posterior; ``map_predict`` is the network's
    own softmax, ``state_hash`` names the posterior state after the last task."""

    hessian_structure: str
    network: nn.Module | None
    state_hash: str | None

    def map_predict(self, x: Tensor) -> Categorical:
        """The network's own softmax at ``x``."""


@runtime_checkable
class OnlineMarglik(Method, Protocol):
    """Trains its network and prior precision together by online marginal likelihood and
    fits the Laplace approximation of one ``hessian_structure`` (Laplace Redux Table 2)."""

    hessian_structure: str
    marglik_frequency: int


@runtime_checkable
class KernelExplanations(Method, Protocol):
    """The Gaussian-process view of a trained binary classifier: the training importances
    ``a_i`` and ``explain(x)``, the kernel between ``x`` and the training inputs with the GP
    mean it gives (GGN thesis Figure 5.6)."""

    prior_precision: float
    importances: Tensor

    def explain(self, x: Tensor) -> Any:
        """Logits, offset, kernel and GP mean at ``x``."""


@runtime_checkable
class AggregateIncrement(ConjugateMethod, Protocol):
    """A conjugate method whose likelihood increment is computed one of two ways (ASSLA, SSLA
    Table 1): ``increment`` is set by name (``aggregate`` or ``direct``) and holds the
    increment strategy once the method is built (the contract names no method class, so it
    is typed loosely here)."""

    increment: object
