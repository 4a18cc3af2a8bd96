"""Bayesian continual learning with a running Laplace posterior (Laplace Redux appendix C.4,
reproduction notes section 7), behind the method contract.

One object holds one network and one laplace-torch posterior ``q`` over all its weights
(``Laplace(network, "classification", subset_of_weights="all", hessian_structure="kron" or
"diag", prior_mean=0, prior_precision=delta_0, backend=AsdlGGN)``: the backend is named, as
laplace-torch 0.3 would otherwise take CurvlinopsGGN). Each ``fit(data, seed)`` is one more
task of the sequence:

1. train the network on the task with a fresh Adam (``lr`` 1e-3, cosine per step to ``min_lr``
   1e-6, ``epochs`` 100, batch ``batch_size`` 256) on ``CE_mean - penalty_weight * log
   q(theta) / N``, where ``log q`` is laplace-torch's normalised ``log_prob`` of the posterior
   after the previous tasks (the prior N(0, 1/delta_0) before the first);
2. every ``marglik_every`` (5) epochs re-tune the scalar prior precision delta: a copy of the
   posterior with its prior mean set to the previous MAP is fitted on the current task with
   ``override=False`` at the current weights, and ``optimize_prior_precision(method="marglik")``
   runs ``marglik_steps`` (100) Adam steps at ``marglik_lr`` (0.1) from the current delta; the
   tuned delta is copied back into ``q``. ``marglik_restart=True`` starts each task's first
   tuning from ``prior_precision`` instead (the code's first release; notes 10.11);
3. ``q.fit(task, override=False)``: the diagonal GGN adds up exactly; laplace-torch reweights
   and adds the Kronecker factors by data counts (the approximation of C.4.2).

``predict(x)`` is the GLM predictive with the probit link (through
:class:`~bench.methods.laplace.classification.LaplaceTorchClassifier`'s chunked predictive);
``map_predict(x)`` is the network's own softmax.

Every task's result (network weights and the posterior's state: mean, curvature, prior mean
and precision, loss, data count) is stored by :func:`bench.harness.state_store.stored_state`
(kind ``continual_laplace``) under a recipe chaining the previous task's hash, with a
checkpoint after every epoch: a killed run resumes at its last epoch, a rerun loads the
finished tasks. Randomness: the initial weights come from the seed's network stream, each
task's minibatch order from ``derived_seed([seed, task])``.
"""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import parameters_to_vector

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import require_choice
from bench.harness.rng import derived_seed, make_generator
from bench.harness.state_store import Checkpoints, stored_state
from bench.methods.baselines.map_classifier import batched_logits
from bench.methods.baselines.scratch_training import (
    MINIBATCH_STREAM,
    EpochLog,
    require_count,
    require_real,
    training_tensors,
)
from bench.methods.laplace.classification import LaplaceTorchClassifier
from bench.methods.laplace.la_backends import train_loader
from bench.methods.settings import ModelSettings, PredictionSettings, settings_node
from bench.predictive.categorical import Categorical
from bench.training.loop import LoopState, TrainingConfig, fit_parameters

STRUCTURES = ("kron", "diag")
STATE_KIND = "continual_laplace"
# The entries of laplace-torch's ``state_dict`` that change as tasks are added; the others
# (likelihood, temperature, class name, ...) are fixed by the constructor.
POSTERIOR_KEYS = ("mean", "H", "loss", "prior_mean", "prior_precision", "n_data", "n_outputs")


def _map_tensors(value: Any, move) -> Any:
    """``value`` with every tensor in it (nested lists) replaced by ``move(tensor)``."""
    if isinstance(value, Tensor):
        return move(value)
    if isinstance(value, list | tuple):
        return [_map_tensors(item, move) for item in value]
    return value


def posterior_state(la) -> dict[str, Any]:
    """The part of a fitted laplace-torch posterior that tasks change, as copies on the CPU:
    mean, curvature (the diagonal, or the Kronecker factors as nested lists for K-FAC), loss,
    prior mean and precision, data count and output size."""
    state = la.state_dict()
    values = {key: _map_tensors(state[key], lambda t: t.detach().cpu().clone())
              for key in POSTERIOR_KEYS}
    values["loss"] = torch.as_tensor(values["loss"], dtype=torch.float64)
    values["n_data"], values["n_outputs"] = int(values["n_data"]), int(values["n_outputs"])
    return values


def load_posterior_state(la, state: dict[str, Any]) -> None:
    """Put a :func:`posterior_state` back into ``la`` (copies on ``la``'s device)."""
    device = la._device
    values = {key: _map_tensors(state[key], lambda t: t.to(device).clone())
              for key in POSTERIOR_KEYS}
    la.load_state_dict({**values, "loss": values["loss"].to(la._dtype),
                        "sigma_noise": la.sigma_noise, "likelihood": la.likelihood,
                        "temperature": la.temperature, "enable_backprop": la.enable_backprop,
                        "cls_name": type(la).__name__})


