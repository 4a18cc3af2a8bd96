"""Layer Frobenius norms per structure, and the "paper-like" K-FAC accumulation hypothesis."""

from __future__ import annotations

import math

import torch

from bench.curvature.dense import BlockDiagonal
from bench.curvature.diagonal import Diagonal
from bench.curvature.eigen_kronecker import EigenKronecker
from bench.curvature.kfac_scaling import (
    layer_frobenius_norm,
    paper_like_frobenius_norm,
    paper_like_kfac,
    paper_like_updates,
)
from bench.curvature.kronecker import Kronecker

A = torch.tensor([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.0]], dtype=torch.float64)
G = torch.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
FIRST = (torch.eye(2, dtype=torch.float64), torch.eye(1, dtype=torch.float64))


def test_layer_norms_are_the_norms_of_the_dense_layer_blocks():
    kfac = Kronecker((FIRST, (A, G)), scale=2.0)
    last_block = kfac.diagonal_blocks()[-1] / 2.0
    expected = 2.0 * float(torch.linalg.matrix_norm(last_block))
    sizes = [2, 6]
    assert math.isclose(layer_frobenius_norm(kfac, -1, sizes), expected, rel_tol=1e-12)
    eigen = EigenKronecker.from_kronecker(kfac)
    assert math.isclose(layer_frobenius_norm(eigen, 1, sizes), expected, rel_tol=1e-12)
    blocks = BlockDiagonal.of(kfac.to_dense(), [torch.arange(2), torch.arange(2, 8)])
    assert math.isclose(layer_frobenius_norm(blocks, -1, sizes), expected, rel_tol=1e-12)
    diag = Diagonal(torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64), scale=3.0)
    assert math.isclose(layer_frobenius_norm(diag, -1, [1, 3]), 3.0 * math.sqrt(29))


def test_paper_like_factors_are_summed_over_update_calls():
    # N = 100, batch 32, 30 label samples: U = 30 * ceil(100 / 32) = 120 minibatch means.
    kfac = Kronecker(((A, 100.0 * G),))  # K-FAC holds E[qq^T] and N E[gg^T]
    assert paper_like_updates(100, 32, 30) == 120
    norm = paper_like_frobenius_norm(kfac, 100, 32, 30)
    expected = 120**2 * float(torch.linalg.matrix_norm(A) * torch.linalg.matrix_norm(G))
    assert math.isclose(norm, expected, rel_tol=1e-12)
    # the correctly scaled norm is N |E qq^T| |E gg^T|: the ratio is U^2 / N
    correct = layer_frobenius_norm(kfac, -1, [6])
    assert math.isclose(norm / correct, 120**2 / 100, rel_tol=1e-12)


def test_paper_like_precision_damps_each_factor():
    kfac = Kronecker(((A, 100.0 * G),))
    damped = paper_like_kfac(kfac, 100, 32, 30, temperature=4.0, prior_precision=9.0)
    q = 2.0 * 120 * A + 3.0 * torch.eye(3, dtype=torch.float64)
    g = 2.0 * 120 * G + 3.0 * torch.eye(2, dtype=torch.float64)
    torch.testing.assert_close(damped.to_dense(), Kronecker(((q, g),)).to_dense())
    torch.testing.assert_close(damped.factors[0][0], q)
