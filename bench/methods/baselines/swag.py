"""SWAG (Maddox et al., 2019) from a trained MAP network, as Laplace Redux runs it (notes §3).

Training: from a copy of the base network, ``epochs`` epochs of constant-lr SGD (``lr`` 1e-2,
``momentum`` 0.9, ``weight_decay`` 3e-4, batch 512) through
:func:`bench.training.classifier.train_classifier` (the one training loop), one snapshot
``theta_i`` of all parameters at the end of every epoch: running mean, running second moment
and the deviation matrix ``D`` whose rows are ``theta_i - mean_i`` (the mean just after
snapshot ``i``) of the last ``rank`` snapshots (:func:`update_moments`). The moments are a
stored state (:func:`bench.harness.state_store.stored_state`, kind ``swag``), checkpointed after
every epoch (network, optimizer, minibatch and dropout generators, moments) and resumed exactly.
Minibatches go through the training set's augmentation when it has one (CIFAR-10: crop and
flip), as in the authors' loader.

Predictive: the mean of ``n_samples`` softmaxes at ``theta_s = mean + sqrt(scale) * (sigma *
eps_1 + D^T eps_2 / sqrt(K - 1))`` (:func:`sample_parameters`), ``sigma^2 = second - mean^2``
clamped at 1e-30, ``K`` the number of rows of ``D``; the draws come from a generator seeded by
``sample_seed`` at the start of every ``predict`` call.

BatchNorm (``bn_refresh``): each sample's BN statistics are recomputed by a pass over the
training inputs (:func:`refresh_batch_norm`; augmented as in training when the training set has
an augmentation, the draws of sample ``s`` from a generator seeded with
``derived_seed([sample_seed, s])``) and kept per sample. The authors' code (notes
10.3) stores only the BN momenta per sample, so every sample there predicts with the
statistics of the last refresh. Here only the BN layers are in train mode during the pass
(dropout off: the statistics of the network as it predicts, and no random draw), whereas
SWAG's ``bn_update`` runs the whole network in train mode. Without ``bn_refresh`` the
samples use the running statistics of the last SWAG iterate.

Own code rather than torch-uncertainty's SWAG wrapper: the seeds of the minibatch order,
dropout and sample draws are ours, the moments go through the state store (recipe hash,
per-epoch checkpoints, exact resume), it is one training loop with the other methods, and no
Lightning dependency is added.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from bench.datasets.augmentation import Augment
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.rng import derived_seed, make_generator
from bench.harness.state_store import Checkpoints, stored_state
from bench.methods.baselines.map_classifier import batched_logits
from bench.methods.laplace.classification import network_of
from bench.methods.settings import PredictionSettings, settings_node
from bench.predictive.categorical import Categorical
from bench.training.classifier import ClassifierCheckpoint, TrainingStage, train_classifier

MOMENT_KEYS = ("mean", "second_moment", "deviations")
BUFFER_PREFIX = "buffer."
# Minibatch-order and dropout streams of the SWAG run, apart from the MAP's (0, 1, 2).
BATCH_STREAM, DROPOUT_STREAM = 11, 12


def update_moments(moments: dict[str, Any] | None, theta: Tensor, rank: int) -> dict[str, Any]:
    """The SWAG moments after one more snapshot ``theta [M]``: ``count``, running ``mean`` and
    ``second_moment``, and ``deviations [K, M]``, the rows ``theta_i - mean_i`` of the last
    ``K <= rank`` snapshots, oldest first (``moments=None``: before the first snapshot)."""
    theta = theta.detach()
    if moments is None:
        return {"count": 1, "mean": theta.clone(), "second_moment": theta.square(),
                "deviations": torch.zeros_like(theta)[None]}
    n = moments["count"]
    mean = moments["mean"] * (n / (n + 1)) + theta / (n + 1)
    second = moments["second_moment"] * (n / (n + 1)) + theta.square() / (n + 1)
    deviations = torch.cat([moments["deviations"], (theta - mean)[None]])[-rank:]
    return {"count": n + 1, "mean": mean, "second_moment": second, "deviations": deviations}


def sample_parameters(mean: Tensor, second_moment: Tensor, deviations: Tensor, scale: float,
                      generator: torch.Generator, n: int = 1) -> Tensor:
    """``n`` SWAG draws ``[n, M]``: ``mean + sqrt(scale) (sigma * eps_1 + eps_2 D / sqrt(K-1))``
    with ``eps_1 [n, M]`` then ``eps_2 [n, K]`` standard normal from ``generator``; their
    covariance is ``scale (diag(sigma^2) + D^T D / (K - 1))``."""
    k = len(deviations)
    if k < 2:
        raise ValueError("a SWAG sample needs at least two snapshots (K - 1 > 0)")
    sigma = (second_moment - mean.square()).clamp_min(1e-30).sqrt()
    eps_1 = torch.randn(n, mean.numel(), generator=generator, device=mean.device,
                        dtype=mean.dtype)
    eps_2 = torch.randn(n, k, generator=generator, device=mean.device, dtype=mean.dtype)
    return mean + scale ** 0.5 * (sigma * eps_1 + eps_2 @ deviations / (k - 1) ** 0.5)


def refresh_batch_norm(network: nn.Module, inputs: Tensor, batch_size: int,
                       device: str | torch.device, augment: Augment | None = None,
                       generator: torch.Generator | None = None) -> None:
    """Recompute the running mean and (unbiased) variance of every BatchNorm layer of
    ``network`` from one pass over ``inputs``, batches weighted by their size (one batch
    holding every input gives exactly the inputs' statistics), each batch through
    ``augment(batch, generator)`` when given. Only the BN layers are in train mode during the
    pass; the network is left in eval mode."""
    norms = [m for m in network.modules()
             if isinstance(m, _BatchNorm) and m.track_running_stats]
    network.eval()
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.train()
    seen = 0
    with torch.no_grad():
        for start in range(0, len(inputs), batch_size):
            batch = inputs[start:start + batch_size].to(device)
            if augment is not None:
                batch = augment(batch, generator)
            for norm in norms:
                norm.momentum = len(batch) / (seen + len(batch))
            network(batch)
            seen += len(batch)
    for norm, momentum in zip(norms, momenta, strict=True):
        norm.momentum = momentum
    network.eval()


def base_identity(base: Any) -> str:
    """What the SWAG run starts from, for its recipe: the stored network's recipe hash, else
    the SHA-256 of the network's parameters and buffers."""
    if getattr(base, "recipe_hash", None) is not None:
        return f"recipe:{base.recipe_hash}"
    digest = hashlib.sha256()
    for name, tensor in network_of(base).state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return f"weights:{digest.hexdigest()[:16]}"


@dataclass
class SWAG:
    """SWAG's Gaussian (diagonal plus rank-``rank``) around the SGD iterates from the MAP."""

    name: str = "SWAG"
    epochs: int = 40
    lr: float = 1e-2
    momentum: float = 0.9
    weight_decay: float = 3e-4
    batch_size: int = 512
    rank: int = 40
    scale: float = 0.5
    n_samples: int = 30
    bn_refresh: bool = False
    sample_seed: int = 711
    prediction: PredictionSettings = PredictionSettings(batch_size=1024)
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.prediction = settings_node(PredictionSettings, self.prediction)
        self.stage().check("method")
        for key in ("rank", "n_samples", "sample_seed"):
            value = getattr(self, key)
            smallest = 0 if key == "sample_seed" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < smallest:
                raise ConfigError(f"method.{key}={value!r} is not valid; it must be an integer "
                                  f">= {smallest}")
        if self.epochs < 2:
            raise ConfigError(f"method.epochs={self.epochs!r} is not valid; SWAG needs at least "
                              "2 snapshots (one per epoch)")
        if isinstance(self.scale, bool) or not isinstance(self.scale, int | float) \
                or not self.scale > 0:
            raise ConfigError(f"method.scale={self.scale!r} is not valid; it must be a positive "
                              "number")
        if not isinstance(self.bn_refresh, bool):
            raise ConfigError(f"method.bn_refresh={self.bn_refresh!r} is not valid; true or "
                              "false")

    def stage(self) -> TrainingStage:
        """The constant-lr SGD stage the snapshots are taken along."""
        return TrainingStage(epochs=self.epochs, lr=self.lr, batch_size=self.batch_size,
                             optimizer="sgd", momentum=self.momentum,
                             weight_decay=self.weight_decay)

    def recipe(self, data: TrainingSet, base: Any) -> dict:
        """Everything that decides the stored moments except the seed."""
        return {"stage": self.stage().to_dict(), "rank": self.rank, "data": data.identity(),
                "base": base_identity(base)}

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict:
        """Load or train the SWAG moments of ``base`` on ``data``; returns the recipe hash,
        whether the state was reused, the number of snapshots and the rank used."""
        if base is None:
            raise ValueError("SWAG.fit needs the trained network (base=)")
        self.network = copy.deepcopy(network_of(base)).to(self.device)

        def train(checkpoints: Checkpoints) -> tuple[dict, list[dict]]:
            return self._train(data, seed, checkpoints)

        stored = stored_state("swag", data.name, self.recipe(data, base), seed, train,
                              data.results_dir)
        self.state = {k: v.to(self.device) for k, v in stored.state.items()
                      if isinstance(v, Tensor)}
        self.network.load_state_dict({k[len(BUFFER_PREFIX):]: v for k, v in self.state.items()
                                      if k.startswith(BUFFER_PREFIX)}, strict=False)
        self.network.eval()
        self.refresh_inputs = data.train_inputs if self.bn_refresh else None
        self.refresh_augment = data.augmenter()
        self.refreshed: dict[tuple, dict[str, Tensor]] = {}
        return {"recipe_hash": stored.recipe_hash, "state_reused": stored.reused,
                "snapshots": int(stored.state["count"]),
                "rank_used": len(self.state["deviations"])}

    def _train(self, data: TrainingSet, seed: int, checkpoints: Checkpoints
               ) -> tuple[dict, list[dict]]:
        saved = checkpoints.load()
        resume, moments = None, None
        if saved is not None:
            resume = ClassifierCheckpoint.from_dict(saved["training"])
            moments = {k: v.to(self.device) if isinstance(v, Tensor) else v
                       for k, v in saved["moments"].items()}

        def snapshot(checkpoint: ClassifierCheckpoint) -> None:
            nonlocal moments
            moments = update_moments(moments, parameters_to_vector(self.network.parameters()),
                                     self.rank)
            checkpoints.save({"training": checkpoint.to_dict(), "moments": moments})

        history = train_classifier(
            self.network, data.train_inputs, data.train_labels, [self.stage()],
            generator=make_generator(derived_seed(seed, spawn_key=(BATCH_STREAM,))),
            dropout_seed=derived_seed(seed, spawn_key=(DROPOUT_STREAM,)),
            on_epoch_end=snapshot, resume=resume, desc=f"SWAG {data.name} seed {seed}",
            augment=data.augmenter())
        buffers = {f"{BUFFER_PREFIX}{name}": tensor.detach().clone()
                   for name, tensor in self.network.named_buffers()}
        return moments | buffers, history

    def predict(self, x: Tensor) -> Categorical:
        """The mean over ``n_samples`` SWAG draws of ``softmax(f(x; theta_s))``."""
        generator = make_generator(self.sample_seed, self.device)
        total = None
        for s in range(self.n_samples):
            theta = sample_parameters(*(self.state[k] for k in MOMENT_KEYS), self.scale,
                                      generator)[0]
            vector_to_parameters(theta, self.network.parameters())
            if self.bn_refresh:
                self._refresh(s)
            probs = torch.softmax(batched_logits(self.network, x, self.prediction.batch_size,
                                                 self.device), dim=-1)
            total = probs if total is None else total + probs
        return Categorical(total / self.n_samples)

    def _refresh(self, sample: int) -> None:
        """Sample ``sample``'s BN statistics: recomputed once, then reused by later calls."""
        key = (self.sample_seed, float(self.scale), sample)
        if key not in self.refreshed:
            generator = make_generator(derived_seed([self.sample_seed, sample]))
            refresh_batch_norm(self.network, self.refresh_inputs, self.batch_size, self.device,
                               self.refresh_augment, generator)
            self.refreshed[key] = {name: b.clone() for name, b in self.network.named_buffers()}
        self.network.load_state_dict(self.refreshed[key], strict=False)

    def stored_tensors(self) -> dict[str, Tensor]:
        """Mean, second moment and deviation matrix ((K + 2) M numbers), plus the network's
        buffers (BatchNorm statistics of the last iterate; none for LeNet)."""
        return dict(self.state)
