"""DE: a deep ensemble of MAP classifiers (Lakshminarayanan et al., 2017), as Laplace Redux runs it.

``members`` networks per model seed (notes section 3): member 0 *is* the trained MAP network
``base`` of this seed; member ``k >= 1`` is the same training recipe run from the seed
``derived_seed([seed, k])`` through :func:`bench.training.network_store.trained_network`, so
members are stored, reused by every experiment naming the recipe, and resumed after an
interruption like any MAP network. The predictive is the mean of the members' softmaxes.

``training`` says how the missing members are trained, not what they are: ``batched`` (the
default) trains them together as one stacked network
(:func:`bench.training.stored_network_set.trained_networks`; recipes with batch norm or dropout
fall back to one by one), ``sequential`` one after the other. Both give the same networks
within float rounding (tested) under the same store folders, so either reuses what the other
stored, and the key is left out of the record hash (``NON_SEMANTIC_PATHS``).

The recipe is the experiment's ``network`` node (model, options, stages; the training data's
identity comes from ``data.identity()``). When ``network`` is null the base's own stored
recipe (its ``recipe.json``) is used, so the members repeat exactly how member 0 was trained.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError, require_choice, require_positive_int
from bench.harness.rng import derived_seed
from bench.methods.baselines.map_classifier import batched_logits
from bench.methods.laplace.classification import network_of
from bench.methods.settings import PredictionSettings, settings_node
from bench.predictive.categorical import Categorical
from bench.training.network_store import RECIPE_NAME, TrainingRecipe, recipe_for, recipe_hash
from bench.training.stored_network_set import trained_networks

TRAINING_PATHS = ("batched", "sequential")


def member_seed(seed: int, member: int) -> int:
    """The training seed of ensemble member ``member >= 1`` of model seed ``seed``."""
    return derived_seed([seed, member])


@dataclass
class ClassifierEnsemble:
    """Mean softmax of ``members`` independently trained MAP networks, member 0 the base."""

    name: str = "DE"
    members: int = 5
    network: Any = None
    prediction: PredictionSettings = PredictionSettings(batch_size=1024)
    device: str = "cpu"
    training: str = "batched"
    fits_on_base: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.prediction = settings_node(PredictionSettings, self.prediction)
        require_positive_int("method.members", self.members)
        require_choice("method.training", self.training, TRAINING_PATHS)
        if self.network is not None and not isinstance(self.network, dict | TrainingRecipe):
            raise ConfigError(f"method.network={self.network!r} is not valid; it must be the "
                              "experiment's network node (model and stages) or null")

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict:
        """Keep ``base`` as member 0 and load or train members 1..members-1; returns the
        recipe hash, the member seeds and which members were trained now."""
        if base is None:
            raise ValueError("ClassifierEnsemble.fit needs the trained network (base=)")
        recipe = self.member_recipe(data, base)
        self.networks: list[nn.Module] = [network_of(base).to(self.device).eval()]
        seeds = [member_seed(seed, k) for k in range(1, self.members)]
        stored = trained_networks(recipe, seeds, data.train_inputs, data.train_labels,
                                  data.results_dir, self.device,
                                  together=self.training == "batched")
        self.networks += [network.module.eval() for network in stored]
        return {"recipe_hash": recipe_hash(recipe), "member_seeds": [seed, *seeds],
                "members_trained_now": [k for k, network in enumerate(stored, start=1)
                                        if not network.reused]}

    def member_recipe(self, data: TrainingSet, base: Any) -> TrainingRecipe:
        """The recipe of members 1.., from ``network`` and ``data``, else the base's stored
        recipe; a recipe that differs from the base's (by its hash) is a ConfigError."""
        base_hash = getattr(base, "recipe_hash", None)
        if self.network is not None:
            recipe = recipe_for(self.network, data.identity())
            if base_hash is not None and recipe_hash(recipe) != base_hash:
                raise ConfigError(f"method.network gives recipe hash {recipe_hash(recipe)}, "
                                  f"but the base network was trained by recipe {base_hash}; "
                                  "the members must repeat the base's recipe")
            return recipe
        stored = Path(getattr(base, "path", "")) / RECIPE_NAME
        if base_hash is None or not stored.is_file():
            raise ConfigError("method.network is null and the base is not a stored network; "
                              "give the network node (model and stages) the members train by")
        return TrainingRecipe.from_dict(json.loads(stored.read_text(encoding="utf-8")))

    def predict(self, x: Tensor) -> Categorical:
        """The mean over members of ``softmax(f_k(x))`` per row of ``x``."""
        probs = [torch.softmax(batched_logits(network, x, self.prediction.batch_size,
                                              self.device), dim=-1)
                 for network in self.networks]
        return Categorical.mean_of(torch.stack(probs))

    def stored_tensors(self) -> dict[str, Tensor]:
        """Every member's parameters and buffers, keyed ``member<k>.<name>``."""
        return {f"member{k}.{name}": tensor for k, network in enumerate(self.networks)
                for name, tensor in network.state_dict().items()}
