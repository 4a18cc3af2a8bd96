"""Explaining a binary classifier's predictions by its Laplace-GGN Gaussian process.

GGN thesis Figure 5.6 (section 5.3, reproduction notes section 6): a one-logit CNN trained on
binary MNIST 4 vs 9 (the trained-network store, one network per recipe and seed), then
:class:`bench.methods.laplace.gp_view.GaussianProcessView` at the trained ``theta*``: the
training importances ``a_i = y_i - s(f_i)`` (Fig. 5.6a, sorted, with example images at both
ends and in the middle), the kernel ``kappa(x*, x_i) = delta^-1 J(x*) J(x_i)^T`` between test
and training images (Fig. 5.6b: one correctly classified and the two most confidently
misclassified test images, each with its 8 training images of largest kernel value), and the
self-check ``f(x*) = m(x*) + sum_i a_i kappa(x*, x_i)`` over the whole test set.

Training objective: the MAP objective ``sum_i BCE_i + (delta / 2) |theta|^2`` divided by N,
i.e. each stage of the experiment's ``network`` node minimises the mean cross-entropy of the
two-class logits ``[0, f]`` plus ``(delta / (2N)) |theta|^2``; the task sets that weight decay
from ``method.prior_precision`` and the number of training images (a stage may not set its
own), so the trained network is the mode of the posterior the GP view assumes.

Cells (row :data:`ROW`, the targets file's): ``N_train``, ``P``, ``conv_layers``,
``linear_layers`` (counted on the network), ``delta`` and ``max_abs_residual`` (max |a_i|);
row :data:`CHECK_ROW`: accuracies, the self-check's relative error, the norm of the MAP
objective's gradient ``|grad L|`` (0 at a stationary ``theta*``) and its relative size
``|grad L| / |delta theta*|``, and the share of test images whose GP-view mean has the
network's sign. Arrays hold the sorted importances and every image the figure draws
(``pixels``: round(255 x) of the [0, 1] pixels, flattened row-major).
"""

from __future__ import annotations

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from bench.contracts.capabilities import KernelExplanations
from bench.datasets.class_subset import ClassSubsetImageData
from bench.datasets.training_set import TrainingSet
from bench.harness.errors import ConfigError
from bench.harness.method_nodes import instantiate_method
from bench.harness.result import TaskResult
from bench.harness.rng import derived_seed, make_generator
from bench.harness.task_inputs import capability, takes
from bench.harness.timing import Stopwatch
from bench.methods.laplace.gp_view import self_check_error
from bench.models.classifiers import bernoulli_logit_network
from bench.training.network_store import TrainingRecipe, recipe_for, trained_network

ROW = "binary MNIST 4 vs 9 (CNN)"
CHECK_ROW = "GP view"
N_NEIGHBOURS = 8
N_END_EXAMPLES = 6
N_MIDDLE_EXAMPLES = 4
N_MISCLASSIFIED = 2
CORRECT_PICK_STREAM = 7


def network_recipe(node: DictConfig, data: ClassSubsetImageData, n_train: int,
                   prior_precision: float) -> TrainingRecipe:
    """The experiment's ``network`` node with every stage's objective set to
    ``mean BCE + (delta / (2 n_train)) |theta|^2`` and the training data's identity."""
    values = OmegaConf.to_container(node, resolve=True)
    stages = []
    for i, stage in enumerate(values.get("stages") or ()):
        for key in ("weight_decay", "weight_decay_mode"):
            if key in stage:
                raise ConfigError(f"network.stages[{i}].{key} is set from "
                                  "method.prior_precision / n_train; remove it")
        stages.append({**stage, "weight_decay": prior_precision / n_train,
                       "weight_decay_mode": "objective"})
    values["stages"] = stages
    name = f"{data.images}_" + "v".join(str(c) for c in data.classes)
    return recipe_for(values, {"name": name, "preprocessing": data.normalisation,
                               "image_shape": list(data.input_shape), "train_size": n_train})


def pixels(images: Tensor) -> list[int]:
    """``round(255 x)`` of [0, 1] images, flattened row-major (the figure's image data)."""
    return [int(v) for v in (images.detach().cpu().double().clamp(0, 1) * 255).round()
            .reshape(-1).tolist()]


def layer_counts(network: nn.Module) -> tuple[int, int]:
    """Number of Conv2d and of Linear layers of ``network``."""
    modules = list(network.modules())
    return (sum(isinstance(m, nn.Conv2d) for m in modules),
            sum(isinstance(m, nn.Linear) for m in modules))


