"""MapClassifier: the stored network's softmax, in batches, with one-line config errors."""

import pytest
import torch
from torch import nn

from bench.harness.errors import ConfigError
from bench.methods.baselines.map_classifier import MapClassifier


def test_predict_is_the_softmax_of_the_network_in_any_batching():
    network = nn.Linear(4, 3)
    x = torch.randn(7, 4, generator=torch.Generator().manual_seed(0))
    method = MapClassifier(prediction={"batch_size": 3})
    method.fit(None, seed=0, base=network)
    expected = torch.softmax(network(x), dim=1)
    assert torch.allclose(method.predict(x).probs, expected.detach(), atol=1e-6)
    assert set(method.stored_tensors()) == {"weight", "bias"}


def test_bad_batch_size_names_the_key():
    with pytest.raises(ConfigError, match="^method.prediction.batch_size=0 is not valid; it "
                       "must be a positive integer$"):
        MapClassifier(prediction={"batch_size": 0})
