"""The Nesterov LeNet diagnosis (bench.benchmarks.nesterov_lenet) on tiny generated data: the
variants share the first step where they should, and the probe finds dead units."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from bench.benchmarks.nesterov_lenet import VARIANTS, Variant, initial_network, probe, run_variant


def tiny_data(n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return (torch.rand(n, 1, 28, 28, generator=generator),
            torch.randint(0, 10, (n,), generator=generator))


def test_variants_from_the_same_weights_and_batches_share_their_first_loss():
    images, labels = tiny_data()
    base, clipped, he = (run_variant(v, images, labels, seed=6, steps=2, probe_steps={2})
                         for v in (VARIANTS[0], Variant("clip", clip=1.0),
                                   Variant("he", he_init=True)))
    assert base.losses[0] == clipped.losses[0] != he.losses[0]
    assert base.grad_norms[0] == clipped.grad_norms[0]
    assert set(base.probes) == {0, 2} and base.non_finite_step is None


def test_probe_counts_a_unit_dead_when_it_is_zero_on_every_image():
    network = initial_network(6, he_init=False)
    with torch.no_grad():
        for layer in network.modules():
            if isinstance(layer, nn.Conv2d | nn.Linear):
                layer.weight.zero_()
                layer.bias.fill_(-1.0)
    measured = probe(network, tiny_data()[0])
    assert set(measured["dead_relu"].values()) == {1.0}
    assert measured["logit_sd"] == 0.0
    # Every logit equals the last bias: the softmax is uniform over the 10 classes.
    assert measured["confidence"] == pytest.approx(1 / 10)
