"""Every structure from every GGN backend: the flat, curvlinops and module backends give the
same matrices on one small MSE MLP (float64), and the block and EKFAC structures agree with
the dense GGN they approximate."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bench.curvature.curvlinops_backend import CurvlinopsBackend
from bench.curvature.dense import BlockDiagonal
from bench.curvature.eigen_kronecker import EigenKronecker, eigenbasis_diagonal
from bench.curvature.flat import FlatBackend
from bench.curvature.kronecker import layer_vector
from bench.curvature.module_curvature import ModuleBackend
from bench.curvature.structures import CURVATURE_STRUCTURES, ggn
from bench.harness.errors import ConfigError
from bench.models.mlp import flat_parameters, shape_of

N = 11
LAYER_SIZES = [16, 15, 4]  # Linear(3, 4), Linear(4, 3), Linear(3, 1)


def _module() -> nn.Module:
    torch.manual_seed(0)  # nn.Linear's initialisation
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3), nn.Tanh(),
                         nn.Linear(3, 1)).double()


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return (torch.randn(N, 3, generator=g, dtype=torch.float64),
            torch.rand(N, generator=g, dtype=torch.float64))


def _backends() -> dict[str, object]:
    module = _module()
    # The Gaussian likelihood's exact GGN with unit noise is the unit-noise GGN.
    return {"flat": FlatBackend(shape_of(module, "tanh"), flat_parameters(module)),
            "curvlinops": CurvlinopsBackend(module),
            "module": ModuleBackend(module, likelihood="regression", batch_size=4)}


def _dense_reference(weights: torch.Tensor | None) -> torch.Tensor:
    """``J^T diag(w) J`` from autograd's Jacobian of the module."""
    module, (x, _) = _module(), _data()
    params = dict(module.named_parameters())

    def outputs(*values):
        named = dict(zip(params, values, strict=True))
        return torch.func.functional_call(module, named, (x,))[:, 0]

    jac = torch.cat([j.reshape(N, -1) for j in
                     torch.autograd.functional.jacobian(outputs, tuple(params.values()))], 1)
    w = torch.ones(N, dtype=torch.float64) if weights is None else weights
    return jac.T @ (w.unsqueeze(1) * jac)


def _block_mask() -> torch.Tensor:
    return torch.block_diag(*[torch.ones(s, s) for s in LAYER_SIZES]).bool()


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("backend", ["flat", "curvlinops", "module"])
def test_dense_diag_and_bdiag_of_every_backend_are_the_autograd_ggn(backend, weighted):
    x, w = _data()
    weights = w if weighted else None
    chosen = _backends()[backend]
    reference = _dense_reference(weights)
    torch.testing.assert_close(ggn(chosen, x, "dense", weights).to_dense(), reference)
    torch.testing.assert_close(ggn(chosen, x, "diag", weights).diagonal(), reference.diagonal())
    bdiag = ggn(chosen, x, "bdiag", weights)
    assert isinstance(bdiag, BlockDiagonal)
    torch.testing.assert_close(bdiag.to_dense(), reference * _block_mask())


@pytest.mark.parametrize("weighted", [False, True])
def test_every_structure_is_the_same_from_every_backend(weighted):
    x, w = _data()
    weights = w if weighted else None
    backends = _backends()
    for name in CURVATURE_STRUCTURES:
        flat = ggn(backends["flat"], x, name, weights).scaled(2.0, 0.3)
        for other in ("curvlinops", "module"):
            theirs = ggn(backends[other], x, name, weights).scaled(2.0, 0.3)
            assert type(theirs) is type(flat)
            torch.testing.assert_close(theirs.to_dense(), flat.to_dense())
            torch.testing.assert_close(theirs.logdet(), flat.logdet())


def _parameter_order_basis(u_a: torch.Tensor, u_g: torch.Tensor) -> torch.Tensor:
    """``U_G kron U_A`` with its rows in a layer's parameter order (weight, then bias)."""
    fan_out, width = u_g.shape[0], u_a.shape[0]
    order = layer_vector(torch.arange(fan_out * width).reshape(fan_out, width))
    return torch.kron(u_g, u_a)[order]


@pytest.mark.parametrize("backend", ["flat", "curvlinops", "module"])
def test_ekfac_matches_the_dense_block_on_the_diagonal_of_its_eigenbasis(backend):
    # EKFAC keeps K-FAC's eigenbasis Q and fits the eigenvalues so that Q^T (B - EKFAC) Q has
    # a zero diagonal for each layer's exact block B (George et al. 2018).
    x, w = _data()
    ekfac = ggn(_backends()[backend], x, "ekfac", w)
    assert isinstance(ekfac, EigenKronecker)
    blocks = BlockDiagonal.of(_dense_reference(w), [
        torch.arange(sum(LAYER_SIZES[:i]), sum(LAYER_SIZES[:i + 1]))
        for i in range(len(LAYER_SIZES))]).diagonal_blocks()
    for exact, approximate, (u_a, u_g, s) in zip(blocks, ekfac.diagonal_blocks(),
                                                 ekfac.layers, strict=True):
        basis = _parameter_order_basis(u_a, u_g)
        residual = basis.T @ (exact - approximate) @ basis
        torch.testing.assert_close(residual.diagonal(), torch.zeros_like(s.reshape(-1)))
        torch.testing.assert_close(eigenbasis_diagonal(exact, u_a, u_g), s)


def test_ekfac_of_one_input_is_kfac():
    # One input: every layer's GGN block g g^T kron a a^T is a Kronecker product, so EKFAC's
    # refitted eigenvalues are K-FAC's eigenvalue products.
    x, _ = _data()
    for backend in _backends().values():
        torch.testing.assert_close(ggn(backend, x[:1], "ekfac").to_dense(),
                                   ggn(backend, x[:1], "kfac").to_dense())


def test_module_backend_without_biases_gives_the_bias_free_layout():
    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(3, 4, bias=False), nn.Tanh(), nn.Linear(4, 1)).double()
    x, w = _data()
    backend = ModuleBackend(module, likelihood="regression")
    assert backend.biases == (False, True)
    kfac, ekfac = ggn(backend, x, "kfac", w), ggn(backend, x, "ekfac", w)
    assert kfac.biases == ekfac.biases == (False, True)
    assert kfac.n_params == ekfac.n_params == 12 + 5
    dense = ggn(backend, x, "dense", w).to_dense()
    mask = torch.block_diag(torch.ones(12, 12), torch.ones(5, 5)).bool()
    torch.testing.assert_close(ggn(backend, x, "bdiag", w).to_dense(), dense * mask)


def test_a_dense_module_curvature_too_large_is_one_line_naming_the_limit():
    x, _ = _data()
    backend = ModuleBackend(_module(), likelihood="regression", max_block_size=30)
    with pytest.raises(ConfigError, match="^method.structure=dense: the network has 35 "
                                          "curvature parameters; .* at most 30$"):
        ggn(backend, x, "dense")
