"""Memory of a method's state (Laplace Redux Table 5), measured from the real objects.

One job = one method node; each of its variants is a row (``laplace_classifier``: LA and
LA*), fitted through :func:`bench.harness.fitted_variants.fitted_variants`.
The job builds the method's real state on the experiment's ``network`` (WRN-16-4, 10 classes)
without real training: the data set is a handful of generated images of CIFAR-10's shape
(:mod:`bench.datasets.generated_images`), the base network is the ``network`` recipe trained
for its (one) epoch on them, and ``memory.method_overrides[<method name>]`` cuts each method's
training to the least that still yields a state of the paper's size (the counts that decide
the size stay: 5 DE members, 40 SWAG snapshots of rank 40, 12 CSGHMC samples). Methods that
build their own network (a ``model`` sub-node: BBB, CSGHMC) get the
experiment's. Each row is fitted on its own copy of the base network, predicts once on the test
images (so lazily built caches exist, e.g. the full Laplace's posterior scale) and is measured
by :func:`bench.metrics.memory.stored_bytes` over ``method.stored_tensors()``: what it needs to
predict. Everything the methods store while fitting goes to a scratch folder under the results
folder, removed after the job.

Cells of row ``<row>`` (renamed by ``memory.paper_rows``, e.g. BBB -> VB as the paper's table
names it): ``memory.column`` (decimal MB, e.g. ``mem_wrn16-4_cifar10``), ``bytes``,
``buffers_mb`` (the part that is the network's buffers: BatchNorm running statistics and
counters, which the paper's M, the parameter count, leaves out) and, for rows that have a
formula in ``memory.analytic``, ``analytic_mb``: the paper's complexity ``c_M M + c_H2 H^2 +
c_K2 K^2`` in the parameters' element size, with M the network's parameter count, H the last
layer's input width and K the number of classes. ``fitted.parts_bytes[<row>]`` splits each row
by where the tensors live (the first two components of their names, each storage counted once).

A method whose objects also keep tensors alive that it never reads to predict
(:class:`~bench.contracts.capabilities.HoldsUnreadTensors`: LA and LA*, whose laplace-torch
object holds the parameters of the harness's deep copy of the network in ``la.params``) gets a
second row, ``<row> (as held, incl. the harness's copy)``
(:func:`bench.metrics.memory.as_held_row`): the same cells over everything held, plus
``unread_mb``, the bytes of the unread storages. The method node must be
:class:`~bench.contracts.capabilities.StoredTensors` (one line before the job otherwise).
"""

from __future__ import annotations

import copy
import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from bench.contracts.capabilities import HoldsUnreadTensors, StoredTensors
from bench.datasets.generated_images import GeneratedImages
from bench.datasets.training_set import TrainingSet
from bench.harness.fitted_variants import fitted_variants
from bench.harness.method_nodes import merged_method_node, method_arguments, method_class
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.metrics.memory import analytic_count, as_held_row, megabytes, stored_bytes
from bench.models.classifiers import count_parameters
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


