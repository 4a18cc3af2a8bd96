"""Memory of a method's state (Laplace Redux Table 5), measured from the real objects.

One job = one method node, through :class:`~bench.jobs.state_runner.StateRunner`; each of
its variants is a row (``laplace_classifier``: LA and LA*).
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

from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from bench.contracts.capabilities import HoldsUnreadTensors, StoredTensors
from bench.datasets.generated_images import GeneratedImages
from bench.harness.method_nodes import merged_method_node, method_arguments, method_class
from bench.harness.result import TaskResult
from bench.harness.task_inputs import takes
from bench.jobs.state_runner import StateJob, StateRunner
from bench.metrics.memory import analytic_count, as_held_row, megabytes, stored_bytes
from bench.models.classifiers import count_parameters
from bench.training.network_store import TrainingRecipe


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


def describe_network(cfg: DictConfig, job: StateJob) -> None:
    """What the analytic formulas read from the base network, into ``fitted``."""
    network, recipe = job.stored.module, job.recipe
    job.result.fitted.update({
        "n_parameters": count_parameters(network), "last_layer_width": last_layer_width(network),
        "num_classes": recipe.num_classes,
        "parameter_bytes": next(network.parameters()).element_size(),
        "n_buffer_values": sum(b.numel() for b in network.buffers()),
        "recipe_hash": job.stored.recipe_hash, "parts_bytes": {}, "diagnostics": {}})


def memory_cells(cfg: DictConfig, job: StateJob, row: str, method: StoredTensors,
                 diagnostics: dict) -> None:
    """The row's memory cells (after ``memory.paper_rows``), its analytic size where the
    experiment gives a formula, and the as-held row of a method holding unread tensors."""
    memory, result, fitted = cfg.memory, job.result, job.result.fitted
    buffer_names = {name for name, _ in job.stored.module.named_buffers()}
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


RUNNER = StateRunner(StoredTensors, memory_method_node, describe_network, memory_cells)


@takes(datasets=(GeneratedImages,), methods=(StoredTensors,))
def run(cfg: DictConfig) -> TaskResult:
    """Fit every row of the method node on generated images and measure its stored state."""
    return RUNNER.run(cfg)
