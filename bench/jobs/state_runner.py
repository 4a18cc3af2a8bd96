"""The runner of measurements of fitted methods' states (Laplace Redux Table 5): generated
images -> the base network -> every variant fitted on its own copy and predicting once -> the
task's measurement of the fitted method -> cells.

:class:`StateRunner`: the dataset node (:class:`~bench.datasets.generated_images.
GeneratedImages`: a handful of images of the shape the state depends on) and the experiment's
``network`` node give the recipe; the base network is trained on them (``network_s``) into a
scratch folder under the results folder, removed after the job, where everything the methods
store while fitting goes too. Each variant of the task's method node (``node(cfg, recipe)``)
is asked for the task's capability, fitted (on its own deep copy of the base network where it
fits on one) and predicts once on the test images, so lazily built caches exist
(``<row>/fit_predict_s``); then ``measure(cfg, job, row, method, diagnostics)`` fills the
record.
"""

from __future__ import annotations

import copy
import dataclasses
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from bench.datasets.generated_images import GeneratedImages
from bench.datasets.image_classification import ImageSplits
from bench.datasets.training_set import TrainingSet
from bench.harness.fitted_variants import fitted_variants
from bench.harness.result import TaskResult
from bench.harness.timing import Stopwatch
from bench.training.network_store import StoredNetwork, TrainingRecipe, trained_network

PREPROCESSING = "standard_normal"


def generated_images_recipe(cfg: DictConfig, data: GeneratedImages) -> TrainingRecipe:
    """The experiment's ``network`` node with the generated images' identity."""
    values: dict[str, Any] = OmegaConf.to_container(cfg.network, resolve=True)
    values["dataset"] = {"name": data.name, "preprocessing": PREPROCESSING,
                         "image_shape": list(data.input_shape), "train_size": data.n_train}
    return TrainingRecipe.from_dict(values)


def copied_module(stored: StoredNetwork) -> StoredNetwork:
    """``stored`` with a deep copy of its module (a method may change the network it is
    handed; the next row gets the stored one)."""
    return dataclasses.replace(stored, module=copy.deepcopy(stored.module))


@dataclass
class StateJob:
    """What every variant of one job shares: the recipe, the trained base network, the
    splits and the record being filled."""

    recipe: TrainingRecipe
    stored: StoredNetwork
    splits: ImageSplits
    result: TaskResult = field(default_factory=TaskResult)


@dataclass(frozen=True)
class StateRunner:
    """Base network -> each variant of ``node(cfg, recipe)`` fitted and predicting once ->
    ``measure`` (module docstring); ``describe(cfg, job)`` adds what the record says of the
    network before the first variant."""

    protocol: type
    node: Callable[[DictConfig, TrainingRecipe], DictConfig]
    describe: Callable[[DictConfig, StateJob], None]
    measure: Callable[[DictConfig, StateJob, str, Any, dict], None]

    def run(self, cfg: DictConfig) -> TaskResult:
        """One job's record."""
        data: GeneratedImages = instantiate(cfg.dataset)
        seed, device = int(cfg.seed), str(cfg.device)
        splits = data.splits(seed)
        recipe = generated_images_recipe(cfg, data)
        node = self.node(cfg, recipe)
        Path(cfg.results_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".memory-scratch-",
                                         dir=cfg.results_dir) as scratch:
            watch = Stopwatch()
            stored = trained_network(recipe, seed, splits.x_train, splits.y_train, scratch,
                                     device)
            job = StateJob(recipe, stored, splits,
                           TaskResult(timings={"network_s": watch.elapsed()}))
            self.describe(cfg, job)
            training = TrainingSet(splits.x_train, splits.y_train, data.name, PREPROCESSING,
                                   scratch, device)
            for variant in fitted_variants(node, training, seed, posterior=cfg.get("posterior"),
                                           protocol=self.protocol, base=stored,
                                           base_copy=copied_module):
                watch = Stopwatch()
                variant.method.predict(splits.x_test)
                job.result.timings[f"{variant.row}/fit_predict_s"] = (variant.fit_s
                                                                      + watch.elapsed())
                self.measure(cfg, job, variant.row, variant.method, variant.diagnostics)
                del variant
        return job.result
