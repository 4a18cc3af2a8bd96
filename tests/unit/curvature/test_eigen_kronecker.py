"""EigenKronecker (EKFAC's structure) against its dense matrix, and K-FAC as its special case."""

from __future__ import annotations

import torch

from bench.curvature.eigen_kronecker import EigenKronecker
from bench.curvature.kronecker import Kronecker


def random_spd(n: int, generator: torch.Generator) -> torch.Tensor:
    m = torch.randn(n, n + 2, generator=generator, dtype=torch.float64)
    return m @ m.T / n


def structures():
    generator = torch.Generator().manual_seed(0)
    kfac = Kronecker(tuple((random_spd(fan_in + 1, generator), random_spd(fan_out, generator))
                           for fan_in, fan_out in [(3, 2), (2, 4)]), scale=2.5, shift=0.7)
    layers = []
    for a, g in kfac.factors:
        u_q = torch.linalg.qr(torch.randn(*a.shape, generator=generator,
                                          dtype=torch.float64)).Q
        u_g = torch.linalg.qr(torch.randn(*g.shape, generator=generator,
                                          dtype=torch.float64)).Q
        s = torch.rand(g.shape[0], a.shape[0], generator=generator, dtype=torch.float64)
        layers.append((u_q, u_g, s))
    return kfac, EigenKronecker(tuple(layers), scale=1.5, shift=0.3)


def test_kfac_in_its_eigenbasis_is_the_same_matrix():
    kfac, _ = structures()
    eigen = EigenKronecker.from_kronecker(kfac)
    torch.testing.assert_close(eigen.to_dense(), kfac.to_dense())
    torch.testing.assert_close(eigen.scaled(3.0, 2.0).to_dense(),
                               kfac.scaled(3.0, 2.0).to_dense())


def test_dense_form_is_the_rotated_eigenvalues():
    _, eigen = structures()
    u_q, u_g, s = eigen.layers[0]
    basis = torch.kron(u_g, u_q)  # acts on V = [W | b] (2 x 4) row-major
    block = basis @ torch.diag(1.5 * s.flatten() + 0.3) @ basis.T
    dense = eigen.to_dense()[:8, :8]
    index = torch.tensor([0, 1, 2, 4, 5, 6, 3, 7])  # W row-major (2 x 3), then the bias
    torch.testing.assert_close(dense, block[index][:, index])


def test_operations_agree_with_the_dense_matrix():
    _, eigen = structures()
    dense = eigen.to_dense()
    b = torch.randn(3, eigen.n_params, dtype=torch.float64)
    torch.testing.assert_close(eigen.diagonal(), dense.diagonal())
    torch.testing.assert_close(eigen.solve(b), torch.linalg.solve(dense, b.T).T)
    torch.testing.assert_close(eigen.logdet(), torch.linalg.slogdet(dense).logabsdet)
    root = eigen.inverse_sqrt(torch.eye(eigen.n_params, dtype=torch.float64)).T
    torch.testing.assert_close(root @ root.T, torch.linalg.inv(dense))
    torch.testing.assert_close(eigen.plus(eigen).to_dense(), 2 * dense)
