"""The MAP network recipe of an image-classification experiment: its ``network`` node (model
and stages) with the identity of the training data it sees.

Shared by the tasks that train (or load) the MAP network of a recipe and seed from the
trained-network store: the tempered Laplace (Generalized Laplace Figures 3-5) and the
classification methods of Laplace Redux (:mod:`bench.jobs.classification_runner`).
"""

from __future__ import annotations

from omegaconf import DictConfig

from bench.datasets.image_classification import ImageClassificationData
from bench.training.network_store import TrainingRecipe, recipe_for


def network_recipe(node: DictConfig, data: ImageClassificationData, n_train: int
                   ) -> TrainingRecipe:
    """The experiment's ``network`` node (model and stages) with the training data it sees
    (its augmentation named only when there is one, as ``TrainingSet.identity`` does)."""
    augmentation = {} if data.augmentation == "none" else {"augmentation": data.augmentation}
    return recipe_for(node, {"name": data.images, "preprocessing": data.normalisation,
                             "image_shape": list(data.input_shape), "train_size": n_train}
                      | augmentation)


def initial_weights(recipe: TrainingRecipe) -> str:
    """What the MAP network's training started from, for the record."""
    if recipe.pretrained is None:
        return "trained from scratch (no pretrained weights given)"
    return f"fine-tuned from pretrained weights, sha256 {recipe.pretrained.sha256}"