def negative_log_posterior(la, network: nn.Module) -> Tensor:
    """``-log q(theta)`` at the network's current weights: laplace-torch's normalised Gaussian
    ``log_prob`` (differentiable in the weights; q's mean and precision are constants)."""
    return -la.log_prob(parameters_to_vector(network.parameters()))


def tuned_prior_precision(la, loader, init: Tensor | float, steps: int, lr: float
                          ) -> tuple[Tensor, float]:
    """The authors' online prior update: a copy of ``la`` with its prior mean set to ``la``'s
    mean (the previous MAP), fitted on ``loader`` with ``override=False`` at the network's
    current weights, then ``steps`` Adam steps at ``lr`` on its log marginal likelihood over a
    scalar prior precision from ``init``. Returns the tuned precision and the copy's negative
    log marginal likelihood there."""
    hyper = copy.deepcopy(la)
    hyper.prior_mean = la.mean
    hyper.fit(loader, override=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="By default `link_approx`")
        hyper.optimize_prior_precision(pred_type="glm", method="marglik", n_steps=steps, lr=lr,
                                       init_prior_prec=init, prior_structure="scalar")
    with torch.no_grad():
        negative = -float(hyper.log_marginal_likelihood())
    return hyper.prior_precision.detach().clone(), negative


def task_seed(seed: int, task: int) -> int:
    """The seed of task ``task``'s minibatch order in a run with ``seed``."""
    return derived_seed([int(seed), int(task)], spawn_key=MINIBATCH_STREAM)


