"""Classifier training sets weights too small to be normal floats to zero
(bench.training.subnormal_weights): arithmetic on them is many times slower on x86 CPUs, and a
weight below 1.2e-38 adds nothing a float32 sum beside normal numbers can hold."""

from __future__ import annotations

import torch
from torch import nn

from bench.training.classifier import TrainingStage, train_classifier
from bench.training.stacked_classifier import train_classifiers_together
from bench.training.subnormal_weights import zero_subnormal_weights

SUBNORMAL = 1e-39
STAGE = TrainingStage(epochs=1, lr=0.1, batch_size=4, optimizer="sgd")


def test_subnormal_entries_become_zero_and_normal_ones_stay():
    tiny32, tiny64 = torch.finfo(torch.float32).tiny, torch.finfo(torch.float64).tiny
    weights = torch.tensor([SUBNORMAL, -SUBNORMAL, tiny32, -tiny32, 0.5, 0.0])
    doubles = torch.tensor([1e-310, tiny64, 1e-39], dtype=torch.float64)
    counts = torch.tensor([3, 0])
    zero_subnormal_weights([weights, doubles, counts])
    assert weights.tolist() == [0.0, 0.0, tiny32, -tiny32, 0.5, 0.0]
    assert doubles.tolist() == [0.0, tiny64, 1e-39]
    assert counts.tolist() == [3, 0]


def classifier_with_a_dead_subnormal_weight() -> nn.Module:
    """A linear classifier whose weight on the always-zero first pixel is subnormal: its
    gradient is zero, so without the zeroing SGD leaves it subnormal."""
    net = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
    with torch.no_grad():
        net[1].weight[0, 0] = SUBNORMAL
    return net


def images_with_a_dead_pixel() -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.rand(8, 1, 2, 2, generator=torch.Generator().manual_seed(0))
    images[:, 0, 0, 0] = 0.0
    return images, torch.tensor([0, 1] * 4)


def test_training_one_classifier_leaves_no_subnormal_weight():
    net = classifier_with_a_dead_subnormal_weight()
    images, labels = images_with_a_dead_pixel()
    train_classifier(net, images, labels, [STAGE], generator=torch.Generator().manual_seed(1),
                     dropout_seed=0)
    assert net[1].weight[0, 0].item() == 0.0


def test_training_classifiers_together_leaves_no_subnormal_weight():
    nets = [classifier_with_a_dead_subnormal_weight() for _ in range(2)]
    images, labels = images_with_a_dead_pixel()
    train_classifiers_together(nets, images, labels, [STAGE],
                               generators=[torch.Generator().manual_seed(k) for k in (1, 2)],
                               dropout_seeds=[0, 1])
    assert [net[1].weight[0, 0].item() for net in nets] == [0.0, 0.0]
