"""The Laplace approximation baseline through laplace-torch (Daxberger et al.).

``protocol="paper"`` reproduces the SSLA authors' settings (notes §1, §10.17): sigma_noise fixed
at 1, prior precision "tuned" by 100 Adam steps at lr 1e-3 on the negative log marginal
likelihood from log tau = 1, GLM predictive with std ``sqrt(f_var + 1)``. ``corrected`` starts
from the base network's fitted noise and prior, and maximises the marginal likelihood over
both tau and sigma to convergence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from bench.datasets.regression import RegressionSplits
from bench.harness.errors import require_choice, require_positive
from bench.predictive.densities import Gaussian
from bench.training.regression_network import TrainedNetwork

SUBSETS = ("last_layer", "all")
HESSIANS = ("kron", "diag", "full")


@dataclass
class LaplaceTorchMethod:
    """laplace-torch ``Laplace(model, "regression", subset_of_weights, hessian_structure)``."""

    name: str = "la"
    subset_of_weights: str = "last_layer"
    hessian_structure: str = "kron"
    protocol: str = "paper"
    tune_steps: int = 100
    tune_lr: float = 1e-3
    batch_size: int = 64
    fits_on_base: ClassVar[bool] = True

    def fit(self, data: RegressionSplits, seed: int, base: TrainedNetwork | None = None) -> dict:
        """Fit the curvature of ``base`` on the training data, then tune the hyperparameters."""
        from laplace import Laplace

        if base is None:
            raise ValueError("LaplaceTorchMethod.fit needs the trained base network (base=)")
        require_choice("method.subset_of_weights", self.subset_of_weights, SUBSETS)
        require_choice("method.hessian_structure", self.hessian_structure, HESSIANS)
        require_choice("protocol.name", self.protocol, ("paper", "corrected"))
        if self.tune_steps < 0:
            require_positive("method.tune_steps", self.tune_steps)
        dtype = base.theta.dtype
        net = base.module()
        paper = self.protocol == "paper"
        sigma0 = 1.0 if paper else math.sqrt(base.noise_variance)
        prior0 = 1.0 if paper else base.prior_precision
        self.la = Laplace(net, "regression", subset_of_weights=self.subset_of_weights,
                          hessian_structure=self.hessian_structure, sigma_noise=sigma0,
                          prior_precision=prior0)
        loader = DataLoader(TensorDataset(data.x_train.to(dtype), data.y_train.to(dtype)),
                            batch_size=self.batch_size)
        self.la.fit(loader)
        log_prior = torch.ones(1, dtype=dtype, requires_grad=True)
        if not paper:
            log_prior = torch.tensor([math.log(prior0)], dtype=dtype, requires_grad=True)
        log_sigma = torch.tensor([math.log(sigma0)], dtype=dtype, requires_grad=not paper)
        params = [log_prior] if paper else [log_prior, log_sigma]
        optimizer = torch.optim.Adam(params, lr=self.tune_lr)
        for _ in range(self.tune_steps):
            optimizer.zero_grad()
            loss = -self.la.log_marginal_likelihood(log_prior.exp(), log_sigma.exp())
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            log_marglik = self.la.log_marginal_likelihood(log_prior.exp(), log_sigma.exp())
        return {"prior_precision": float(self.la.prior_precision.mean()),
                "sigma_noise": float(self.la.sigma_noise),
                "log_marginal_likelihood": float(log_marglik)}

    def predict(self, x: Tensor) -> Gaussian:
        """GLM predictive: mean f(x), variance f_var + sigma_noise^2."""
        dtype = next(self.la.model.parameters()).dtype
        mean, f_var = self.la(x.to(dtype), pred_type="glm")
        noise = float(self.la.sigma_noise) ** 2
        return Gaussian(mean.detach().reshape(-1), f_var.detach().reshape(-1) + noise)
