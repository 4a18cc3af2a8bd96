"""How laplace-torch's regression Laplace starts and tunes its hyperparameters, by protocol
name (``protocol.name``, looked up once: :data:`LA_PROTOCOLS`).

* ``paper`` (:class:`PaperTuning`): the SSLA authors' lightning-uq-box settings: sigma_noise
  fixed at 1, log tau from 1 (a float32 tensor, lightning-uq-box's ``torch.ones(1)``), the
  value after the last Adam update never handed to the Laplace object;
* ``corrected`` (:class:`CorrectedTuning`): start from the base network's fitted noise and
  prior, tune log tau and log sigma together, keep the values after every update.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import Tensor

from bench.training.regression_network import TrainedNetwork


class PaperTuning:
    """The authors' tuning: tau alone from log tau = 1, sigma fixed at 1, last update lost."""

    keeps_last_update: ClassVar[bool] = False

    def start(self, base: TrainedNetwork) -> tuple[float, float]:
        """``(sigma0, prior0)``: both 1."""
        return 1.0, 1.0

    def log_hyperparameters(self, sigma0: float, prior0: float, dtype: torch.dtype
                            ) -> tuple[Tensor, Tensor, list[Tensor]]:
        """``(log_prior, log_sigma, trained)``: log tau a float32 one (lightning-uq-box's
        ``torch.ones(1)``, the default dtype of the authors' runs), log sigma fixed."""
        log_prior = torch.ones(1, dtype=torch.float32, requires_grad=True)
        log_sigma = torch.tensor([math.log(sigma0)], dtype=dtype, requires_grad=False)
        return log_prior, log_sigma, [log_prior]

    def updates_kept(self, steps: int) -> int:
        """The Adam updates the predicting values reflect: all but the last."""
        return max(steps - 1, 0)


class CorrectedTuning:
    """Tau and sigma from the base network's values, both tuned, every update kept."""

    keeps_last_update: ClassVar[bool] = True

    def start(self, base: TrainedNetwork) -> tuple[float, float]:
        """``(sigma0, prior0)``: the base network's noise sd and prior precision."""
        return math.sqrt(base.noise_variance), base.prior_precision

    def log_hyperparameters(self, sigma0: float, prior0: float, dtype: torch.dtype
                            ) -> tuple[Tensor, Tensor, list[Tensor]]:
        """``(log_prior, log_sigma, trained)`` in ``dtype``, both trained."""
        log_prior = torch.tensor([math.log(prior0)], dtype=dtype, requires_grad=True)
        log_sigma = torch.tensor([math.log(sigma0)], dtype=dtype, requires_grad=True)
        return log_prior, log_sigma, [log_prior, log_sigma]

    def updates_kept(self, steps: int) -> int:
        """Every update."""
        return steps


LA_PROTOCOLS: dict[str, PaperTuning | CorrectedTuning] = {"paper": PaperTuning(),
                                                          "corrected": CorrectedTuning()}
