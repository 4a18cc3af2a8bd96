"""Categorical predictive against hand computations."""

import math

import torch

from bench.predictive.categorical import Categorical


def test_entropy_log_prob_and_confidence_by_hand():
    probs = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    predictive = Categorical(probs)
    assert torch.allclose(predictive.entropy(), torch.tensor(
        [math.log(2), -(0.2 * math.log(0.2) + 0.3 * math.log(0.3) + 0.5 * math.log(0.5))],
        dtype=torch.float64))
    assert torch.allclose(predictive.log_prob(torch.tensor([1, 2])),
                          torch.tensor([math.log(0.5), math.log(0.5)], dtype=torch.float64))
    assert predictive.confidence().tolist() == [0.5, 0.5]
    assert predictive.predicted_class().tolist()[1] == 2


def test_mean_of_draws_and_from_logits():
    draws = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    assert Categorical.mean_of(draws).probs.tolist() == [[0.5, 0.5]]
    uniform = Categorical.from_logits(torch.zeros(1, 4)).probs
    assert torch.allclose(uniform, torch.full((1, 4), 0.25))
