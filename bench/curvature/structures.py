"""Curvature structures by name, and the GGN of a network in any of them.

Every structure is built one way, ``cls.from_backend(backend, x, weights)``, from a
:class:`bench.curvature.base.GGNBackend` that computes the GGN's pieces: the flat-parameter
MLP formulas (:class:`bench.curvature.flat.FlatBackend`), curvlinops operators on an
``nn.Module`` (:class:`bench.curvature.curvlinops_backend.CurvlinopsBackend`) or per-example
gradients of an ``nn.Module`` under a likelihood
(:class:`bench.curvature.module_curvature.ModuleBackend`). A config names a structure; the
name is looked up here once, at the config boundary (:func:`structure_class`), in
:data:`CURVATURE_STRUCTURES`: ``diag`` (the GGN's diagonal), ``kfac`` (per layer, the Kronecker
product of the mean input second moment and the output-gradient second moment, as
nngeometry's PMatKFAC), ``ekfac`` (K-FAC's eigenbases with refitted eigenvalues), ``bdiag``
(the dense block of each layer) and ``dense`` (q x q). A method offers the subset of names it
supports (:func:`structures_named`): :data:`STRUCTURES` for the flat-network GGN methods.

The GGN with unit noise is ``sum_i J_i J_i^T`` (J_i the output's gradient at x_i).
"""

from __future__ import annotations

from torch import Tensor

from bench.curvature.base import Curvature, GGNBackend
from bench.curvature.dense import BlockDiagonal, Dense
from bench.curvature.diagonal import Diagonal
from bench.curvature.eigen_kronecker import EigenKronecker
from bench.curvature.kronecker import Kronecker
from bench.harness.errors import require_choice

CURVATURE_STRUCTURES: dict[str, type[Curvature]] = {
    "diag": Diagonal, "kfac": Kronecker, "ekfac": EigenKronecker, "bdiag": BlockDiagonal,
    "dense": Dense}


def structures_named(*names: str) -> dict[str, type[Curvature]]:
    """The registered structures ``names``, in that order (a method's choices)."""
    return {name: CURVATURE_STRUCTURES[name] for name in names}


# The structures of the flat-network GGN methods' ``method.structure`` (SSLA).
STRUCTURES = structures_named("diag", "kfac", "dense")


def structure_class(name: str, choices: dict[str, type[Curvature]] = CURVATURE_STRUCTURES
                    ) -> type[Curvature]:
    """The structure registered as ``name`` among ``choices`` (a one-line ConfigError naming
    ``method.structure`` and the choices for any other name)."""
    return choices[require_choice("method.structure", name, choices)]


def ggn(backend: GGNBackend, x: Tensor, structure: str,
        weights: Tensor | None = None) -> Curvature:
    """Unit-noise GGN ``sum_i w_i J_i J_i^T`` of ``backend``'s network over inputs ``x``.

    ``weights`` (default all ones) turn it into other outer-product curvatures: a likelihood's
    output curvature per point (``s(1 - s)`` for a Bernoulli logit), or the empirical Fisher of
    a Gaussian likelihood, ``w_i = (y_i - f_i)^2 / sigma^2`` in these units (see
    :func:`empirical_fisher_weights`). K-FAC weights the output-gradient factor only.
    """
    return structure_class(structure).from_backend(backend, x, weights)


def empirical_fisher_weights(residuals: Tensor, noise_variance: float) -> Tensor:
    """GGN weights that make :func:`ggn` the empirical Fisher of a Gaussian likelihood.

    The log-likelihood gradient of one point is ``J r / sigma^2`` (``r = y - f``), so its outer
    product is ``(r^2 / sigma^2) * J J^T / sigma^2``: weights ``r^2 / sigma^2`` on the unit-noise
    GGN, which the caller then scales by ``1 / sigma^2`` as it does for the GGN. Unlike the GGN
    this depends on y.
    """
    return residuals**2 / noise_variance
