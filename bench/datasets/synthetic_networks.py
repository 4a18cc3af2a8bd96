"""Synthetic data of the subnetwork paper (Raha, Khare, Patra), Appendices A and D.

Inputs ``x ~ N_5(0, Sigma)`` with ``Sigma_ij = 0.6^|i-j|``. The mean function ``f_theta0`` is a
fully connected network with 3 hidden layers (tanh, sigmoid, tanh) whose weights and biases are
i.i.d. N(0, 1). Regression: ``y = f_theta0(x) + N(0, 1)``; classification:
``y ~ Bernoulli(sigmoid(f_theta0(x)))``.

Settings (hidden widths of the true network -> the working network):

* ``exp1`` mis-specified: 30, 30, 30 -> 10, 10, 10 (tanh, sigmoid, tanh)   (Appendix A)
* ``exp1`` well-specified: 15, 15, 15 -> the same architecture              (Appendix A)
* ``exp2`` mis-specified: 25, 25, 25 -> one hidden layer of 40, tanh        (Appendix D)
* ``exp2`` well-specified: 15, 15, 15 -> the same architecture              (Appendix D)

Test inputs: Experiment 1 draws 500 points from each of in-distribution ``N(1_5, I_5)``, OOD
``N(6 * 1_5, I_5)`` (printed "N(61_5, I_5)") and mixed ``N(0, 25 I_5)``; Experiment 2 draws from
``N(0, 25 I_5)``.

Readings of ambiguous text (the sizes are keyword arguments of :func:`make_dataset`):

* Appendix A says "2000 samples" and then "We generate 200 training data": we use 200 training
  points (180 fit, 20 validation). Subsampling 200 i.i.d. points from a pool of 2000 has the
  same distribution, so both readings agree on what the model sees.
* Experiment 2's "5000 sample points" are the training data (the bootstrap samples are "each
  of size 5000"); its test-set size is not stated: we use 500, as in Experiment 1.
* "N(0, 25)" in Appendix D is ``N(0, 25 I_5)``, the mixed test domain of Experiment 1.
* Each replication draws a new data-generating network ("generated independently"), then the
  data; everything comes from the one ``torch.Generator`` passed in, in that order (the
  caller goes on drawing from it: training, refit baselines).

:class:`SyntheticNetworkData` is the config node (``subnet_exp1``, ``subnet_exp2``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from bench.harness.errors import require_choice
from bench.models.mlp import MLPShape, init_parameters

INPUT_DIM = 5
INPUT_CORRELATION = 0.6
TRUE_ACTIVATIONS = ("tanh", "sigmoid", "tanh")
TEST_DOMAINS = {"in_distribution": (1.0, 1.0), "ood": (6.0, 1.0), "mixed": (0.0, 25.0)}


@dataclass(frozen=True)
class Setting:
    """Widths of the data-generating and working networks for one experiment setting."""

    true_hidden: tuple[int, ...]
    working_hidden: tuple[int, ...]
    working_activations: tuple[str, ...]

    @property
    def true_network(self) -> MLPShape:
        """The data-generating architecture."""
        return MLPShape((INPUT_DIM, *self.true_hidden, 1), TRUE_ACTIVATIONS)

    @property
    def working_network(self) -> MLPShape:
        """The fitted architecture."""
        return MLPShape((INPUT_DIM, *self.working_hidden, 1), self.working_activations)


SETTINGS = {
    ("exp1", "misspecified"): Setting((30, 30, 30), (10, 10, 10), TRUE_ACTIVATIONS),
    ("exp1", "wellspecified"): Setting((15, 15, 15), (15, 15, 15), TRUE_ACTIVATIONS),
    ("exp2", "misspecified"): Setting((25, 25, 25), (40,), ("tanh",)),
    ("exp2", "wellspecified"): Setting((15, 15, 15), (15, 15, 15), TRUE_ACTIVATIONS),
}
N_TRAIN = {"exp1": 200, "exp2": 5000}


def input_covariance(dim: int = INPUT_DIM, rho: float = INPUT_CORRELATION) -> Tensor:
    """``Sigma_ij = rho^|i-j|`` (float64)."""
    index = torch.arange(dim, dtype=torch.float64)
    return rho ** (index.unsqueeze(0) - index.unsqueeze(1)).abs()


def sample_training_inputs(n: int, generator: torch.Generator) -> Tensor:
    """``n`` draws of ``x ~ N_5(0, Sigma)``, ``[n, 5]``."""
    chol = torch.linalg.cholesky(input_covariance())
    z = torch.randn(n, INPUT_DIM, generator=generator, dtype=torch.float64)
    return z @ chol.T


def sample_test_inputs(domain: str, n: int, generator: torch.Generator) -> Tensor:
    """``n`` draws from ``N(mean * 1_5, variance * I_5)`` for a :data:`TEST_DOMAINS` name."""
    mean, variance = TEST_DOMAINS[require_choice("test_domain", domain, TEST_DOMAINS)]
    z = torch.randn(n, INPUT_DIM, generator=generator, dtype=torch.float64)
    return mean + variance**0.5 * z


@dataclass
class SyntheticDataset:
    """One replication: the true network, its training data and test inputs."""

    true_network: MLPShape
    true_theta: Tensor
    x_train: Tensor
    y_train: Tensor
    x_test: dict[str, Tensor]
    likelihood: str

    def true_mean(self, x: Tensor) -> Tensor:
        """``f_theta0(x)`` (a logit for classification)."""
        return self.true_network.forward_1d(self.true_theta, x)


@dataclass
class SyntheticNetworkData:
    """One setting of the paper's synthetic data; :meth:`sample` draws one replication."""

    name: str
    experiment: str
    specification: str
    likelihood: str = "regression"
    n_train: int | None = None
    n_test: int = 500

    @property
    def setting(self) -> Setting:
        """Architectures of the data-generating and working networks."""
        key = (self.experiment, self.specification)
        return SETTINGS[require_choice("dataset.(experiment, specification)", key, SETTINGS)]

    def sample(self, generator: torch.Generator) -> SyntheticDataset:
        """A fresh data-generating network, its training data and test inputs."""
        return make_dataset(self.experiment, self.specification, self.likelihood, generator,
                            n_train=self.n_train, n_test=self.n_test)


def make_dataset(experiment: str, specification: str, likelihood: str,
                 generator: torch.Generator, n_train: int | None = None,
                 n_test: int = 500, noise_variance: float = 1.0) -> SyntheticDataset:
    """Draw the true network, ``n_train`` training pairs, then ``n_test`` inputs per domain.

    Experiment 1 has the three domains of Appendix A; Experiment 2 only ``mixed``.
    """
    setting = SETTINGS[require_choice("setting", (experiment, specification), SETTINGS)]
    require_choice("likelihood", likelihood, ("regression", "classification"))
    network = setting.true_network
    theta0 = init_parameters(network, generator, torch.float64, scheme="standard_normal")
    n_train = N_TRAIN[experiment] if n_train is None else n_train
    x = sample_training_inputs(n_train, generator)
    f = network.forward_1d(theta0, x)
    if likelihood == "regression":
        y = f + noise_variance**0.5 * torch.randn(n_train, generator=generator,
                                                  dtype=torch.float64)
    else:
        y = torch.bernoulli(torch.sigmoid(f), generator=generator)
    domains = list(TEST_DOMAINS) if experiment == "exp1" else ["mixed"]
    x_test = {name: sample_test_inputs(name, n_test, generator) for name in domains}
    return SyntheticDataset(network, theta0, x, y, x_test, likelihood)
