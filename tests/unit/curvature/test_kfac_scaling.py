"""Layer Frobenius norms per structure, and the exact and "paper-like" (DLR curvature
library) accumulations: the library's sums checked against its update loop written out."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from bench.curvature.dense import BlockDiagonal
from bench.curvature.diagonal import Diagonal
from bench.curvature.eigen_kronecker import EigenKronecker
from bench.curvature.kfac_scaling import (
    ExactAccumulation,
    LibraryAccumulation,
    layer_frobenius_norm,
    make_accumulation,
    paper_like_frobenius_norm,
    paper_like_kfac,
    paper_like_updates,
    precision_eigenvalues,
    weight_sharing_positions,
)
from bench.curvature.kronecker import Kronecker
from bench.harness.errors import ConfigError

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


def _per_label_gradients(net: torch.nn.Sequential, x: torch.Tensor):
    """For the tiny MLP Linear -> Tanh -> Linear: per example n and label y, each layer's
    input q (with the trailing 1), output gradient g and weight gradient g q^T, and the
    model's label probabilities ``[n, C]``."""
    first, last = net[0], net[2]
    q1 = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
    hidden = torch.tanh(first(x))
    q2 = torch.cat([hidden, torch.ones(len(x), 1, dtype=x.dtype)], dim=1)
    probs = torch.softmax(last(hidden), dim=-1).detach()
    eye = torch.eye(probs.shape[1], dtype=x.dtype)
    g2 = probs.unsqueeze(1) - eye.unsqueeze(0)  # [n, y, C]
    g1 = (g2 @ last.weight.detach()) * (1 - hidden.detach() ** 2).unsqueeze(1)  # [n, y, H]
    layers = [(q1.detach(), g1), (q2.detach(), g2)]
    return layers, probs


def test_library_accumulation_is_the_expected_library_sum():
    # Known answer: the DLR library's update loop, written out and averaged exactly over the
    # sampled labels (every label pair of a minibatch enumerated with its probability), on
    # N = 4 inputs in minibatches of B = 2 with S = 3 label samples each (U = 6 updates).
    from bench.curvature.module_curvature import module_curvature
    from tests.unit.curvature.tiny_nets import tiny_mlp

    n, batch, samples = 4, 2, 3
    net = tiny_mlp((3, 4, 3))
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    layers, probs = _per_label_gradients(net, x)
    exact = {s: module_curvature(net, x, None, s, fisher_type="type-2", batch_size=n)
             for s in ("diag", "kfac", "ekfac")}
    library = LibraryAccumulation(n, batch, samples)
    bases = [(u_q, u_g) for u_q, u_g, _ in exact["ekfac"].layers]
    diag = [0.0, 0.0]
    ekfac = [0.0, 0.0]
    g_sum = [0.0, 0.0]
    q_sum = [0.0, 0.0]
    for start in range(0, n, batch):
        rows = range(start, start + batch)
        for labels in itertools.product(range(probs.shape[1]), repeat=batch):
            weight = math.prod(float(probs[r, y]) for r, y in zip(rows, labels, strict=True))
            for i, (q, g) in enumerate(layers):
                grads = [torch.outer(g[r, y], q[r]) for r, y in zip(rows, labels, strict=True)]
                mean_grad = sum(grads) / batch  # the gradient of the minibatch-mean loss
                diag[i] = diag[i] + samples * weight * batch * mean_grad**2
                u_q, u_g = bases[i]
                ekfac[i] = ekfac[i] + samples * weight * (u_g.T @ mean_grad @ u_q) ** 2
                g_sum[i] = g_sum[i] + samples * weight * sum(
                    torch.outer(g[r, y], g[r, y]) for r, y in zip(rows, labels, strict=True)
                ) / batch
        for i, (q, _) in enumerate(layers):
            q_sum[i] = q_sum[i] + samples * q[list(rows)].T @ q[list(rows)] / batch
    flat_diag = torch.cat([torch.cat([d[:, :-1].reshape(-1), d[:, -1]]) for d in diag])
    torch.testing.assert_close(library.rescaling(exact["diag"]) * exact["diag"].values,
                               flat_diag)
    for (_, _, s), expected in zip(exact["ekfac"].layers, ekfac, strict=True):
        torch.testing.assert_close(library.rescaling(exact["ekfac"]) * s, expected)
    for (q, g), q_expected, g_expected in zip(library.factors(exact["kfac"]), q_sum, g_sum,
                                              strict=True):
        torch.testing.assert_close(q, q_expected)
        torch.testing.assert_close(g, g_expected)


