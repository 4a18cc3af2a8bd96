"""One entry point from a method name to the covariance that replaces ``Omega^-1``.

Names (paper's label in brackets): ``full`` (LLA), ``greedy`` (Greedy-Laplace), ``gradient``
(Gradient-Laplace), ``subnet_diagonal`` (Subnet diagonal), ``last_k`` (Last k),
``neural_linear`` (NeuralLinear), ``precision_diag`` (PrecisionDiag), ``block`` (Block Laplace).
The first four subset methods take the subset size ``k``; ``gradient`` also needs the
Jacobian rows of its reference set.
"""

from __future__ import annotations

from torch import Tensor

from bench.harness.errors import ConfigError, require_choice
from bench.methods.laplace import linearised as lla
from bench.methods.laplace import subset_selection as selection
from bench.models.mlp import MLPShape

PAPER_NAMES = {
    "full": "LLA",
    "greedy": "Greedy-Laplace",
    "gradient": "Gradient-Laplace",
    "subnet_diagonal": "Subnet diagonal",
    "last_k": "Last k",
    "neural_linear": "NeuralLinear",
    "precision_diag": "PrecisionDiag",
    "block": "Block Laplace",
}
METHODS_WITH_K = ("greedy", "gradient", "subnet_diagonal", "last_k")


def subnet_indices(method: str, omega: Tensor, network: MLPShape, k: int | None = None,
                   reference_jacobians: Tensor | None = None) -> Tensor:
    """The subset ``S`` a subnetwork method selects."""
    require_choice("method", method, (*METHODS_WITH_K, "neural_linear"))
    if method == "neural_linear":
        return selection.neural_linear_indices(network)
    if k is None:
        raise ConfigError(f"method={method} needs the subset size k")
    if method == "greedy":
        return selection.greedy_subnet_indices(omega, k)
    if method == "subnet_diagonal":
        return selection.subnet_diagonal_indices(omega, k)
    if method == "last_k":
        return selection.last_k_indices(omega.shape[0], k)
    if reference_jacobians is None:
        raise ConfigError("method=gradient needs the reference set's Jacobians")
    return selection.gradient_subnet_indices(reference_jacobians, k)


def method_covariance(method: str, omega: Tensor, network: MLPShape, k: int | None = None,
                      reference_jacobians: Tensor | None = None) -> lla.Covariance:
    """The covariance (with ``function_variance`` and ``dense``) a method puts in eq. (1)."""
    require_choice("method", method, PAPER_NAMES)
    if method == "full":
        return lla.full_covariance(omega)
    if method == "precision_diag":
        return lla.precision_diagonal_covariance(omega)
    if method == "block":
        return lla.layer_block_covariance(omega, network)
    subset = subnet_indices(method, omega, network, k, reference_jacobians)
    return lla.subnetwork_covariance(omega, subset)
