"""MAP: the trained network's own softmax, behind the method contract.

The baseline every uncertainty method of a classification table is compared with. ``fit``
keeps the trained network ``base`` (a module or an object holding one in ``.module``, such as
a stored network); ``predict(x)`` is ``softmax(f(x; theta_MAP))``, in batches of
``prediction.batch_size`` on ``device``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from bench.datasets.training_set import TrainingSet
from bench.methods.laplace.classification import network_of
from bench.methods.settings import PredictionSettings, settings_node
from bench.predictive.categorical import Categorical


def batched_logits(network: nn.Module, x: Tensor, batch_size: int, device: str) -> Tensor:
    """``network(x)`` in eval mode and without gradients, ``batch_size`` rows at a time, the
    inputs moved to ``device``; the logits stay on ``device``."""
    network.eval()
    with torch.no_grad():
        return torch.cat([network(x[i:i + batch_size].to(device))
                          for i in range(0, len(x), batch_size)])


@dataclass
class MapClassifier:
    """The MAP network's softmax predictive."""

    name: str = "MAP"
    prediction: PredictionSettings = PredictionSettings(batch_size=1024)
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.prediction = settings_node(PredictionSettings, self.prediction)

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict:
        """Keep the trained network ``base`` (on ``device``); nothing is fitted."""
        if base is None:
            raise ValueError("MapClassifier.fit needs the trained network (base=)")
        self.network = network_of(base).to(self.device).eval()
        return {}

    def predict(self, x: Tensor) -> Categorical:
        """``softmax(f(x; theta_MAP))`` per row of ``x``."""
        return Categorical.from_logits(batched_logits(self.network, x, self.prediction.batch_size,
                                                      self.device))

    def stored_tensors(self) -> dict[str, Tensor]:
        """The network's parameters and buffers."""
        return dict(self.network.state_dict())
