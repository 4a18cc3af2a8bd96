"""symmetric_eigh: the plain eigh where it converges, a shifted retry where LAPACK gives up."""

import torch

from bench.curvature.linalg import symmetric_eigh


def low_rank_factor() -> torch.Tensor:
    x = torch.randn(40, 200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return x.T @ x / 40


def test_converging_case_is_the_plain_eigh():
    factor = low_rank_factor()
    values, vectors = symmetric_eigh(factor)
    expected = torch.linalg.eigh(factor)
    assert torch.equal(values, expected.eigenvalues) and torch.equal(vectors, expected.eigenvectors)


def test_retry_after_a_failed_eigh_reconstructs_the_matrix(monkeypatch):
    factor = low_rank_factor()
    real_eigh = torch.linalg.eigh
    calls = []

    def fails_once(matrix):
        calls.append(matrix)
        if len(calls) == 1:
            raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")
        return real_eigh(matrix)

    monkeypatch.setattr(torch.linalg, "eigh", fails_once)
    values, vectors = symmetric_eigh(factor)
    assert len(calls) == 2
    rebuilt = vectors @ torch.diag(values) @ vectors.T
    assert torch.allclose(rebuilt, factor, atol=1e-9)
    assert values.min() > -1e-8 and int((values > 1e-8).sum()) == 40
