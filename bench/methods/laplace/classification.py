"""laplace-torch for classifiers: all-weights or last-layer Laplace behind the method contract.

``fit(data, seed, base)`` fits ``Laplace(network, "classification", subset_of_weights,
hessian_structure, backend=...)`` around the trained network ``base`` and, if asked, tunes the
prior precision post hoc by marginal likelihood. ``predict(x)`` returns a
:class:`~bench.predictive.categorical.Categorical`.

What the settings mean (laplace-redux-reproduction-notes §1, generalized-laplace notes §1):

* ``backend`` names the curvature class explicitly (laplace-torch 0.3 defaults to CurvlinopsGGN,
  the papers' era to BackPACK/ASDL; CurvlinopsGGN needed 24 GB where AsdlGGN needed 2.5 GB for
  an all-weights diagonal LeNet fit). The default is AsdlGGN. Redux LA is
  ``last_layer``/``kron``/``BackPackGGN``; LA* is ``last_layer``/``full``/``BackPackEF``.
* ``temperature`` is the Generalized Laplace paper's T, which multiplies the likelihood: the
  posterior precision is ``T * H + prior_precision``, with H the GGN/EF summed over the training
  set. laplace-torch divides H by its own ``temperature``, so it receives ``1 / T``. T > 1 is
  cold (more concentrated), T < 1 widens the posterior. With ``prior_tuning="marglik"`` the
  tuned evidence is the tempered one (T times the log likelihood).
* ``prior_tuning="marglik"`` follows Redux LA/LA*: laplace-torch's ``optimize_prior_precision``
  with ``method="marglik"``, i.e. ``tune_steps`` Adam steps (100) at ``tune_lr`` (0.1) on the
  log prior precision, starting from ``prior_precision`` (1.0), with a ``scalar`` prior
  (``layerwise`` and per-parameter ``diag`` are offered; kron takes scalar or layerwise only,
  last-layer diag/full scalar or diag only, as laplace-torch 0.3 does).
  ``"fixed"`` keeps ``prior_precision``. ``"online_marglik"`` (Laplace Redux's online
  Laplace, Figure 8) ignores ``base``: the network and a layerwise prior are trained together
  by :class:`~bench.methods.laplace.online_marglik.OnlineMarglikLaplace` (its settings in
  ``online``; a stored, resumable state shared by every link of the same fit), then this
  adapter predicts with its own link. Over the last layer only it is a ConfigError (LEFT_OUT).
* ``pred_type="glm"`` with ``link_approx`` probit, bridge, bridge_norm (deterministic) or mc;
  ``pred_type="nn"`` samples networks (``link_approx`` must be mc). Sampled predictives draw
  from a generator seeded with the fit ``seed``: for ``nn`` the same ``n_samples`` parameter
  draws serve every test point (the generator is re-seeded per chunk of ``prediction.batch_size``
  points); for glm-mc one generator stream runs across the chunks. laplace-torch's own
  ``la(x, ...)`` ignores its generator for classification, so the draws go through
  ``la.predictive_samples``, which takes it.
* ``hessian_structure="lowrank"`` (all weights, post hoc): laplace-torch's LowRankLaplace with
  the ``low_rank`` largest GGN eigenpairs (:mod:`bench.methods.laplace.lowrank_laplace`; the
  library would ask the old ``asdfghjkl`` module, which is not installed, for the Hessian's).
  ``backend`` is unread by it.

``data`` for fitting is any object with ``train_inputs`` (``[N, ...]``) and integer
``train_labels`` (``[N]``) tensors (:class:`ClassificationTrainData`). When it also has an
``augmenter()`` that returns an augmentation (a :class:`~bench.datasets.training_set.TrainingSet`
with ``crop_flip``), the curvature is fitted on augmented images, as Laplace Redux fits its
CIFAR-10 LA on the augmented training loader: one pass, each image augmented once
(:func:`augmented_once`, made before the fit so that laplace-torch's peeks at the first batch
draw nothing), from a generator seeded with ``derived_seed(seed, spawn_key=(AUGMENT_STREAM,))``.
``base`` is the trained network (a ``torch.nn.Module``, or an object holding one in
``.module``, as a stored network does); it is copied, so the caller's network is never
modified.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from hydra.utils import get_class
from torch import Tensor, nn

from bench.datasets.augmentation import Augment
from bench.harness.errors import ConfigError, require_choice, require_positive, require_positive_int
from bench.harness.rng import derived_seed, make_generator
from bench.methods.laplace.la_backends import (
    BACKENDS,
    NOT_STATE,
    ClassificationTrainData,
    backend_class,
    train_loader,
)
from bench.methods.laplace.la_predictives import (
    LINK_APPROXIMATIONS,
    PRED_TYPES,
    laplace_predictive,
)
from bench.methods.settings import PredictionSettings, settings_node
from bench.metrics.memory import held_tensors, storage_key
from bench.predictive.categorical import Categorical

SUBSETS = ("all", "last_layer")
STRUCTURES = ("diag", "kron", "full", "lowrank")
# Structures laplace-torch 0.3 cannot build here, and the class that builds them: lowrank's
# LowRankLaplace asks the old asdfghjkl module for its eigenpairs (not installed); ours hands it
# the GGN's (bench.methods.laplace.lowrank_laplace). Over all weights only, post hoc.
BUILT_HERE = {"lowrank": "bench.methods.laplace.lowrank_laplace.GGNLowRankLaplace"}
PRIOR_TUNINGS = ("fixed", "marglik", "online_marglik")  # PRIOR_FITS' keys
# Combinations Laplace Redux leaves out of its variant grid (appendix C.1: "do not work well at
# all"): (subset_of_weights, prior_tuning) -> why. A one-line ConfigError names them.
LEFT_OUT = {("last_layer", "online_marglik"): "Laplace Redux C.1 leaves online Laplace over "
            "the last layer only out of its grid (it does not work well at all)"}
# Structures offered for some subsets and tunings only: structure -> (subset, tunings, why).
LOW_RANK_SCOPE = ("all", ("fixed", "marglik"), "laplace-torch's low-rank Laplace covers all "
                  "weights and cannot be refitted, so it is post hoc over all weights only")
PRIOR_STRUCTURES = ("scalar", "layerwise", "diag")
# laplace-torch 0.3's BaseLaplace keeps the parameters of the network it is handed (``params``:
# the adapter's deep copy of the base network); its last-layer classes fit, tune and predict
# through their own deep copy (``model``) and the last-layer ``mean``, and never read ``params``.
UNREAD_BY_LAST_LAYER = ("params",)
# (backend, structure, subset) combinations laplace-torch 0.3 cannot fit (None: any subset).
# The stream of the fit seed that draws the augmentation of the fitting pass.
AUGMENT_STREAM = 5
UNSUPPORTED = {("BackPackEF", "kron", None): "BackPACK has no Kronecker-factored EF",
               ("AsdlEF", "full", "last_layer"): "laplace-torch 0.3 fails on it (shape error)"}


def augmented_once(inputs: Tensor, augment: Augment, batch_size: int,
                   generator: torch.Generator) -> Tensor:
    """``inputs`` with every row augmented once, chunk by chunk of ``batch_size`` rows in
    order, the draws from ``generator`` (one pass of an augmented, unshuffled loader)."""
    return torch.cat([augment(chunk, generator) for chunk in inputs.split(batch_size)])


def network_of(base: Any) -> nn.Module:
    """The ``torch.nn.Module`` that ``base`` is or holds in ``.module``."""
    module = getattr(base, "module", base)
    if not isinstance(module, nn.Module):
        raise TypeError(f"base must be a torch.nn.Module or hold one in .module; got "
                        f"{type(base).__name__}")
    return module


def keep_prior(method: LaplaceTorchClassifier) -> None:
    """``prior_tuning="fixed"``: the configured prior precision stays."""


def tune_prior_by_marglik(method: LaplaceTorchClassifier) -> None:
    """``prior_tuning="marglik"``: laplace-torch's ``optimize_prior_precision`` on the fitted
    ``method.la`` (Redux LA/LA*)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="By default `link_approx`")
        method.la.optimize_prior_precision(
            pred_type=method.pred_type, method="marglik", n_steps=method.tune_steps,
            lr=method.tune_lr, init_prior_prec=float(method.prior_precision),
            prior_structure=method.prior_structure, link_approx=method.link_approx,
            n_samples=method.n_samples)


