"""Curvature structures against the dense matrices they represent, and the flat GGN against
autograd (float64, CPU)."""

from __future__ import annotations

import pytest
import torch

from bench.curvature.dense import BlockDiagonal, Dense
from bench.curvature.eigen_kronecker import EigenKronecker
from bench.curvature.flat import FlatBackend
from bench.curvature.function_space import FunctionSpaceGGN
from bench.curvature.kronecker import Kronecker
from bench.curvature.structures import STRUCTURES, ggn
from bench.harness.errors import ConfigError
from bench.models.mlp import MLPShape, init_parameters

SHAPE = MLPShape((2, 5, 4, 1), "tanh")


def _inputs(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _theta(shape: MLPShape = SHAPE, seed: int = 1) -> torch.Tensor:
    return init_parameters(shape, torch.Generator().manual_seed(seed), torch.float64)


def _random_spd(p: int, seed: int) -> torch.Tensor:
    a = torch.randn(p, p, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return a @ a.T + 0.1 * torch.eye(p, dtype=torch.float64)


def _layer_blocks(backend: FlatBackend, x: torch.Tensor) -> BlockDiagonal:
    """The dense GGN's per-layer diagonal blocks."""
    sizes = [fan_out * (fan_in + 1) for fan_in, fan_out in backend.network.layers]
    ends = torch.tensor(sizes).cumsum(0).tolist()
    index = [torch.arange(end - size, end) for size, end in zip(sizes, ends, strict=True)]
    return BlockDiagonal.of(ggn(backend, x, "dense").to_dense(), index)


def _curvatures() -> dict[str, object]:
    """Every structure, scaled and shifted, including block-diagonal ones (a Kronecker sum in
    the factors' order, and blocks that leave parameters out)."""
    backend = FlatBackend(SHAPE, _theta())
    x = _inputs(30, 2)
    out = {name: ggn(backend, x, name).scaled(2.0, 0.5) for name in STRUCTURES}
    kronecker = ggn(backend, x, "kfac")
    out["kfac_plus_kfac"] = kronecker.scaled(2.0).plus(ggn(backend, x[:3], "kfac").scaled(1, 0.5))
    blocks = [torch.tensor([3, 0, 7]), torch.arange(10, 20), torch.tensor([30, 21])]
    out["blocks"] = BlockDiagonal.of(_random_spd(SHAPE.n_params, 4), blocks).scaled(2.0, 0.5)
    out["layer_blocks"] = _layer_blocks(backend, x).scaled(2.0, 0.5)
    out["function_space"] = _function_space(backend, x[:7]).scaled(2.0, 0.5)
    out["function_space_sum"] = _function_space(backend, x[:4]).scaled(3.0).plus(
        _function_space(backend, x[20:25]).scaled(0.5, 0.2))
    return out


def _function_space(backend: FlatBackend, x: torch.Tensor) -> FunctionSpaceGGN:
    """``J^T W J + 0.3 I`` over fewer points than parameters, one weight zero (saturated)."""
    weights = torch.rand(len(x), generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    weights[0] = 0.0
    return FunctionSpaceGGN.fit(backend.network.jacobian(backend.theta, x), weights, 0.3)


CURVATURES = _curvatures()


@pytest.mark.parametrize("name", list(CURVATURES))
def test_structure_operations_match_the_dense_matrix(name):
    curvature = CURVATURES[name]
    dense = curvature.to_dense()
    q = curvature.n_params
    torch.testing.assert_close(dense, dense.T)
    rhs = torch.randn(2, 3, q, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    expected = torch.linalg.solve(dense, rhs.reshape(-1, q).T).T.reshape(rhs.shape)
    torch.testing.assert_close(curvature.solve(rhs), expected)
    torch.testing.assert_close(curvature.inverse_quadratic_form(rhs), (rhs * expected).sum(-1))
    torch.testing.assert_close(curvature.logdet(), torch.linalg.slogdet(dense)[1])
    torch.testing.assert_close(curvature.diagonal(), dense.diagonal())
    root = curvature.inverse_sqrt(torch.eye(q, dtype=torch.float64)).T  # columns S e_k
    torch.testing.assert_close(root @ root.T, torch.linalg.inv(dense))
    block_logdets = sum(torch.linalg.slogdet(b)[1].sum() for b in curvature.diagonal_blocks())
    torch.testing.assert_close(block_logdets, curvature.logdet())


@pytest.mark.parametrize("name", ["diag", "kfac", "dense", "layer_blocks"])
def test_contiguous_diagonal_blocks_are_the_direct_sum(name):
    curvature = CURVATURES[name]
    blocks = [b for part in curvature.diagonal_blocks() for b in (part if part.dim() == 3
                                                                  else [part])]
    torch.testing.assert_close(torch.block_diag(*blocks), curvature.to_dense(), rtol=0, atol=0)


@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_curvature_solve_and_logdet_match_the_dense_matrix(structure):
    theta, x = _theta(), _inputs(30, 2)
    curvature = ggn(FlatBackend(SHAPE, theta), x, structure).scaled(2.0, 0.5)
    dense = curvature.to_dense()
    rhs = torch.randn(3, SHAPE.n_params, generator=torch.Generator().manual_seed(3),
                      dtype=torch.float64)
    torch.testing.assert_close(curvature.solve(rhs), torch.linalg.solve(dense, rhs.T).T)
    torch.testing.assert_close(curvature.logdet(), torch.logdet(dense))
    if structure == "dense":
        jac = torch.func.jacrev(lambda t: SHAPE.forward_1d(t, x))(theta)
        torch.testing.assert_close(dense, 2.0 * jac.T @ jac + 0.5 * torch.eye(SHAPE.n_params,
                                                                               dtype=torch.float64))


@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_weighted_curvature_matches_weighted_outer_products(structure):
    shape = MLPShape((2, 4, 3, 1), "tanh")
    theta, x = _theta(shape, 4), _inputs(12, 5)
    backend = FlatBackend(shape, theta)
    weights = torch.rand(12, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    jac = torch.func.jacrev(lambda t: shape.forward_1d(t, x))(theta)
    weighted = ggn(backend, x, structure, weights).to_dense()
    if structure == "dense":
        expected = jac.T @ (weights[:, None] * jac)
    elif structure == "diag":
        expected = torch.diag((weights[:, None] * jac**2).sum(0))
    else:
        inputs, grads = shape.layer_inputs_and_output_grads(theta, x)
        blocks = []
        for a, g in zip(inputs, grads, strict=True):
            a1 = torch.cat([a, torch.ones_like(a[:, :1])], dim=1)
            unweighted = ggn(backend, x, "kfac").factors[len(blocks)]
            torch.testing.assert_close(unweighted[0], a1.T @ a1 / 12)
            blocks.append((a1.T @ a1 / 12, g.T @ (weights[:, None] * g)))
        expected = Kronecker(tuple(blocks)).to_dense()
    torch.testing.assert_close(weighted, expected)


def test_kronecker_of_one_point_is_the_exact_layer_blocks():
    shape = MLPShape((2, 3, 2, 1), "tanh")
    backend, x = FlatBackend(shape, _theta(shape, 9)), _inputs(1, 10)
    # One point: A and G have rank one, so each K-FAC block is that layer's GGN block.
    torch.testing.assert_close(ggn(backend, x, "kfac").to_dense(),
                               _layer_blocks(backend, x).to_dense())


@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_hadamard_bound_is_an_upper_bound_on_the_refit_logdet(structure):
    shape = MLPShape((2, 4, 3, 1), "tanh")
    backend, x = FlatBackend(shape, _theta(shape, 7)), _inputs(40, 8)
    train = ggn(backend, x, structure).scaled(1 / 40)
    point = ggn(backend, x[:1], structure)
    total = train.plus(point)
    exact = total.logdet()
    torch.testing.assert_close(total.to_dense(), train.to_dense() + point.to_dense())
    torch.testing.assert_close(exact, torch.linalg.slogdet(total.to_dense())[1])
    bound = torch.log(train.diagonal() + point.diagonal()).sum()
    assert torch.isfinite(exact) and exact <= bound + 1e-10
    if structure == "diag":
        torch.testing.assert_close(exact, bound)


def test_block_structures_are_moore_penrose_without_a_shift():
    omega = _random_spd(6, 11)
    index = [torch.tensor([4, 1]), torch.tensor([2])]
    blocks = BlockDiagonal.of(omega, index)
    padded = torch.zeros_like(omega)
    for i in index:
        padded[i.unsqueeze(1), i.unsqueeze(0)] = omega[i.unsqueeze(1), i.unsqueeze(0)]
    torch.testing.assert_close(blocks.to_dense(), padded)
    eye = torch.eye(6, dtype=torch.float64)
    torch.testing.assert_close(blocks.solve(eye), torch.linalg.pinv(padded))
    assert blocks.logdet() == -torch.inf
    singular = Dense(padded)
    assert singular.logdet() == -torch.inf


def test_unknown_structure_is_a_one_line_config_error():
    with pytest.raises(ConfigError, match=r"^method.structure='low_rank' is not valid; choose "
                                          r"one of: diag, kfac, ekfac, bdiag, dense$"):
        ggn(FlatBackend(SHAPE, _theta()), _inputs(3, 0), "low_rank")


def test_function_space_ggn_is_the_dense_laplace_ggn_precision():
    backend, x = FlatBackend(SHAPE, _theta()), _inputs(6, 12)
    weights = torch.rand(6, generator=torch.Generator().manual_seed(13), dtype=torch.float64)
    jac = backend.network.jacobian(backend.theta, x)
    function_space = FunctionSpaceGGN.fit(jac, weights, 0.4).scaled(1.5)
    dense = ggn(backend, x, "dense", weights).scaled(1.5, 0.6)
    torch.testing.assert_close(function_space.to_dense(), dense.to_dense())
    torch.testing.assert_close(function_space.logdet(), dense.logdet())
    rows = _inputs(3, 14) @ torch.ones(2, SHAPE.n_params, dtype=torch.float64)
    torch.testing.assert_close(function_space.function_variance(rows),
                               dense.inverse_quadratic_form(rows))


def test_function_space_ggn_needs_a_prior():
    with pytest.raises(ValueError, match="positive shift"):
        FunctionSpaceGGN(torch.ones(2, 3, dtype=torch.float64), torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize("build", [
    lambda biases: Kronecker(((torch.eye(3), torch.eye(2)),), biases),
    lambda biases: EigenKronecker(((torch.eye(3), torch.eye(2), torch.ones(2, 3)),), biases),
], ids=["kfac", "ekfac"])
def test_kronecker_structures_take_one_bias_flag_per_layer(build):
    assert build(None).has_bias(0) and not build((False,)).has_bias(0)
    with pytest.raises(ValueError, match="2 bias flags for 1 layers"):
        build((False, True))
