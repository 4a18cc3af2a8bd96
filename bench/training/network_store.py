"""Trained MAP networks, trained once per (recipe, seed) and reused by every experiment.

A :class:`TrainingRecipe` names the network, the training data (dataset, preprocessing, image
shape, number of training examples, augmentation) and the training stages; :func:`recipe_hash`
is the SHA-256 of its canonical JSON. :func:`trained_network` looks in

    ``<results_dir>/networks/<model>/<dataset>/<recipe_hash>/seed-<seed>/``

(``weights.pt``, ``recipe.json``, ``history.json``) and loads the network when it is there.
A recipe may start from a pretrained state-dict file (:class:`PretrainedWeights`, e.g.
ImageNet weights for ResNet-18): the file's SHA-256 is part of the recipe (its path is not,
so the same file anywhere gives the same network); output-layer entries whose shape differs
from the network's (a 1000-way head on a 10-way network) keep their fresh initialisation, and
any other difference means the file is for another architecture (a one-line ConfigError).
Otherwise it trains it in ``seed-<seed>.partial/``, checkpointing after every epoch
(``checkpoint.pt``: network, optimizer, schedule, generator states, stage and epoch) and
resuming from that checkpoint after an interruption, then renames the finished folder to its
final name in one step. Concurrency: one process trains a given (recipe, seed) at a time, under
an exclusive ``fcntl.flock`` on ``seed-<seed>.lock``; others wait on the lock and then load what
it saved. Readers never see half a network, because the final folder appears by ``os.rename``.

Damaged files (:mod:`bench.harness.stored_files`): a finished folder (one with ``weights.pt``)
whose ``weights.pt``, ``recipe.json`` or ``history.json`` cannot be read is a one-line
:class:`~bench.harness.stored_files.DamagedStoreFile` (a ConfigError) naming the file and the
folder to delete; it is neither used nor trained again silently. A ``checkpoint.pt`` of an
interrupted run that cannot be read (or is not a training checkpoint) is deleted with a warning
and training starts from the first epoch, which gives the same network. A folder without
``weights.pt`` (e.g. its weights deleted to retrain) is trained again and replaced by the new
folder once training finishes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from bench.datasets.augmentation import training_augmentation
from bench.harness.errors import ConfigError, require_choice
from bench.harness.overrides import default_results_dir
from bench.harness.rng import derived_seed, make_generator
from bench.harness.stored_files import (
    CHECKPOINT_NAME,
    HISTORY_NAME,
    RECIPE_NAME,
    DamagedStoreFile,
    discard_checkpoint,
    error_reason,
    load_checkpoint,
    load_stored_tensors,
    publish_folder,
    read_stored_json,
    save_atomically,
    stored_or_built,
    write_json,
)
from bench.models.classifiers import CLASSIFIERS, build_classifier
from bench.training.classifier import ClassifierCheckpoint, TrainingStage, train_classifier

logger = logging.getLogger("bench.training")

WEIGHTS_NAME = "weights.pt"
HASH_DIGITS = 12
OPTIONAL_DATASET_KEYS = ("augmentation",)
# The recipe's network: a conf/model node, these keys (bench.methods.settings.ModelSettings).
MODEL_KEY = "recipe.model"
MODEL_NODE_KEYS = ("name", "options")


@dataclass(frozen=True)
class DatasetIdentity:
    """The training data a network saw: dataset ``name``, ``preprocessing`` (e.g.
    ``"pixels/255"``, or the normalisation's name), ``image_shape`` ``(C, H, W)``,
    ``train_size``, the number of training examples (the caller passes exactly those), and the
    ``augmentation`` every training minibatch goes through (:mod:`bench.datasets.augmentation`;
    with ``crop_flip``, ``preprocessing`` names the images' normalisation)."""

    name: str
    preprocessing: str
    image_shape: tuple[int, int, int]
    train_size: int
    augmentation: str = "none"

    def __post_init__(self) -> None:
        object.__setattr__(self, "image_shape", tuple(self.image_shape))


@dataclass(frozen=True)
class PretrainedWeights:
    """A state-dict file the network starts from before training: its ``sha256`` (part of the
    recipe and its hash) and its ``path`` on this machine (not part of the hash; None for a
    recipe read back from a ``recipe.json``, which can then only load a stored network)."""

    sha256: str
    path: str | None = None

    @classmethod
    def from_file(cls, path: str | Path, key: str = "recipe.pretrained") -> PretrainedWeights:
        """The weights in ``path`` with their SHA-256; a missing file is a one-line
        ConfigError naming ``key``."""
        file = Path(path).expanduser()
        if not file.is_file():
            raise ConfigError(f"{key}={str(path)!r}: no such weights file (a state dict saved "
                              "with torch.save, e.g. torchvision's resnet18-f37072fd.pth)")
        digest = hashlib.sha256()
        with open(file, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        return cls(digest.hexdigest(), str(file))

    @classmethod
    def from_value(cls, value: Any, key: str = "recipe.pretrained") -> PretrainedWeights | None:
        """None for an empty value (null or ""), else the weights of a path or of a dict with
        ``path`` and/or ``sha256`` (a given ``sha256`` must match the file's)."""
        if value is None or value == "":
            return None
        if isinstance(value, str | Path):
            return cls.from_file(value, key)
        if isinstance(value, PretrainedWeights):
            return value
        if not isinstance(value, dict) or not set(value) <= {"path", "sha256"} or not value:
            raise ConfigError(f"{key}={value!r} is not valid; give a weights file path (or "
                              "{path, sha256})")
        if value.get("path") in (None, ""):
            return cls(str(value["sha256"]))
        weights = cls.from_file(value["path"], f"{key}.path")
        if value.get("sha256") not in (None, weights.sha256):
            raise ConfigError(f"{key}.sha256={value['sha256']!r} does not match the file "
                              f"{weights.path} (sha256 {weights.sha256})")
        return weights


@dataclass(frozen=True)
class TrainingRecipe:
    """Everything that decides a trained network except the seed: the network ``model`` (a
    name of :data:`bench.models.classifiers.CLASSIFIERS`) with ``num_classes`` outputs and its
    ``model_options`` (pairs, e.g. ``(("dropout", 0.3),)``), the ``dataset``, the training
    ``stages`` run in order and optionally the ``pretrained`` weights training starts from
    (None: from the seed's fresh initialisation). A config names the network by the
    ``conf/model`` node (``model: {name, options}``, :meth:`from_dict`)."""

    model: str
    dataset: DatasetIdentity
    stages: tuple[TrainingStage, ...]
    num_classes: int = 10
    model_options: tuple[tuple[str, Any], ...] = field(default=())
    pretrained: PretrainedWeights | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        options = self.model_options
        pairs = options.items() if isinstance(options, dict) else options
        object.__setattr__(self, "model_options", tuple(sorted((str(k), v) for k, v in pairs)))
        object.__setattr__(self, "pretrained", PretrainedWeights.from_value(self.pretrained))
        self.check()

    def check(self) -> None:
        """Raise a one-line ConfigError naming ``recipe.<key>`` for the first bad value."""
        require_choice(f"{MODEL_KEY}.name", self.model, CLASSIFIERS)
        allowed = CLASSIFIERS[self.model].options
        for key, value in self.model_options:
            if key not in allowed:
                raise ConfigError(f"{MODEL_KEY}.options.{key}={value!r} is not an option of "
                                  f"{self.model}; its options: {', '.join(allowed) or 'none'}")
        for key in ("name", "preprocessing"):
            value = getattr(self.dataset, key)
            if not isinstance(value, str) or not value or (key == "name" and "/" in value):
                raise ConfigError(f"recipe.dataset.{key}={value!r} is not valid; it must be a "
                                  "non-empty string (a name without '/')")
        shape = self.dataset.image_shape
        if len(shape) != 3 or not all(_positive_int(n) for n in shape):
            raise ConfigError(f"recipe.dataset.image_shape={list(shape)!r} is not valid; it "
                              "must be three positive integers (C, H, W)")
        training_augmentation(self.dataset.augmentation, self.dataset.preprocessing,
                              "recipe.dataset.augmentation")
        if not _positive_int(self.dataset.train_size):
            raise ConfigError(f"recipe.dataset.train_size={self.dataset.train_size!r} is not "
                              "valid; it must be a positive integer")
        if not _positive_int(self.num_classes) or self.num_classes < 2:
            raise ConfigError(f"recipe.num_classes={self.num_classes!r} is not valid; it must "
                              "be an integer >= 2")
        if not self.stages:
            raise ConfigError("recipe.stages is empty; a recipe needs at least one stage")
        for i, stage in enumerate(self.stages):
            if not isinstance(stage, TrainingStage):
                raise ConfigError(f"recipe.stages[{i}] is not a TrainingStage")
            stage.check(f"recipe.stages[{i}]")

    def to_dict(self) -> dict:
        """The recipe as plain JSON values (``pretrained`` only when set, as its sha256, and
        the dataset's ``augmentation`` only when not ``none``, so recipes without them keep
        their hashes)."""
        pretrained = ({} if self.pretrained is None
                      else {"pretrained": {"sha256": self.pretrained.sha256}})
        augmentation = ({} if self.dataset.augmentation == "none"
                        else {"augmentation": self.dataset.augmentation})
        return pretrained | {"model": self.model, "num_classes": self.num_classes,
                "model_options": {k: v for k, v in self.model_options},
                "dataset": {"name": self.dataset.name,
                            "preprocessing": self.dataset.preprocessing,
                            "image_shape": list(self.dataset.image_shape),
                            "train_size": self.dataset.train_size} | augmentation,
                "stages": [stage.to_dict() for stage in self.stages]}

    def model_node(self) -> dict[str, Any]:
        """The network as a ``conf/model`` node: ``{name, options}``."""
        return {"name": self.model, "options": dict(self.model_options)}

    @classmethod
    def from_dict(cls, values: dict) -> TrainingRecipe:
        """The recipe of a config section, whose ``model`` is the ``conf/model`` node
        (``{name, options}``), or of a dict such as :meth:`to_dict` writes (``recipe.json``, the
        configs of old records: ``model`` a name, ``model_options`` beside it)."""
        model, model_options = model_choice(values)
        known = {f.name for f in fields(cls)}
        for key in values:
            if key not in known:
                raise ConfigError(f"recipe.{key} is not a recipe field; fields: "
                                  f"{', '.join(sorted(known))}")
        dataset = dict(values.get("dataset") or {})
        dataset_keys = {f.name for f in fields(DatasetIdentity)}
        for key in dataset_keys | set(dataset):
            if key not in dataset_keys:
                raise ConfigError(f"recipe.dataset.{key} is not a dataset field; fields: "
                                  f"{', '.join(sorted(dataset_keys))}")
            if key not in dataset and key not in OPTIONAL_DATASET_KEYS:
                raise ConfigError(f"recipe.dataset.{key} is missing")
        stages = tuple(TrainingStage.from_dict(dict(stage), f"recipe.stages[{i}]")
                       for i, stage in enumerate(values.get("stages") or ()))
        return cls(model=model, dataset=DatasetIdentity(**dataset), stages=stages,
                   num_classes=values.get("num_classes", 10), model_options=model_options,
                   pretrained=PretrainedWeights.from_value(values.get("pretrained")))


def model_choice(values: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``(name, options)`` of a recipe dict's network: its ``model`` node (``{name, options}``,
    options null or absent for none) or the stored spelling (``model`` a name, ``model_options``
    beside it). Both at once, a node key other than ``name`` and ``options``, or options that
    are not a mapping is a one-line ConfigError naming the key."""
    model = values.get("model")
    if not isinstance(model, Mapping):
        return model, dict(values.get("model_options") or {})
    if "model_options" in values:
        raise ConfigError(f"recipe.model_options={values['model_options']!r} beside the model "
                          f"node: give the options as {MODEL_KEY}.options")
    unknown = sorted(set(model) - set(MODEL_NODE_KEYS))
    if unknown:
        raise ConfigError(f"{MODEL_KEY}.{unknown[0]} is not a key of the model node; keys: "
                          f"{', '.join(MODEL_NODE_KEYS)}")
    options = model.get("options") or {}
    if not isinstance(options, Mapping):
        raise ConfigError(f"{MODEL_KEY}.options={options!r} is not valid; it must be a mapping "
                          "of option names to values")
    return model.get("name"), dict(options)


def recipe_for(node: Any, identity: dict) -> TrainingRecipe:
    """The recipe of an experiment's ``network`` node (the model node, classes and stages, as a
    dict or a config node; a ``_target_`` key is ignored) trained on the data ``identity`` (name,
    preprocessing, image_shape, train_size, e.g. :meth:`TrainingSet.identity`)."""
    if isinstance(node, TrainingRecipe):
        values = node.to_dict()
    else:
        values = (OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig)
                  else dict(node))
    values.pop("_target_", None)
    values["dataset"] = dict(identity)
    recipe = TrainingRecipe.from_dict(values)
    recipe.check()
    return recipe


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def canonical_json(recipe: TrainingRecipe) -> str:
    """The recipe's JSON with sorted keys and no spaces: equal recipes give equal text."""
    return json.dumps(recipe.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)


def recipe_hash(recipe: TrainingRecipe) -> str:
    """First 12 hex digits of the SHA-256 of the recipe's canonical JSON."""
    return hashlib.sha256(canonical_json(recipe).encode()).hexdigest()[:HASH_DIGITS]


def network_dir(results_dir: Path | str, recipe: TrainingRecipe, seed: int) -> Path:
    """The folder that holds the network trained by ``recipe`` from ``seed``."""
    return (Path(results_dir) / "networks" / recipe.model / recipe.dataset.name
            / recipe_hash(recipe) / f"seed-{seed}")


@dataclass(frozen=True)
class StoredNetwork:
    """A trained network (in eval mode, on the requested device), its recipe hash, its folder,
    its per-epoch history and whether it was loaded (``reused``) rather than trained now."""

    module: nn.Module
    recipe_hash: str
    path: Path
    history: list[dict]
    reused: bool


def lenet5_mnist_recipe(train_size: int = 60_000) -> TrainingRecipe:
    """The Generalized Laplace notes' LeNet-5 recipe: Adam 1e-3, batch 128, 10 epochs, then 5
    epochs of fine-tuning with mean CE + (0.01 / 2) ||theta||^2 (a fresh Adam at 1e-3)."""
    return TrainingRecipe(
        model="lenet5",
        dataset=DatasetIdentity("mnist", "pixels/255", (1, 28, 28), train_size),
        stages=(TrainingStage(epochs=10, lr=1e-3, batch_size=128),
                TrainingStage(epochs=5, lr=1e-3, batch_size=128, weight_decay=0.01,
                              weight_decay_mode="objective")))


def trained_network(recipe: TrainingRecipe, seed: int, train_images: Tensor,
                    train_labels: Tensor, results_dir: Path | str | None = None,
                    device: str | torch.device | None = None, *,
                    on_epoch_end: Callable[[ClassifierCheckpoint], None] | None = None,
                    ) -> StoredNetwork:
    """The network of ``recipe`` trained from ``seed`` on ``train_images [N, C, H, W]`` and
    ``train_labels [N]``: loaded from the store when it is there, else trained (resuming from
    a checkpoint if an earlier run was interrupted) and saved.

    ``device`` (default CPU) is where the network trains and is returned. ``on_epoch_end``
    runs after each epoch's checkpoint is saved. The seed derives three independent streams:
    the initial weights, the minibatch order, the dropout RNG.
    """
    final = network_dir(default_results_dir() if results_dir is None else results_dir,
                        recipe, seed)
    device = torch.device("cpu" if device is None else device)
    check_training_data(recipe, train_images, train_labels)
    return stored_or_built(
        final, WEIGHTS_NAME, lambda path: load_network(path, recipe, seed, device),
        lambda _partial: train_and_store(recipe, seed, train_images, train_labels, final,
                                         device, on_epoch_end))


def load_network(path: Path, recipe: TrainingRecipe, seed: int,
                 device: str | torch.device | None = None) -> StoredNetwork:
    """The stored network in ``path`` (a finished ``seed-<seed>`` folder), on ``device``. A file
    of the folder that cannot be read, or lacks what the store wrote, is a one-line
    :class:`~bench.harness.stored_files.DamagedStoreFile` naming it."""
    saved = read_stored_json(path / RECIPE_NAME)
    if saved != recipe.to_dict():
        try:
            saved_hash = recipe_hash(TrainingRecipe.from_dict(saved))
        except (TypeError, ValueError, KeyError, AttributeError) as err:
            raise DamagedStoreFile(path / RECIPE_NAME,
                                   f"not a training recipe ({error_reason(err)})") from None
        raise ConfigError(f"{path / WEIGHTS_NAME}: its recipe.json (hash {saved_hash}) does "
                          f"not match the config's recipe (hash {recipe_hash(recipe)}); move "
                          "the folder away to retrain")
    module = fresh_network(recipe, seed)
    state = load_stored_tensors(path / WEIGHTS_NAME)
    if not all(isinstance(value, Tensor) for value in state.values()):
        raise DamagedStoreFile(path / WEIGHTS_NAME, "not a state dict of tensors")
    check_state_fits(module, state, f"{path / WEIGHTS_NAME}")
    module.load_state_dict(state)
    history = read_stored_json(path / HISTORY_NAME, ("epochs",))["epochs"]
    if not isinstance(history, list):
        raise DamagedStoreFile(path / HISTORY_NAME, "'epochs' is not a list")
    module = module.to(device) if device is not None else module
    return StoredNetwork(module.eval(), recipe_hash(recipe), Path(path), history, reused=True)


def fresh_network(recipe: TrainingRecipe, seed: int) -> nn.Module:
    """The untrained network of ``recipe`` and ``seed`` (on CPU): its initial weights drawn
    from the seed's first derived stream."""
    init = make_generator(derived_seed(seed, spawn_key=(0,)))
    return build_classifier(recipe.model, init, num_classes=recipe.num_classes,
                            in_channels=recipe.dataset.image_shape[0],
                            **dict(recipe.model_options))


def output_layer_entries(module: nn.Module) -> set[str]:
    """State-dict names of the module's output layer (its last ``nn.Linear``)."""
    name = next((n for n, m in reversed(list(module.named_modules()))
                 if isinstance(m, nn.Linear)), None)
    return set() if name is None else {f"{name}.weight", f"{name}.bias"}


def check_state_fits(module: nn.Module, state: dict, source: str) -> None:
    """A one-line ConfigError naming ``source`` unless ``state`` has exactly the entries of
    ``module``'s state dict, each of the same shape (a checkpoint of another architecture or
    width)."""
    own = module.state_dict()
    unexpected = sorted(set(state) - set(own))
    missing = sorted(set(own) - set(state))
    wrong = [(k, tuple(state[k].shape), tuple(v.shape)) for k, v in own.items()
             if k in state and tuple(state[k].shape) != tuple(v.shape)]
    if unexpected or missing or wrong:
        detail = (f"entry {wrong[0][0]} has shape {list(wrong[0][1])}, the network "
                  f"{list(wrong[0][2])}" if wrong else
                  f"missing {missing[:3]}, unexpected {unexpected[:3]}")
        raise ConfigError(f"{source} does not fit {type(module).__name__} ({detail}); it is "
                          "a checkpoint of another architecture")


def load_pretrained(module: nn.Module, weights: PretrainedWeights) -> list[str]:
    """Copy the state-dict file of ``weights`` into ``module`` and return the names of the
    entries left at their fresh initialisation: output-layer entries whose shape differs from
    the file's (a 1000-way ImageNet head on a 10-way network). A file whose SHA-256 changed,
    that lacks one of the module's entries (batch norm's ``num_batches_tracked`` aside), holds
    entries the module has not, or whose other entries differ in shape (another architecture
    or width) is a one-line ConfigError."""
    if weights.path is None:
        raise ConfigError(f"recipe.pretrained: the weights file with sha256 {weights.sha256} "
                          "is needed to train this network; give its path")
    if PretrainedWeights.from_file(weights.path).sha256 != weights.sha256:
        raise ConfigError(f"recipe.pretrained={weights.path!r} changed since the recipe was "
                          "made (its sha256 differs)")
    saved = torch.load(weights.path, map_location="cpu", weights_only=True)
    own = module.state_dict()
    unexpected = sorted(set(saved) - set(own))
    missing = sorted(k for k in set(own) - set(saved) if not k.endswith("num_batches_tracked"))
    if unexpected or missing:
        raise ConfigError(f"recipe.pretrained={weights.path!r} does not fit {type(module).__name__}"
                          f": missing {missing[:3]}, unexpected {unexpected[:3]}")
    fresh = [k for k, v in own.items() if k in saved and saved[k].shape != v.shape]
    other = [k for k in fresh if k not in output_layer_entries(module)]
    if other:
        raise ConfigError(f"recipe.pretrained={weights.path!r} does not fit "
                          f"{type(module).__name__}: entry {other[0]} has shape "
                          f"{list(saved[other[0]].shape)}, the network "
                          f"{list(own[other[0]].shape)} (only the output layer may differ)")
    module.load_state_dict({k: v for k, v in saved.items() if k not in fresh}, strict=False)
    return fresh


def check_training_data(recipe: TrainingRecipe, images: Tensor, labels: Tensor) -> None:
    """A one-line ConfigError when ``images`` / ``labels`` do not fit the recipe's data."""
    shape = tuple(recipe.dataset.image_shape)
    if images.ndim != 4 or tuple(images.shape[1:]) != shape:
        raise ConfigError(f"recipe.dataset.image_shape={list(shape)} does not match the "
                          f"training images of shape {list(images.shape)}")
    if len(images) != recipe.dataset.train_size or len(labels) != len(images):
        raise ConfigError(f"recipe.dataset.train_size={recipe.dataset.train_size} does not "
                          f"match {len(images)} training images and {len(labels)} labels")
    if labels.dtype != torch.long or int(labels.min()) < 0 or \
            int(labels.max()) >= recipe.num_classes:
        raise ConfigError(f"recipe.num_classes={recipe.num_classes} needs int64 labels in "
                          f"[0, {recipe.num_classes}), got {labels.dtype} labels in "
                          f"[{int(labels.min())}, {int(labels.max())}]")


def batch_generator(seed: int) -> torch.Generator:
    """The minibatch (and augmentation) generator of the network of ``seed``."""
    return make_generator(derived_seed(seed, spawn_key=(1,)))


def dropout_seed(seed: int) -> int:
    """The seed of the dropout RNG of the network of ``seed``."""
    return derived_seed(seed, spawn_key=(2,))


def saved_checkpoint(partial: Path) -> ClassifierCheckpoint | None:
    """The checkpoint of an interrupted run in ``partial`` (None when there is none; a damaged
    one is deleted with a warning)."""
    checkpoint_path = partial / CHECKPOINT_NAME
    saved = load_checkpoint(checkpoint_path)
    if saved is None:
        return None
    try:
        resume = ClassifierCheckpoint.from_dict(saved)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        discard_checkpoint(checkpoint_path, f"not a training checkpoint: {error_reason(err)}")
        return None
    logger.info("resuming %s from stage %d epoch %d", partial, resume.stage + 1,
                resume.loop.epochs_done)
    return resume


def save_checkpoint(partial: Path, checkpoint: ClassifierCheckpoint) -> None:
    """Write ``checkpoint`` as the interrupted-run checkpoint of ``partial``."""
    save_atomically(partial / CHECKPOINT_NAME, lambda f: torch.save(checkpoint.to_dict(), f))


def train_and_store(recipe: TrainingRecipe, seed: int, images: Tensor, labels: Tensor,
                    final: Path, device: torch.device,
                    on_epoch_end: Callable[[ClassifierCheckpoint], None] | None
                    ) -> StoredNetwork:
    """Train the network of ``recipe`` and ``seed`` in ``<final>.partial`` (resuming its
    checkpoint) and publish it as ``final``; the caller holds the folder's lock."""
    partial = final.with_name(f"{final.name}.partial")
    partial.mkdir(parents=True, exist_ok=True)
    resume = saved_checkpoint(partial)

    def checkpoint_epoch(checkpoint: ClassifierCheckpoint) -> None:
        save_checkpoint(partial, checkpoint)
        if on_epoch_end is not None:
            on_epoch_end(checkpoint)

    module = fresh_network(recipe, seed)
    kept_fresh: list[str] = []
    if recipe.pretrained is not None:
        kept_fresh = load_pretrained(module, recipe.pretrained)
        logger.info("%s starts from %s; freshly initialised: %s", recipe.model,
                    recipe.pretrained.path, ", ".join(kept_fresh) or "nothing")
    module = module.to(device)
    started = time.perf_counter()
    augment = training_augmentation(recipe.dataset.augmentation, recipe.dataset.preprocessing,
                                    "recipe.dataset.augmentation")
    history = train_classifier(
        module, images, labels, recipe.stages, generator=batch_generator(seed),
        dropout_seed=dropout_seed(seed), on_epoch_end=checkpoint_epoch,
        resume=resume, desc=f"{recipe.model}/{recipe.dataset.name} seed {seed}",
        augment=augment)
    return publish_trained(recipe, seed, module, history, final,
                           {"seconds_this_run": time.perf_counter() - started,
                            "device": str(device), "kept_fresh": kept_fresh})


def publish_trained(recipe: TrainingRecipe, seed: int, module: nn.Module, history: list[dict],
                    final: Path, run: dict) -> StoredNetwork:
    """Write the trained ``module`` (weights, recipe, history) into ``<final>.partial``, drop
    its checkpoint and rename the folder to ``final``. ``run``: ``seconds_this_run``,
    ``device``, ``kept_fresh`` (pretrained entries left fresh) and optionally
    ``trained_together_with`` (the seeds of a stacked run), written to the history."""
    partial = final.with_name(f"{final.name}.partial")
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    save_atomically(partial / WEIGHTS_NAME, lambda f: torch.save(state, f))
    write_json(partial / RECIPE_NAME, recipe.to_dict())
    together = ({} if "trained_together_with" not in run
                else {"trained_together_with": run["trained_together_with"]})
    write_json(partial / HISTORY_NAME, {
        "recipe_hash": recipe_hash(recipe), "seed": seed, "device": run["device"],
        "torch": torch.__version__, "seconds_this_run": run["seconds_this_run"],
        "seconds_all_epochs": sum(epoch["seconds"] for epoch in history), "epochs": history,
        "initial_weights": ("fresh" if recipe.pretrained is None else
                            {"pretrained_sha256": recipe.pretrained.sha256,
                             "kept_fresh": run["kept_fresh"]})} | together)
    (partial / CHECKPOINT_NAME).unlink(missing_ok=True)
    publish_folder(partial, final)
    return StoredNetwork(module.eval(), recipe_hash(recipe), final, history, reused=False)