@dataclass
class LaplaceTorchClassifier:
    """laplace-torch ``Laplace(network, "classification", ...)`` fitted on a trained network."""

    name: str = "la_classifier"
    subset_of_weights: str = "last_layer"
    hessian_structure: str = "kron"
    backend: str = "AsdlGGN"
    pred_type: str = "glm"
    link_approx: str = "probit"
    n_samples: int = 100
    prior_precision: float = 1.0
    prior_tuning: str = "fixed"
    prior_structure: str = "scalar"
    tune_steps: int = 100
    tune_lr: float = 0.1
    temperature: float = 1.0
    batch_size: int = 512
    prediction: PredictionSettings = PredictionSettings(batch_size=512)
    device: str = "cpu"
    # Settings of the online-marglik training (``prior_tuning="online_marglik"``): keys of
    # OnlineMarglikLaplace (epochs, refit_size, prior_precision, ...); None: its defaults.
    # Unread by the other tunings (a scale may set it for every variant of a grid).
    online: dict | None = None
    # True: BatchNorm weights and biases stay at their MAP values, outside the posterior (their
    # requires_grad is cleared on the adapter's copy; laplace-torch 0.3's all-weights KFAC
    # fails on BatchNorm layers). Read by all-weights post-hoc fits only.
    frozen_batchnorm: bool = False
    # The rank k of hessian_structure='lowrank' (laplace-torch's default 10), and how many
    # training points (the first, in order) its GGN eigenpairs are computed on, scaled to the
    # full sum (None: all). Unread by the other structures.
    low_rank: int = 10
    low_rank_data: int | None = None
    fits_on_base: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.prediction = settings_node(PredictionSettings, self.prediction)
        require_choice("method.subset_of_weights", self.subset_of_weights, SUBSETS)
        require_choice("method.hessian_structure", self.hessian_structure, STRUCTURES)
        require_choice("method.backend", self.backend, BACKENDS)
        require_choice("method.pred_type", self.pred_type, PRED_TYPES)
        require_choice("method.link_approx", self.link_approx, LINK_APPROXIMATIONS)
        require_choice("method.prior_tuning", self.prior_tuning, PRIOR_TUNINGS)
        require_choice("method.prior_structure", self.prior_structure, PRIOR_STRUCTURES)
        require_positive("method.temperature", self.temperature)
        require_positive("method.prior_precision", self.prior_precision)
        require_positive("method.tune_lr", self.tune_lr)
        for key in ("n_samples", "tune_steps", "batch_size", "low_rank"):
            require_positive_int(f"method.{key}", getattr(self, key))
        if self.low_rank_data is not None:
            require_positive_int("method.low_rank_data", self.low_rank_data)
        subset, tunings, why = LOW_RANK_SCOPE
        if self.hessian_structure == "lowrank" and (self.subset_of_weights != subset
                                                    or self.prior_tuning not in tunings):
            raise ConfigError(f"method.hessian_structure='lowrank' is not valid with "
                              f"method.subset_of_weights={self.subset_of_weights!r} and "
                              f"method.prior_tuning={self.prior_tuning!r} ({why}); choose "
                              f"subset_of_weights='all' and prior_tuning one of: "
                              f"{', '.join(tunings)}")
        if self.pred_type == "nn" and self.link_approx != "mc":
            raise ConfigError(f"method.link_approx={self.link_approx!r} is not valid with "
                              "method.pred_type='nn'; choose one of: mc")
        if self.hessian_structure == "kron" and self.prior_structure == "diag":
            raise ConfigError("method.prior_structure='diag' is not valid with "
                              "method.hessian_structure='kron'; choose one of: scalar, layerwise")
        if (self.subset_of_weights == "last_layer" and self.hessian_structure != "kron"
                and self.prior_structure == "layerwise"):
            raise ConfigError("method.prior_structure='layerwise' is not valid with "
                              f"method.hessian_structure={self.hessian_structure!r} and "
                              "method.subset_of_weights='last_layer'; choose one of: scalar, "
                              "diag")
        left_out = LEFT_OUT.get((self.subset_of_weights, self.prior_tuning))
        if left_out:
            raise ConfigError(f"method.subset_of_weights={self.subset_of_weights!r} with "
                              f"method.prior_tuning={self.prior_tuning!r} is not a valid "
                              f"combination ({left_out}); choose subset_of_weights='all'")
        for subset in (None, self.subset_of_weights):
            reason = UNSUPPORTED.get((self.backend, self.hessian_structure, subset))
            if reason:
                raise ConfigError(f"method.backend={self.backend!r} is not valid with "
                                  f"method.hessian_structure={self.hessian_structure!r} "
                                  f"({reason}); choose another backend")

    def fit(self, data: ClassificationTrainData, seed: int, base: Any = None) -> dict:
        """Fit the curvature of ``base`` on ``data``'s training set; tune the prior if asked
        (``prior_tuning``: :data:`PRIOR_FITS`)."""
        return PRIOR_FITS[self.prior_tuning](self, data, seed, base)

    def _fit_post_hoc(self, data: ClassificationTrainData, seed: int, base: Any,
                      tune_prior: Callable[[LaplaceTorchClassifier], None]) -> dict:
        """Fit the curvature of ``base``, then ``tune_prior(self)``."""
        if base is None:
            raise ValueError("LaplaceTorchClassifier.fit needs the trained network (base=)")
        network = copy.deepcopy(network_of(base)).to(self.device).eval()
        if self.frozen_batchnorm and self.subset_of_weights == "all":
            for module in network.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.requires_grad_(False)
        dtype = next(network.parameters()).dtype
        self.seed = int(seed)
        self.la = self.build_laplace(network)
        augment = data.augmenter() if hasattr(data, "augmenter") else None
        inputs = None
        if augment is not None:
            generator = make_generator(derived_seed(int(seed), spawn_key=(AUGMENT_STREAM,)))
            inputs = augmented_once(data.train_inputs, augment, self.batch_size, generator)
        self.la.fit(train_loader(data, self.batch_size, dtype, inputs))
        tune_prior(self)
        with torch.no_grad():
            log_marglik = float(self.la.log_marginal_likelihood())
        return {"prior_precision": self._fitted_prior_precision(),
                "prior_structure": self.prior_structure,
                "log_marginal_likelihood": log_marglik, "n_parameters": int(self.la.n_params),
                "backend": type(self.la.backend).__name__, "laplace_class": type(self.la).__name__,
                "temperature": float(self.temperature), "n_data": int(self.la.n_data)}

    def online_method(self):
        """The online-marglik trainer of this adapter's subset, structure and backend, with
        ``online``'s settings over its defaults (module docstring)."""
        from bench.methods.laplace.online_marglik import OnlineMarglikLaplace

        settings = {"fit_batch_size": self.batch_size, **(self.online or {})}
        return OnlineMarglikLaplace(
            name=self.name, hessian_structure=self.hessian_structure,
            subset_of_weights=self.subset_of_weights, backend=self.backend,
            prior_structure=self.prior_structure,
            pred_type=self.pred_type, link_approx=self.link_approx, n_samples=self.n_samples,
            prediction=self.prediction, device=self.device, **settings)

    def _fit_online(self, data: ClassificationTrainData, seed: int) -> dict:
        """Train (or load) the network and prior by online marglik and fit its Laplace. The
        online loop has no augmentation: it sees the training set without it (so the state is
        the same with and without ``dataset.augmentation``, and trained once)."""
        trainer = self.online_method()
        if getattr(data, "augmentation", "none") != "none":
            data = dataclasses.replace(data, augmentation="none")
        diagnostics = trainer.fit(data, seed)
        self.la, self.seed = trainer.la, int(seed)
        return {**diagnostics, "prior_structure": trainer.prior_structure,
                "n_data": int(self.la.n_data), "temperature": float(self.temperature),
                "online_augmentation": "none"}

    def build_laplace(self, network: nn.Module, prior_mean: float | Tensor = 0.0):
        """laplace-torch's ``Laplace(network, "classification", ...)`` with this adapter's
        subset, structure, prior, temperature and backend, not yet fitted. ``network`` is
        used as it is (not copied): the Laplace object's mean follows its parameters."""
        from laplace import Laplace

        options = {"prior_precision": float(self.prior_precision), "prior_mean": prior_mean,
                   "temperature": 1.0 / self.temperature}
        if self.hessian_structure in BUILT_HERE:
            built_here = get_class(BUILT_HERE[self.hessian_structure])
            return built_here(network, "classification", **options, backend_kwargs={
                "low_rank": self.low_rank, "seed": getattr(self, "seed", 0),
                "data_size": self.low_rank_data})
        return Laplace(network, "classification", subset_of_weights=self.subset_of_weights,
                       hessian_structure=self.hessian_structure,
                       backend=backend_class(self.backend), **options)

    def _fitted_prior_precision(self) -> float | list[float]:
        """The prior precision as a record value: one number, one per layer (layerwise), or
        the mean of the per-parameter values (``diag``)."""
        prior = self.la.prior_precision.detach()
        if prior.numel() == 1:
            return float(prior)
        return prior.tolist() if self.prior_structure == "layerwise" else float(prior.mean())

    def predict(self, x: Tensor) -> Categorical:
        """Predictive class probabilities at ``x``, in chunks of ``prediction.batch_size``."""
        return laplace_predictive(self.la, x, self.pred_type, self.link_approx, self.n_samples,
                                  self.seed, self.prediction.batch_size)

    def stored_tensors(self) -> dict[str, Tensor]:
        """Every tensor the fitted laplace-torch object reads to predict, found by walking its
        attributes: its copy of the network (parameters and buffers), the mean, the curvature
        (the full or diagonal ``H``; for K-FAC the Kronecker factors ``H_facs`` and their
        eigendecompositions ``H``), the prior precision and mean, the noise, the loss and any
        cache (the full structure's posterior scale once ``predict`` has run). The first
        training batch laplace-torch keeps (``la.data``) is data, not state, and the
        last-layer Laplace's ``la.params`` are never read (:meth:`unread_tensors`): neither is
        counted."""
        unread = UNREAD_BY_LAST_LAYER if self.subset_of_weights == "last_layer" else ()
        return held_tensors(self.la, "la", packages=("laplace",), skip=NOT_STATE + unread)

    def unread_tensors(self) -> dict[str, Tensor]:
        """The tensors the fitted laplace-torch object holds beyond :meth:`stored_tensors`:
        for last-layer Laplace the parameters of the network it was handed (``la.params``, the
        adapter's deep copy of the base network), which it keeps alive and never reads; none
        for all-weights Laplace, whose ``la.params`` are its own network's."""
        stored = {storage_key(t) for t in self.stored_tensors().values()}
        held = held_tensors(self.la, "la", packages=("laplace",), skip=NOT_STATE)
        return {name: t for name, t in held.items() if storage_key(t) not in stored}


# How the classifier is fitted by ``method.prior_tuning``: post hoc on the base network with
# the prior kept or tuned by the marginal likelihood, or trained by online marglik.
PRIOR_FITS: dict[str, Callable[..., dict]] = {
    "fixed": lambda method, data, seed, base: method._fit_post_hoc(data, seed, base,
                                                                   keep_prior),
    "marglik": lambda method, data, seed, base: method._fit_post_hoc(data, seed, base,
                                                                     tune_prior_by_marglik),
    "online_marglik": lambda method, data, seed, base: method._fit_online(data, seed)}
