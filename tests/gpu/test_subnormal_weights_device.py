"""Subnormal weights are zeroed on the CPU only (bench.training.subnormal_weights): a CUDA
network's weights are left as they are."""

from __future__ import annotations

import pytest
import torch

from bench.training.subnormal_weights import zero_subnormal_weights


@pytest.mark.gpu
def test_cuda_weights_keep_their_subnormal_values():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    weights = torch.full((3,), 1e-39, device="cuda")
    zero_subnormal_weights([weights])
    assert weights.cpu().tolist() == pytest.approx([1e-39] * 3, rel=1e-6, abs=0.0)
