"""Low-rank Laplace over all weights (Figure 8's low-rank structure) against a dense reference
on a tiny network: the GGN's top eigenpairs, the posterior's function-space covariance and the
log determinant of its precision."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from bench.curvature.top_eigenpairs import top_ggn_eigenpairs
from bench.harness.rng import make_generator

pytest.importorskip("laplace")

RANK, PRIOR = 4, 0.7


@pytest.fixture(scope="module")
def problem():
    """A 3-5-3 tanh MLP (38 parameters), 24 points, 3 classes, float64."""
    generator = make_generator(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 3)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=torch.float64))
    x = torch.randn(24, 3, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (24,), generator=generator)
    return model, x, y, DataLoader(TensorDataset(x, y), batch_size=10)


def dense_ggn(model, x):
    """``sum_n J_n^T (diag p_n - p_n p_n^T) J_n`` by autograd, ``[P, P]``."""
    params = dict(model.named_parameters())

    def logits(values, xi):
        return torch.func.functional_call(model, values, (xi.unsqueeze(0),)).squeeze(0)

    jac = torch.func.vmap(torch.func.jacrev(logits), in_dims=(None, 0))(params, x)
    rows = torch.cat([jac[name].reshape(len(x), 3, -1) for name in params], dim=2)
    probs = torch.softmax(model(x), dim=1).detach()
    hessians = torch.diag_embed(probs) - probs.unsqueeze(2) * probs.unsqueeze(1)
    return torch.einsum("nkp,nkl,nlq->pq", rows, hessians, rows)


def test_top_eigenpairs_equal_the_dense_ggn_s(problem):
    model, x, _, loader = problem
    values, vectors = top_ggn_eigenpairs(model, loader, RANK, make_generator(1), tolerance=0)
    dense_values, dense_vectors = torch.linalg.eigh(dense_ggn(model, x))
    torch.testing.assert_close(values, dense_values.flip(0)[:RANK], rtol=1e-8, atol=1e-10)
    top = dense_vectors.flip(1)[:, :RANK]
    torch.testing.assert_close(vectors @ vectors.T, top @ top.T, rtol=1e-6, atol=1e-8)


def test_a_rank_the_ggn_cannot_have_is_refused(problem):
    model, _, _, loader = problem
    with pytest.raises(ValueError, match="rank k=38"):
        top_ggn_eigenpairs(model, loader, 38, make_generator(1))


def test_the_posterior_is_the_truncated_ggn_plus_the_prior(problem):
    from bench.methods.laplace.lowrank_laplace import GGNLowRankLaplace

    model, x, _, loader = problem
    la = GGNLowRankLaplace(model, "classification", prior_precision=PRIOR,
                           backend_kwargs={"low_rank": RANK, "seed": 3})
    la.fit(loader)
    dense_values, dense_vectors = torch.linalg.eigh(dense_ggn(model, x))
    top = dense_vectors.flip(1)[:, :RANK]
    truncated = top @ torch.diag(dense_values.flip(0)[:RANK]) @ top.T
    precision = truncated + PRIOR * torch.eye(len(truncated), dtype=torch.float64)
    torch.testing.assert_close(la.log_det_posterior_precision, torch.logdet(precision))
    params = dict(model.named_parameters())
    jac = torch.func.vmap(torch.func.jacrev(
        lambda values, xi: torch.func.functional_call(model, values, (xi.unsqueeze(0),))
        .squeeze(0)), in_dims=(None, 0))(params, x[:5])
    rows = torch.cat([jac[name].reshape(5, 3, -1) for name in params], dim=2)
    expected = torch.einsum("nkp,pq,nlq->nkl", rows, torch.linalg.inv(precision), rows)
    torch.testing.assert_close(la.functional_variance(rows.detach()), expected)


def test_eigenpairs_on_the_first_points_are_scaled_to_the_full_sum(problem):
    """data_size=12 of 24 points (batches of 10: one whole batch and 2 points of the next):
    the eigenvalues are twice the first 12 points' GGN's."""
    from bench.methods.laplace.lowrank_laplace import GGNEigenpairs

    model, x, _, loader = problem
    backend = GGNEigenpairs(model, "classification", low_rank=RANK, seed=3, data_size=12)
    vectors, values, _ = backend.eig_lowrank(loader)
    dense_values = torch.linalg.eigvalsh(dense_ggn(model, x[:12])).flip(0)[:RANK]
    torch.testing.assert_close(values, 2 * dense_values, rtol=1e-6, atol=1e-8)
    assert vectors.shape == (38, RANK)


def test_frozen_parameters_stay_outside_the_posterior(problem):
    """The first layer's bias frozen (as the WRN's BatchNorm under frozen_batchnorm): the mean,
    the eigenvectors and the log det are those of the 33 trainable parameters, and the
    marginal likelihood (which laplace-torch's own fit broke: a 38-entry mean against a
    33-entry prior) is the dense one over them."""
    from bench.methods.laplace.lowrank_laplace import GGNLowRankLaplace

    model, x, y, loader = problem
    frozen = copy.deepcopy(model)
    frozen[0].bias.requires_grad_(False)
    la = GGNLowRankLaplace(frozen, "classification", prior_precision=PRIOR,
                           backend_kwargs={"low_rank": RANK, "seed": 3})
    la.fit(loader)
    trainable = [*range(15), *range(20, 38)]  # parameters() order: weight 0-14, bias 15-19
    dense_values, dense_vectors = torch.linalg.eigh(dense_ggn(model, x)[trainable][:, trainable])
    top = dense_vectors.flip(1)[:, :RANK]
    precision = (top @ torch.diag(dense_values.flip(0)[:RANK]) @ top.T
                 + PRIOR * torch.eye(len(trainable), dtype=torch.float64))
    assert la.mean.shape == (33,) and la.H[0].shape == (33, RANK)
    torch.testing.assert_close(la.log_det_posterior_precision, torch.logdet(precision))
    nll = torch.nn.functional.cross_entropy(model(x), y, reduction="sum")
    mean = torch.cat([p.reshape(-1) for p in model.parameters()])[trainable]
    expected = -nll - 0.5 * (torch.logdet(precision) - len(trainable) * torch.log(
        torch.tensor(PRIOR, dtype=torch.float64)) + PRIOR * mean @ mean)
    torch.testing.assert_close(la.log_marginal_likelihood(), expected.detach())