@pytest.mark.parametrize("scale", [1.0, 2.5])
def test_paper_like_precision_in_the_eigenbasis_equals_the_damped_factors(scale):
    kfac = Kronecker(((A, 100.0 * G), (A[:2, :2], 40.0 * G)), scale=scale)
    library = LibraryAccumulation(100, 32, 30, positions=(1, 4))
    for temperature, prior in ((4.0, 9.0), (1e-3, 600.0)):
        ours = library.precision_at(kfac)(temperature, prior)
        dense = paper_like_kfac(kfac, 100, 32, 30, temperature, prior, positions=(1, 4))
        torch.testing.assert_close(ours.to_dense(), dense.to_dense())
    # the second layer shares its weights over 4 positions: G_sum = U G / (N * 4)
    torch.testing.assert_close(library.factors(kfac)[1][1], 120 * 40.0 * G / 400)
    assert math.isclose(library.layer_norm(kfac, -1, [6, 4]),
                        paper_like_frobenius_norm(kfac, 100, 32, 30, positions=(1, 4)))


def test_exact_and_library_accumulations_of_diag_and_ekfac_are_rescaled_exact_ones():
    diag = Diagonal(torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64))
    eigen = EigenKronecker.from_kronecker(Kronecker(((A, G),)))
    library = LibraryAccumulation(96, 32, 30)
    assert library.rescaling(diag) == 30 / 32 and library.rescaling(eigen) == 30 / 32**2
    torch.testing.assert_close(library.precision_at(diag)(2.0, 5.0).diagonal(),
                               2.0 * 30 / 32 * diag.values + 5.0)
    torch.testing.assert_close(ExactAccumulation().precision_at(eigen)(2.0, 5.0).to_dense(),
                               eigen.scaled(2.0, 5.0).to_dense())
    assert math.isclose(library.layer_norm(eigen, -1, [6]),
                        30 / 32**2 * layer_frobenius_norm(eigen, -1, [6]))


@pytest.mark.parametrize("make", [
    lambda: Diagonal(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), scale=2.0, shift=0.5),
    lambda: Kronecker(((A, G),), scale=3.0, shift=1.0),
    lambda: EigenKronecker.from_kronecker(Kronecker(((A, G),))).scaled(2.0, 0.25),
    lambda: BlockDiagonal((torch.arange(2),), (G,), 3, shift=0.5),
])
def test_precision_eigenvalues_are_the_dense_spectrum(make):
    curvature = make()
    ours = torch.sort(precision_eigenvalues(curvature)).values
    torch.testing.assert_close(ours, torch.linalg.eigvalsh(curvature.to_dense()))


def test_weight_sharing_positions_of_lenet5():
    from tests.unit.curvature.tiny_nets import lenet5

    assert weight_sharing_positions(lenet5(), torch.randn(1, 1, 28, 28)) == (784, 100, 1, 1, 1)


def test_an_unknown_accumulation_is_one_line_naming_the_choices():
    with pytest.raises(ConfigError, match=r"^method.accumulation='sum' is not valid; choose "
                                          r"one of: exact, paper-like$"):
        make_accumulation("sum", n_data=10)
    assert isinstance(make_accumulation("paper-like", n_data=10), LibraryAccumulation)