@dataclass
class ContinualLaplace:
    """A network and its running Laplace posterior, trained one task per ``fit``."""

    name: str = "continual_laplace"
    hessian_structure: str = "kron"
    backend: str = "AsdlGGN"
    model: ModelSettings = ModelSettings(name="mlp")
    num_classes: int = 10
    prior_precision: float = 1e-3
    penalty_weight: float = 1.0
    epochs: int = 100
    lr: float = 1e-3
    min_lr: float = 1e-6
    batch_size: int = 256
    marglik_every: int = 5
    marglik_steps: int = 100
    marglik_lr: float = 0.1
    marglik_restart: bool = False
    prediction: PredictionSettings = PredictionSettings(batch_size=64)
    device: str = "cpu"
    fits_on_base: ClassVar[bool] = False
    # The network after the last task and the recipe hash of the posterior state it left.
    network: nn.Module | None = field(default=None, init=False, repr=False)
    state_hash: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        require_choice("method.hessian_structure", self.hessian_structure, STRUCTURES)
        self.model = settings_node(ModelSettings, self.model)
        self.prediction = settings_node(PredictionSettings, self.prediction)
        for key in ("num_classes", "epochs", "batch_size", "marglik_every", "marglik_steps"):
            require_count(key, getattr(self, key))
        require_real("prior_precision", self.prior_precision, above=0)
        require_real("penalty_weight", self.penalty_weight, at_least=0)
        require_real("lr", self.lr, above=0)
        require_real("min_lr", self.min_lr, at_least=0)
        require_real("marglik_lr", self.marglik_lr, above=0)
        self.adapter = LaplaceTorchClassifier(
            name=self.name, subset_of_weights="all", hessian_structure=self.hessian_structure,
            backend=self.backend, pred_type="glm", link_approx="probit",
            prior_precision=float(self.prior_precision), batch_size=self.batch_size,
            prediction=self.prediction, device=self.device)
        self.tasks_done = 0

    @property
    def la(self):
        """The running laplace-torch posterior (None before the first task)."""
        return getattr(self.adapter, "la", None)

    def recipe(self, data: TrainingSet) -> dict:
        """Everything that decides the state after this task except the seed: the settings,
        the task's position and data, and the recipe hash of the state it starts from."""
        keys = ("hessian_structure", "backend", "num_classes", "prior_precision",
                "penalty_weight", "epochs", "lr", "min_lr", "batch_size", "marglik_every",
                "marglik_steps", "marglik_lr", "marglik_restart")
        return {"method": STATE_KIND, **self.model.recipe(),
                **{k: getattr(self, k) for k in keys},
                "task": self.tasks_done, "previous": self.state_hash, "data": data.identity()}

    def _start(self, seed: int, in_channels: int) -> None:
        """The initial network of ``seed`` and the prior N(0, 1/prior_precision) as ``q``."""
        self.network = self.model.build(seed, self.num_classes, in_channels).to(self.device)
        n_params = sum(p.numel() for p in self.network.parameters())
        reference = next(self.network.parameters())
        self.adapter.la = self.adapter.build_laplace(
            self.network, prior_mean=torch.zeros(n_params, dtype=reference.dtype,
                                                 device=reference.device))
        self.adapter.seed = int(seed)

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict:
        """Learn one more task from ``data`` (or load its stored result); returns the task's
        diagnostics: tuned prior precisions per epoch, final delta, objective, data count."""
        if self.network is None:
            self._start(seed, int(data.train_inputs.shape[1]))
        recipe = self.recipe(data)
        stored = stored_state(STATE_KIND, data.name, recipe, seed,
                              lambda checkpoints: self._learn(data, seed, checkpoints),
                              data.results_dir)
        self._restore(stored.state)
        self.state_hash = stored.recipe_hash
        self.tasks_done += 1
        tuned = [entry["prior_precision"] for entry in stored.history
                 if "prior_precision" in entry]
        last = stored.history[-1] if stored.history else {}
        return {"task": self.tasks_done, "epochs": len(stored.history),
                "objective": last.get("objective"), "tuned_prior_precisions": tuned,
                "prior_precision": float(self.la.prior_precision),
                "n_data": int(self.la.n_data), "curvature_fit_s": stored.state["fit_s"],
                "train_s": sum(entry["seconds"] for entry in stored.history),
                "state_reused": stored.reused, "state_hash": stored.recipe_hash}

    def _restore(self, state: dict[str, Any]) -> None:
        """Load a stored task result into the network and the posterior."""
        self.network.load_state_dict({k: v.to(self.device) for k, v in state["network"].items()})
        load_posterior_state(self.la, state["posterior"])

    def _learn(self, data: TrainingSet, seed: int, checkpoints: Checkpoints
               ) -> tuple[dict[str, Any], list[dict]]:
        """Train on the task (resuming from its last epoch checkpoint), then add its curvature
        to the posterior; returns the stored state and the per-epoch history."""
        network, la = self.network, self.la
        images, labels = training_tensors(data, self.device)
        n = len(labels)
        loader = train_loader(data, self.batch_size, next(network.parameters()).dtype)
        batches = make_generator(task_seed(seed, self.tasks_done))
        saved = checkpoints.load()
        history: list[dict] = [] if saved is None else list(saved["history"])
        log = EpochLog(history)

        def batch_loss(rows: Tensor) -> Tensor:
            rows = rows.to(self.device)
            loss = F.cross_entropy(network(images[rows]), labels[rows])
            loss = loss + self.penalty_weight * negative_log_posterior(la, network) / n
            log.add(loss)
            return loss

        def epoch_end(state: LoopState) -> None:
            tuned = {}
            if state.epochs_done % self.marglik_every == 0:
                restart = self.marglik_restart and state.epochs_done == self.marglik_every
                init = float(self.prior_precision) if restart else la.prior_precision.clone()
                la.prior_precision, negative = tuned_prior_precision(
                    la, loader, init, self.marglik_steps, self.marglik_lr)
                tuned = {"prior_precision": float(la.prior_precision),
                         "neg_log_marglik": negative}
            log.close_epoch(state.epochs_done - 1, state.optimizer["param_groups"][0]["lr"],
                            **tuned)
            checkpoints.save({"loop": asdict(state), "model": network.state_dict(),
                              "batch_rng": batches.get_state(),
                              "prior_precision": la.prior_precision.detach().cpu(),
                              "history": history})

        resume = None
        if saved is not None:
            network.load_state_dict(saved["model"])
            batches.set_state(saved["batch_rng"])
            la.prior_precision = saved["prior_precision"].to(self.device)
            resume = LoopState(**saved["loop"])
        config = TrainingConfig(lr=self.lr, max_epochs=self.epochs, batch_size=self.batch_size,
                                optimizer="adam", schedule="cosine", schedule_unit="step",
                                min_lr=self.min_lr)
        network.train()
        fit_parameters(list(network.parameters()), batch_loss, n_rows=n, config=config,
                       generator=batches, desc=f"task {self.tasks_done + 1}",
                       on_epoch_end=epoch_end, resume=resume)
        started = time.perf_counter()
        la.fit(loader, override=False)
        fit_s = time.perf_counter() - started
        network.eval()
        state = {"network": {k: v.detach().cpu().clone() for k, v in network.state_dict().items()},
                 "posterior": posterior_state(la), "fit_s": fit_s}
        return state, history

    def predict(self, x: Tensor) -> Categorical:
        """The running posterior's GLM predictive with the probit link at ``x``."""
        if self.la is None:
            raise RuntimeError("ContinualLaplace.predict needs at least one fitted task")
        return self.adapter.predict(x)

    def map_predict(self, x: Tensor) -> Categorical:
        """The network's own softmax at ``x`` (the MAP of the tasks so far)."""
        return Categorical.from_logits(batched_logits(self.network, x, self.prediction.batch_size,
                                                      self.device))
