"""Laplace with online marginal-likelihood training (Laplace Redux Table 2) behind the method
contract: the network and its prior precision are trained together from scratch, then
laplace-torch's Laplace approximation around the restored best epoch predicts.

``fit(data, seed)``:

1. the network ``model`` is built from the fit seed's network stream and trained by
   :func:`bench.methods.laplace.marglik_training.train_online_marglik` with laplace-torch's evidence
   of ``(subset_of_weights, hessian_structure, backend)``
   (:func:`bench.methods.laplace.marglik.laplace_evidence`). Defaults are the notes' section
   2 call of laplace-torch's ``marglik_training``: 250 epochs, Adam 1e-3 with a per-step
   cosine to 1e-6, batch 512, layerwise prior from delta_0 = 30, 100 hyper-steps at lr 1.0
   after every epoch, GGN by AsdlGGN, best-marglik epoch restored. The trained weights and
   prior precision are a stored state (:func:`bench.harness.state_store.stored_state`, kind
   ``online_marglik``), checkpointed after every epoch: a killed run resumes at its last epoch;
2. as ``marglik_training`` ends, a fresh ``Laplace`` with the learned prior precision is
   fitted on the whole training set (no post-hoc tuning).

``predict(x)``: the GLM predictive with Monte-Carlo link (``n_samples`` = 100) as Redux's
``uq.py --link_approx mc`` (:func:`bench.methods.laplace.classification.laplace_predictive`),
its draws from a generator seeded with ``sample_seed`` (the authors' evaluation seed 711) at
every call. laplace-torch computes the all-weights Jacobians with torch.func for the ASDL
backends, about 70 MB per image for the LeNet: ``prediction.batch_size`` bounds the memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError, require_choice
from bench.harness.state_store import Checkpoints, stored_state
from bench.methods.baselines.scratch_training import (
    GLOBAL_STREAM,
    MINIBATCH_STREAM,
    require_count,
    stream_seed,
    training_tensors,
)
from bench.methods.laplace.la_backends import BACKENDS, NOT_STATE, train_loader
from bench.methods.laplace.la_predictives import (
    LINK_APPROXIMATIONS,
    PRED_TYPES,
    laplace_predictive,
)
from bench.methods.laplace.marglik import LOG_DETS, fit_laplace, laplace_evidence
from bench.methods.laplace.marglik_training import (
    OnlineMarglikHyperparameters,
    OnlineMarglikResult,
    OnlineMarglikSettings,
    RunStreams,
    last_layer_name,
    train_online_marglik,
)
from bench.methods.settings import ModelSettings, PredictionSettings, settings_node
from bench.metrics.memory import held_tensors
from bench.predictive.categorical import Categorical

HESSIAN_STRUCTURES = ("diag", "kron", "full")
# The refit subset's stream, apart from scratch_training's streams 0-4.
REFIT_STREAM = (5,)


@dataclass
class OnlineMarglikLaplace(OnlineMarglikHyperparameters):
    """A network and its prior precision trained by online marginal likelihood, then
    laplace-torch's Laplace approximation of it (module docstring). The training keys
    (``subset_of_weights`` ... ``refit_size``) are :class:`OnlineMarglikHyperparameters`'."""

    name: str = "LA/KFAC"
    hessian_structure: str = "kron"
    backend: str = "AsdlGGN"
    log_det: str = "exact"
    model: ModelSettings = ModelSettings()
    num_classes: int = 10
    pred_type: str = "glm"
    link_approx: str = "mc"
    n_samples: int = 100
    sample_seed: int = 711
    fit_batch_size: int = 512
    prediction: PredictionSettings = PredictionSettings(batch_size=32)
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = False

    def __post_init__(self) -> None:
        self.prediction = settings_node(PredictionSettings, self.prediction)
        require_choice("method.hessian_structure", self.hessian_structure, HESSIAN_STRUCTURES)
        require_choice("method.backend", self.backend, BACKENDS)
        require_choice("method.log_det", self.log_det, LOG_DETS)
        require_choice("method.pred_type", self.pred_type, PRED_TYPES)
        require_choice("method.link_approx", self.link_approx, LINK_APPROXIMATIONS)
        self.model = settings_node(ModelSettings, self.model)
        for key in ("num_classes", "n_samples", "fit_batch_size"):
            require_count(key, getattr(self, key))
        require_count("sample_seed", self.sample_seed, minimum=0)
        self.settings().check()
        if self.pred_type == "nn" and self.link_approx != "mc":
            raise ConfigError(f"method.link_approx={self.link_approx!r} is not valid with "
                              "method.pred_type='nn'; choose one of: mc")
        if self.hessian_structure == "kron" and self.subset_of_weights == "last_layer":
            raise ConfigError("method.subset_of_weights='last_layer' is not valid with "
                              "method.hessian_structure='kron' here (a scalar last-layer prior "
                              "only); choose one of: all")
        if self.log_det == "eigen" and (self.hessian_structure != "full"
                                        or self.prior_structure != "scalar"):
            raise ConfigError(f"method.log_det='eigen' is not valid with method.hessian_structure"
                              f"={self.hessian_structure!r}, method.prior_structure="
                              f"{self.prior_structure!r}; it needs hessian_structure='full' and "
                              "prior_structure='scalar' (else choose log_det='exact')")

    def settings(self) -> OnlineMarglikSettings:
        """The training settings of this method's values."""
        return OnlineMarglikSettings(**self.hyperparameters(),
                                     refit_batch_size=self.fit_batch_size)

    def recipe(self, data: TrainingSet) -> dict:
        """Everything that decides the trained weights and prior except the seed."""
        return {"method": "online_marglik", "settings": self.settings().to_dict(),
                "hessian_structure": self.hessian_structure, "backend": self.backend,
                "log_det": self.log_det, **self.model.recipe(), "num_classes": self.num_classes,
                "optimizer": "adam", "schedule": "cosine per step", "data": data.identity()}

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict:
        """Train (or load) the network and prior on ``data``, then fit the Laplace
        approximation on the whole training set; returns the learned prior precision, the
        best epoch and its negative log marginal likelihood, and the final fit's values."""
        if self.refit_size is not None and self.refit_size > len(data.train_labels):
            raise ConfigError(f"method.refit_size={self.refit_size} is not valid; the training "
                              f"set has {len(data.train_labels)} images")
        in_channels = int(data.train_inputs.shape[1])
        network = self.model.build(seed, self.num_classes, in_channels).to(self.device)
        stored = stored_state("online_marglik", data.name, self.recipe(data), seed,
                              lambda checkpoints: self._train(network, data, seed, checkpoints),
                              data.results_dir)
        trained = OnlineMarglikResult.from_state(stored.state, stored.history)
        network.load_state_dict(trained.model)
        network.eval()
        prior = trained.prior_precision.to(self.device)
        self.la = fit_laplace(network, train_loader(data, self.fit_batch_size),
                              self.subset_of_weights, self.hessian_structure, self.backend,
                              prior, last_layer_name(network))
        with torch.no_grad():
            log_marglik = float(self.la.log_marginal_likelihood())
        updates = [entry for entry in trained.history if "neg_log_marglik" in entry]
        return {"prior_precision": trained.prior_precision.tolist(),
                "best_epoch": trained.best_epoch,
                "best_neg_log_marglik": trained.best_neg_log_marglik,
                "final_log_marginal_likelihood": log_marglik, "epochs": len(trained.history),
                "marglik_updates": len(updates),
                "neg_log_marglik_per_update": [e["neg_log_marglik"] for e in updates],
                "n_parameters": int(self.la.n_params), "laplace_class": type(self.la).__name__,
                "backend": type(self.la.backend).__name__, "state_reused": stored.reused,
                "state_hash": stored.recipe_hash}

    def _train(self, network: torch.nn.Module, data: TrainingSet, seed: int,
               checkpoints: Checkpoints) -> tuple[dict, list[dict]]:
        images, labels = training_tensors(data, self.device)
        streams = RunStreams(stream_seed(seed, MINIBATCH_STREAM), stream_seed(seed, GLOBAL_STREAM),
                             stream_seed(seed, REFIT_STREAM))
        evidence = laplace_evidence(self.subset_of_weights, self.hessian_structure, self.backend,
                                    self.log_det)
        result = train_online_marglik(network, images, labels, self.settings(), evidence,
                                      streams, checkpoints, desc=f"{self.name} seed {seed}")
        return result.to_state(), result.history

    def predict(self, x: Tensor) -> Categorical:
        """The GLM (or NN-sampling) predictive at ``x`` from ``sample_seed``."""
        return laplace_predictive(self.la, x, self.pred_type, self.link_approx, self.n_samples,
                                  self.sample_seed, self.prediction.batch_size)

    def stored_tensors(self) -> dict[str, Tensor]:
        """Every tensor the fitted laplace-torch object holds (its network, mean, curvature,
        prior), as :meth:`LaplaceTorchClassifier.stored_tensors` counts them."""
        return held_tensors(self.la, "la", packages=("laplace",), skip=NOT_STATE)