def chosen_test_images(f: Tensor, y: Tensor, seed: int) -> tuple[list[int], list[str]]:
    """Indices of one correctly classified test image (drawn from ``seed``'s stream) and the
    two most confidently misclassified ones (largest |f| among the errors), with their kinds
    ``correct`` / ``misclassified``; fewer when there are fewer of a kind."""
    predicted = (f > 0).long()
    correct = (predicted == y).nonzero().squeeze(1)
    wrong = (predicted != y).nonzero().squeeze(1)
    chosen, kinds = [], []
    if len(correct):
        generator = make_generator(derived_seed(seed, spawn_key=(CORRECT_PICK_STREAM,)))
        pick = torch.randint(len(correct), (1,), generator=generator)
        chosen.append(int(correct[pick]))
        kinds.append("correct")
    confident = wrong[f[wrong].abs().argsort(descending=True)][:N_MISCLASSIFIED]
    chosen += [int(i) for i in confident]
    kinds += ["misclassified"] * len(confident)
    return chosen, kinds


def importance_examples(importances: Tensor) -> Tensor:
    """Positions in the ascending order of ``importances`` shown as examples: the
    :data:`N_END_EXAMPLES` lowest, :data:`N_MIDDLE_EXAMPLES` around the median and the
    :data:`N_END_EXAMPLES` highest (each position once)."""
    n = len(importances)
    ends = min(N_END_EXAMPLES, n // 2)
    start = max(0, n // 2 - N_MIDDLE_EXAMPLES // 2)
    positions = [*range(ends), *range(start, min(n, start + N_MIDDLE_EXAMPLES)),
                 *range(n - ends, n)]
    return torch.tensor(sorted(set(positions)), dtype=torch.long)


def binary_data(cfg: DictConfig) -> ClassSubsetImageData:
    """The dataset node; a one-line ConfigError unless it has exactly two classes."""
    data: ClassSubsetImageData = instantiate(cfg.dataset)
    if data.num_classes != 2:
        raise ConfigError(f"dataset.classes={list(data.classes)} is not valid here; the GP "
                          "view needs exactly two classes")
    return data


def fitted_gp_view(cfg: DictConfig, data: ClassSubsetImageData, method: KernelExplanations,
                   splits, result: TaskResult):
    """Train (or load) the network at the method's prior precision (``network_s``) and fit
    the GP view at it (``fit_s``); the stored network and the fit diagnostics."""
    seed = int(cfg.seed)
    recipe = network_recipe(cfg.network, data, len(splits.x_train), method.prior_precision)
    watch = Stopwatch()
    stored = trained_network(recipe, seed, splits.x_train, splits.y_train, cfg.results_dir,
                             cfg.device)
    result.timings["network_s"] = watch.elapsed()
    result.fitted.update({"recipe_hash": stored.recipe_hash, "network_reused": stored.reused,
                          "network_path": str(stored.path),
                          "train_indices": splits.train_indices.tolist()})
    watch = Stopwatch()
    training = TrainingSet(splits.x_train, splits.y_train, recipe.dataset.name,
                           data.normalisation, str(cfg.results_dir), str(cfg.device))
    diagnostics = method.fit(training, seed, base=stored.module)
    result.timings["fit_s"] = watch.elapsed()
    result.fitted.update(diagnostics)
    return stored, diagnostics


def explanation_cells(result: TaskResult, method: KernelExplanations, terms, y_test: Tensor,
                      network: nn.Module, diagnostics: dict, n_train: int) -> None:
    """Row :data:`ROW` (the network and data) and row :data:`CHECK_ROW` (the checks), the
    checks and the decomposition's norms as metrics."""
    importances = method.importances
    conv, linear = layer_counts(bernoulli_logit_network(network))
    for column, value in (("N_train", n_train), ("P", diagnostics["n_params"]),
                          ("conv_layers", conv), ("linear_layers", linear),
                          ("delta", method.prior_precision),
                          ("max_abs_residual", float(importances.abs().max()))):
        result.add(ROW, column, value)
    checks = {
        "train_accuracy": diagnostics["train_accuracy"],
        "test_accuracy": float(((terms.f > 0).long() == y_test).double().mean()),
        "self_check_relative_error": self_check_error(terms.f, terms.gp_mean),
        "gradient_norm": diagnostics["gradient_norm"],
        "relative_gradient_norm": diagnostics["relative_gradient_norm"],
        "gp_sign_agreement": float(((terms.gp_mean > 0) == (terms.f > 0)).double().mean()),
        "share_abs_importance_above_0.2": float((importances.abs() > 0.2).double().mean()),
    }
    for column, value in checks.items():
        result.add(CHECK_ROW, column, value)
    result.metrics.update(checks)
    result.metrics["map_objective"] = diagnostics["map_objective"]
    result.metrics["self_check_max_abs_error"] = float((terms.gp_mean - terms.f).abs().max())
    logit_norm = float(terms.f.norm())
    result.metrics["offset_to_logit_norm_ratio"] = float(terms.offset.norm()) / logit_norm
    result.metrics["kernel_sum_to_logit_norm_ratio"] = float(
        (terms.gp_mean - terms.offset).norm()) / logit_norm


def importance_arrays(importances: Tensor, splits, image_shape) -> dict[str, list]:
    """Fig. 5.6a: the sorted importances and the example training images shown."""
    order = importances.argsort()
    shown = importance_examples(importances)
    rows = order[shown]
    x_train = splits.x_train
    return {"image_shape": list(image_shape),
            "importances_sorted": importances[order].tolist(),
            "examples/position": shown.tolist(),
            "examples/label": splits.y_train[rows.to(splits.y_train.device)].tolist(),
            "examples/importance": importances[rows].tolist(),
            "examples/pixels": pixels(x_train[rows.to(x_train.device)])}


@takes(datasets=(ClassSubsetImageData,), methods=(KernelExplanations,))
def run(cfg: DictConfig) -> TaskResult:
    """Train (or load) the network, fit the GP view, explain the chosen test images."""
    data = binary_data(cfg)
    method = capability(instantiate_method(cfg.method), KernelExplanations)
    seed = int(cfg.seed)
    splits = data.splits(seed)
    result = TaskResult()
    stored, diagnostics = fitted_gp_view(cfg, data, method, splits, result)
    watch = Stopwatch()
    terms = method.explain(splits.x_test)
    result.timings["explain_s"] = watch.elapsed()
    y_test = splits.y_test.to(terms.f.device)
    explanation_cells(result, method, terms, y_test, stored.module, diagnostics,
                      len(splits.x_train))
    result.arrays.update(importance_arrays(method.importances, splits, data.input_shape))
    explained = _explanations(terms.kernel, terms.f, y_test, method.importances, splits, seed)
    result.arrays.update(explained["arrays"])
    result.metrics.update(explained["metrics"])
    return result


def _explanations(kernel: Tensor, f: Tensor, y_test: Tensor, importances: Tensor, splits,
                  seed: int) -> dict:
    """Arrays of Fig. 5.6b (test images, their nearest training images by the kernel) and the
    metrics of the thesis' claims about the misclassified ones (none without errors)."""
    chosen, kinds = chosen_test_images(f, y_test, seed)
    k = min(N_NEIGHBOURS, kernel.shape[1])
    abs_rank = importances.abs().argsort().argsort().double() / max(len(importances) - 1, 1)
    arrays: dict[str, list] = {"tests/index": chosen,
                               "tests/misclassified": [int(kind != "correct") for kind in kinds],
                               "tests/label": y_test[chosen].tolist(),
                               "tests/probability": torch.sigmoid(f[chosen]).tolist(),
                               "tests/pixels": pixels(splits.x_test[chosen])}
    neighbours = kernel[chosen].topk(k, dim=1).indices
    flat = neighbours.reshape(-1)
    y_train = splits.y_train.to(flat.device)
    arrays.update({
        "neighbours/count": [k],
        "neighbours/train_index": flat.tolist(),
        "neighbours/label": y_train[flat].tolist(),
        "neighbours/kernel": kernel[chosen].gather(1, neighbours).reshape(-1).tolist(),
        "neighbours/importance": importances[flat].tolist(),
        "neighbours/abs_importance_percentile": abs_rank[flat].tolist(),
        "neighbours/pixels": pixels(splits.x_train[flat.to(splits.x_train.device)]),
    })
    metrics = {}
    wrong = [row for row, kind in enumerate(kinds) if kind == "misclassified"]
    if wrong:
        first = neighbours[wrong, 0]
        opposite = y_train[first] != y_test[[chosen[row] for row in wrong]]
        metrics["misclassified_rank1_opposite_class_share"] = float(opposite.double().mean())
        metrics["misclassified_rank1_abs_importance_percentile"] = float(abs_rank[first].mean())
    return {"arrays": arrays, "metrics": metrics}
