"""The flat backend against curvlinops-for-pytorch 3.0.1 operators, and the curvlinops backend
against the flat one, on a small MSE MLP in float64.

curvlinops' conventions for ``MSELoss``: the loss is ``c sum_i (f_i - y_i)^2`` with ``c = 1``
(``"sum"``) or ``1 / n`` (``"mean"``), so its GGN is ``2 c`` times our unit-noise GGN; K-FAC's
input factor is the mean over the data and its gradient factor carries the ``2 c``.
"""

from __future__ import annotations

import pytest
import torch
from curvlinops import GGNLinearOperator, KFACLinearOperator
from torch import nn

from bench.curvature.curvlinops_backend import CurvlinopsBackend
from bench.curvature.flat import FlatBackend
from bench.curvature.structures import STRUCTURES, empirical_fisher_weights, ggn
from bench.models.mlp import flat_parameters, shape_of

N = 20
CURVLINOPS_SEED = 2147483647  # KFACLinearOperator's default label-sampling seed


def _problem():
    torch.manual_seed(0)  # nn.Linear's initialisation
    module = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 3), nn.Tanh(),
                           nn.Linear(3, 1)).double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, 3, generator=g, dtype=torch.float64)
    y = torch.randn(N, 1, generator=g, dtype=torch.float64)
    return module, FlatBackend(shape_of(module, "tanh"), flat_parameters(module)), x, y


def _eye(q: int) -> torch.Tensor:
    return torch.eye(q, dtype=torch.float64)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_flat_dense_and_diagonal_ggn_match_ggn_linear_operator(reduction):
    module, flat, x, y = _problem()
    operator = GGNLinearOperator(module, nn.MSELoss(reduction=reduction),
                                 list(module.parameters()), [(x, y)], check_deterministic=False)
    factor = 2.0 if reduction == "sum" else 2.0 / N
    theirs = operator @ _eye(operator.shape[1])
    torch.testing.assert_close(factor * ggn(flat, x, "dense").to_dense(), theirs)
    torch.testing.assert_close(factor * ggn(flat, x, "diag").diagonal(), theirs.diagonal())


def _kfac(module, x, y, **options) -> torch.Tensor:
    options = {"fisher_type": "type-2", "loss": "sum", **options}
    loss = nn.MSELoss(reduction=options.pop("loss"))
    operator = KFACLinearOperator(module, loss, list(module.parameters()), [(x, y)],
                                  separate_weight_and_bias=False, check_deterministic=False,
                                  **options)
    return operator @ _eye(operator.shape[1])


@pytest.mark.parametrize(("reduction", "factor"), [("sum", 2.0), ("mean", 2.0 / N)])
@pytest.mark.parametrize("kfac_approx", ["expand", "reduce"])
def test_flat_kfac_matches_kfac_linear_operator_type_2(reduction, factor, kfac_approx):
    module, flat, x, y = _problem()
    theirs = _kfac(module, x, y, loss=reduction, kfac_approx=kfac_approx)
    torch.testing.assert_close(factor * ggn(flat, x, "kfac").to_dense(), theirs)


def test_flat_kfac_with_empirical_fisher_weights_matches_the_empirical_kfac():
    module, flat, x, y = _problem()
    # (f - y)^2 is a Gaussian negative log-likelihood with sigma^2 = 1/2 (up to a constant).
    residuals = y[:, 0] - module(x)[:, 0].detach()
    weights = empirical_fisher_weights(residuals, 0.5)
    theirs = _kfac(module, x, y, fisher_type="empirical")
    torch.testing.assert_close(2.0 * ggn(flat, x, "kfac", weights).to_dense(), theirs)


def test_flat_kfac_with_the_sampled_labels_matches_the_monte_carlo_kfac():
    module, flat, x, y = _problem()
    samples = 3
    # curvlinops draws y ~ N(f, 1/2) per sample; the loss gradient is then -sqrt(2) eps.
    generator = torch.Generator().manual_seed(CURVLINOPS_SEED)
    eps = torch.stack([torch.randn(N, 1, generator=generator, dtype=torch.float64)
                       for _ in range(samples)])
    weights = (eps[..., 0] ** 2).mean(0)
    theirs = _kfac(module, x, y, fisher_type="mc", mc_samples=samples)
    torch.testing.assert_close(2.0 * ggn(flat, x, "kfac", weights).to_dense(), theirs)


@pytest.mark.parametrize("weighted", [False, True])
def test_curvlinops_backend_gives_the_flat_backends_structures(weighted):
    module, flat, x, _ = _problem()
    backend = CurvlinopsBackend(module)
    weights = None
    if weighted:
        weights = torch.rand(N, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for (a, g), (a_flat, g_flat) in zip(backend.kronecker_factors(x, weights),
                                        flat.kronecker_factors(x, weights), strict=True):
        torch.testing.assert_close(a, a_flat)
        torch.testing.assert_close(g, g_flat)
    rhs = torch.randn(2, 35, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    for name in STRUCTURES:
        ours = ggn(flat, x, name, weights).scaled(3.0, 0.2)
        theirs = ggn(backend, x, name, weights).scaled(3.0, 0.2)
        assert type(theirs) is type(ours)
        torch.testing.assert_close(theirs.logdet(), ours.logdet())
        torch.testing.assert_close(theirs.solve(rhs), ours.solve(rhs))
        torch.testing.assert_close(theirs.to_dense(), ours.to_dense())