def last_layer_width(network: nn.Module) -> int:
    """Input width H of the network's last ``nn.Linear`` (its features)."""
    linears = [m for m in network.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError(f"{type(network).__name__} has no nn.Linear layer")
    return linears[-1].in_features


def is_buffer(name: str, buffer_names: set[str]) -> bool:
    """Whether a stored tensor's name ends with the full name of one of the network's buffers
    (``members.3.features.1.bn1.running_mean`` ends with ``features.1.bn1.running_mean``)."""
    return any(name == b or name.endswith(f".{b}") for b in buffer_names)


def parts_bytes(tensors: dict[str, Tensor]) -> dict[str, int]:
    """Bytes per part (the first two components of a tensor's name), each storage counted once,
    in the part where it first appears."""
    parts: dict[str, dict[str, Tensor]] = {}
    counted: set[tuple[str, int]] = set()
    for name, tensor in tensors.items():
        key = (str(tensor.device), tensor.untyped_storage().data_ptr())
        if key in counted:
            continue
        counted.add(key)
        parts.setdefault(".".join(name.split(".")[:2]), {})[name] = tensor
    return {part: stored_bytes(members) for part, members in parts.items()}


def add_memory_cells(result: TaskResult, row: str, column: str, tensors: dict[str, Tensor],
                     buffer_names: set[str]) -> None:
    """Cells ``column`` (decimal MB), ``bytes`` and ``buffers_mb`` of ``row`` over
    ``tensors``, each storage once, and the row's ``fitted.parts_bytes``."""
    n_bytes = stored_bytes(tensors)
    buffers = stored_bytes({k: t for k, t in tensors.items() if is_buffer(k, buffer_names)})
    result.add(row, column, megabytes(n_bytes))
    result.add(row, "bytes", n_bytes)
    result.add(row, "buffers_mb", megabytes(buffers))
    result.fitted["parts_bytes"][row] = parts_bytes(tensors)


def memory_method_node(cfg: DictConfig, recipe: TrainingRecipe) -> DictConfig:
    """The method node with ``memory.method_overrides[<name>]`` merged in, and the experiment's
    network for methods that build their own (a ``model`` sub-node)."""
    node = cfg.method
    overrides = OmegaConf.to_container(cfg.memory.get("method_overrides") or {}, resolve=True)
    extra: dict[str, Any] = dict(overrides.get(str(node.name)) or {})
    accepted = method_arguments(method_class(node))
    if "model" in accepted:
        extra.setdefault("model", recipe.model_node())
    return merged_method_node(node, extra)


def describe_network(result: TaskResult, stored: StoredNetwork, recipe: TrainingRecipe) -> None:
    """What the analytic formulas read from the base network, into ``fitted``."""
    network = stored.module
    result.fitted.update({
        "n_parameters": count_parameters(network), "last_layer_width": last_layer_width(network),
        "num_classes": recipe.num_classes,
        "parameter_bytes": next(network.parameters()).element_size(),
        "n_buffer_values": sum(b.numel() for b in network.buffers()),
        "recipe_hash": stored.recipe_hash, "parts_bytes": {}, "diagnostics": {}})


def memory_cells(cfg: DictConfig, result: TaskResult, stored: StoredNetwork, row: str,
                 method: StoredTensors, diagnostics: dict) -> None:
    """The row's memory cells (after ``memory.paper_rows``), its analytic size where the
    experiment gives a formula, and the as-held row of a method holding unread tensors."""
    memory, fitted = cfg.memory, result.fitted
    buffer_names = {name for name, _ in stored.module.named_buffers()}
    analytic = OmegaConf.to_container(memory.get("analytic") or {}, resolve=True)
    tensors = method.stored_tensors()
    paper_row = str(dict(memory.get("paper_rows") or {}).get(row, row))
    add_memory_cells(result, paper_row, str(memory.column), tensors, buffer_names)
    if paper_row in analytic:
        count = analytic_count(analytic[paper_row], fitted["n_parameters"],
                               fitted["last_layer_width"], fitted["num_classes"])
        result.add(paper_row, "analytic_mb", megabytes(int(count) * fitted["parameter_bytes"]))
    unread = method.unread_tensors() if isinstance(method, HoldsUnreadTensors) else {}
    if unread:
        held_row = as_held_row(paper_row)
        add_memory_cells(result, held_row, str(memory.column), {**tensors, **unread},
                         buffer_names)
        result.add(held_row, "unread_mb", megabytes(stored_bytes(unread)))
    fitted["diagnostics"][paper_row] = diagnostics


@takes(datasets=(GeneratedImages,), methods=(StoredTensors,))
def run(cfg: DictConfig) -> TaskResult:
    """Train the base network on the generated images (``network_s``) into a scratch folder
    under the results folder (removed after the job, with everything the methods store while
    fitting), then fit every row of the method node on its own copy of it, predict once on
    the test images (``<row>/fit_predict_s``) and measure its stored state."""
    data: GeneratedImages = instantiate(cfg.dataset)
    seed, device = int(cfg.seed), str(cfg.device)
    splits = data.splits(seed)
    recipe = generated_images_recipe(cfg, data)
    node = memory_method_node(cfg, recipe)
    Path(cfg.results_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".memory-scratch-", dir=cfg.results_dir) as scratch:
        watch = Stopwatch()
        stored = trained_network(recipe, seed, splits.x_train, splits.y_train, scratch, device)
        result = TaskResult(timings={"network_s": watch.elapsed()})
        describe_network(result, stored, recipe)
        training = TrainingSet(splits.x_train, splits.y_train, data.name, PREPROCESSING,
                               scratch, device)
        for variant in fitted_variants(node, training, seed, posterior=cfg.get("posterior"),
                                       protocol=StoredTensors, base=stored,
                                       base_copy=copied_module):
            watch = Stopwatch()
            variant.method.predict(splits.x_test)
            result.timings[f"{variant.row}/fit_predict_s"] = variant.fit_s + watch.elapsed()
            memory_cells(cfg, result, stored, variant.row, variant.method, variant.diagnostics)
            del variant
    return result
