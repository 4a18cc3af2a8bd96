"""Subnetwork selection rules: which ``k`` of the ``p`` parameters keep their Laplace covariance.

Each rule returns a ``LongTensor`` of ``k`` distinct flat-parameter indices (in the order the
method ranks them); the masks of :mod:`bench.methods.laplace.subnet_masks` (laplace-torch's
``SubnetMask`` interface) apply them to a model. Paper references (Raha, Khare, Patra):

* Greedy-Laplace, Section 3, Algorithm 1: start from ``Omega^(1) = Omega``; at step ``t`` pick
  ``j = argmin_{i not in S} (Omega^(t))_ii`` -- the paper's words: "the parameter with the
  *minimum diagonal entry* in Omega^(i) is chosen" -- and replace the precision by the
  marginal precision of the remaining variables, the Schur complement
  ``Omega^(t+1) = Omega^(t)_{-j,-j} - Omega^(t)_{-j,j} Omega^(t)_{j,-j} / Omega^(t)_jj``
  (Step 5). ``1 / (Omega^(t))_ii`` is the variance of ``theta_i`` conditional on the other
  not-yet-selected parameters, with the selected ones marginalised out, so each step takes the
  parameter of largest such conditional variance (not the largest marginal variance).
  Note the two different conditionings: the selection criterion *marginalises* the parameters
  already chosen, while the surrogate it feeds, ``pinv([Omega_SS]^0)``, is the covariance of
  ``theta_S`` *conditional* on the unselected parameters at the MAP. (Section 3 says
  ``Omega^(i+1)`` is ``(p-i+1) x (p-i+1)``; after ``i`` removals it is ``(p-i) x (p-i)``.)
* Gradient-Laplace, Section 3, Algorithm 2: the ``k`` largest entries of
  ``g-bar = mean_{x in D} |g(x)|`` over a reference set ``D`` (training or test inputs).
* Subnet diagonal (Section 1; Daxberger et al. 2021b, Sec. 5; Appendix B): the ``k`` smallest
  diagonal entries of ``Omega`` (= the ``k`` largest variances of a diagonal Laplace, which is
  laplace-torch's ``LargestVarianceDiagLaplaceSubnetMask``).
* Last k (Appendix B): the last ``k`` parameters in the order first layer -> last layer.
* NeuralLinear (Appendix B): all parameters of the last layer.

PrecisionDiag and Block Laplace are covariance structures, not subsets: see
:mod:`bench.methods.laplace.linearised`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from bench.harness.errors import ConfigError
from bench.models.mlp import MLPShape


def _check_k(k: int, p: int) -> None:
    if not 1 <= k <= p:
        raise ConfigError(f"subset size k={k} must lie in 1..{p}")


def greedy_subnet_indices(omega: Tensor, k: int) -> Tensor:
    """Greedy-Laplace (Algorithm 1) with the Step-5 rank-one Schur downdate: ``O(k p^2)``.

    The working matrix stays ``p x p``: after pivot ``j`` is downdated its row and column are
    zero (up to rounding; they are zeroed exactly) and it is excluded from the argmin, so the
    remaining block is ``Omega^(t+1)`` in the original index order. Ties go to the lowest index.
    """
    p = omega.shape[0]
    _check_k(k, p)
    work = omega.clone()
    selected = torch.zeros(p, dtype=torch.bool)
    chosen = []
    for _ in range(k):
        diagonal = work.diagonal().masked_fill(selected, torch.inf)
        j = int(torch.argmin(diagonal))
        chosen.append(j)
        column = work[:, j].clone()
        pivot = float(column[j])
        selected[j] = True
        column[selected] = 0
        work.addr_(column, column, alpha=-1.0 / pivot)
        work[j, :] = 0
        work[:, j] = 0
    return torch.tensor(chosen, dtype=torch.long)


def schur_remove(omega: Tensor, j: int) -> Tensor:
    """Step 5 of Algorithm 1: the ``(p-1) x (p-1)`` marginal precision after removing ``j``."""
    keep = torch.cat([torch.arange(j), torch.arange(j + 1, omega.shape[0])])
    column = omega[keep, j]
    return omega[keep.unsqueeze(1), keep.unsqueeze(0)] - torch.outer(column, column) / omega[j, j]


def partial_cholesky_greedy_subnet_indices(omega: Tensor, k: int) -> Tensor:
    """Greedy-Laplace computed lazily, as a pivoted partial Cholesky: ``O(p k^2)``.

    ``Omega^(t)`` on the remaining indices equals ``Omega - L L^T`` there, with ``L`` the
    ``t`` Cholesky columns of the pivots chosen so far, so only Omega's diagonal and the ``k``
    chosen columns are read. Same selections as :func:`greedy_subnet_indices` (up to rounding
    in near-ties); the pivot rule is the paper's minimum diagonal, not the usual maximum.
    """
    p = omega.shape[0]
    _check_k(k, p)
    factor = omega.new_zeros(p, k)
    diagonal = omega.diagonal().clone()
    selected = torch.zeros(p, dtype=torch.bool)
    chosen = []
    for t in range(k):
        j = int(torch.argmin(diagonal.masked_fill(selected, torch.inf)))
        chosen.append(j)
        column = omega[:, j] - factor[:, :t] @ factor[j, :t]
        selected[j] = True
        column[selected] = 0
        factor[:, t] = column / diagonal[j].sqrt()
        diagonal = diagonal - factor[:, t] ** 2
    return torch.tensor(chosen, dtype=torch.long)


def naive_greedy_subnet_indices(omega: Tensor, k: int) -> Tensor:
    """Greedy-Laplace by definition: at each step ``Omega^(t) = ((Omega^-1)_RR)^-1`` on the
    remaining set ``R`` is re-inverted from scratch (``O(p^3)`` per step; baseline and oracle).

    The marginal precision of ``theta_R`` is the inverse of its marginal covariance
    ``(Omega^-1)_RR``; its diagonal is what Algorithm 1 minimises.
    """
    p = omega.shape[0]
    _check_k(k, p)
    covariance = torch.cholesky_inverse(torch.linalg.cholesky(omega))
    remaining = list(range(p))
    chosen = []
    for _ in range(k):
        index = torch.tensor(remaining)
        block = covariance[index.unsqueeze(1), index.unsqueeze(0)]
        precision = torch.cholesky_inverse(torch.linalg.cholesky(block))
        j = remaining[int(torch.argmin(precision.diagonal()))]
        chosen.append(j)
        remaining.remove(j)
    return torch.tensor(chosen, dtype=torch.long)


def gradient_subnet_indices(jacobians: Tensor, k: int) -> Tensor:
    """Gradient-Laplace (Algorithm 2): the ``k`` largest ``mean_x |g(x)|`` over the rows of
    ``jacobians`` ``[n_ref, p]``. Ties go to the lowest index."""
    _check_k(k, jacobians.shape[1])
    mean_abs = jacobians.abs().mean(0)
    return torch.argsort(mean_abs, descending=True, stable=True)[:k]


def subnet_diagonal_indices(omega: Tensor, k: int) -> Tensor:
    """Subnet diagonal: the ``k`` smallest ``Omega_ii``. Ties go to the lowest index."""
    return smallest_diagonal_indices(omega.diagonal(), k)


def smallest_diagonal_indices(diagonal: Tensor, k: int) -> Tensor:
    """Subnet diagonal from ``Omega``'s diagonal alone (a diagonal Laplace's precision)."""
    _check_k(k, diagonal.shape[0])
    return torch.argsort(diagonal, stable=True)[:k]


def last_k_indices(p: int, k: int) -> Tensor:
    """Last k: flat indices ``p-k .. p-1`` (layers ordered input to output)."""
    _check_k(k, p)
    return torch.arange(p - k, p)


def neural_linear_indices(network: MLPShape) -> Tensor:
    """NeuralLinear: every parameter of the last layer (its weights and bias)."""
    last = network.layer_slices()[-1]
    return torch.arange(last.start, last.stop)
