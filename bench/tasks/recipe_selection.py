"""A MAP training recipe chosen by a rule that never reads the paper's results.

One job = one model seed. The dataset node's training set is split once, by a generator seeded
with ``selection.split_seed``, into a fit part and a held-out part of ``selection.val_size``
images (the test set is never loaded into the choice). Every candidate of
``selection.candidates`` (name -> recipe node with ``stages``, e.g. the ``conf/map_recipe``
nodes) trains the experiment's ``network`` model on the fit part (trained once per recipe and
seed in the trained-network store, under a dataset name that names the split) and is scored
on the held-out part. :func:`bench.tuning.recipe_choice.choose_recipe` then applies the rule
with ``selection.text`` and ``selection.code``, the candidate the paper's text and the
authors' script state in full (null: none).

Cells, row = candidate name: ``val_nll`` (nats), ``val_acc`` (fraction), ``constant_nll`` and
``constant_acc`` (the fit part's class frequencies scored on the held-out part; their
prediction is the most frequent class), ``final_objective`` (the last
epoch's mean training objective), ``chosen`` (1 for the chosen recipe, else 0) and
``nll_gap_to_chosen`` with ``nll_gap_se``: the candidate's held-out NLL minus the chosen
one's, and the standard error of that mean over the held-out points (paired: the same images),
so a reader sees whether the choice is beyond the held-out noise. The rule itself reads only
``val_nll``, ``val_acc`` and the constant predictor's two.
``fitted.choice`` holds the chosen name, the deciding tier and one reason per tier;
``fitted.recipe_hashes`` each candidate's stored network.
"""

from __future__ import annotations

import math

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from bench.contracts.method import ClassifierMethod
from bench.datasets.image_classification import ImageClassificationData
from bench.harness.errors import ConfigError
from bench.harness.result import CELL_UNITS, NEUTRAL_CELLS, TaskResult
from bench.harness.rng import make_generator
from bench.harness.task_inputs import takes
from bench.harness.timing import Stopwatch
from bench.metrics.classification_scores import accuracy, nll
from bench.predictive.categorical import Categorical
from bench.training.network_store import recipe_for, trained_network
from bench.tuning.recipe_choice import RecipeScore, choose_recipe

EVAL_BATCH = 2000


def held_out_split(n: int, val_size: int, split_seed: int) -> tuple[Tensor, Tensor]:
    """(fit, held-out) indices into ``range(n)``, each sorted: ``val_size`` held out by a
    permutation drawn from a generator seeded with ``split_seed``. A ``val_size`` outside
    ``1..n-1`` is a one-line ConfigError naming ``selection.val_size``."""
    if isinstance(val_size, bool) or not isinstance(val_size, int) or not 0 < val_size < n:
        raise ConfigError(f"selection.val_size={val_size!r} is not valid; it must be an integer "
                          f"in 1..{n - 1} (the training set has {n} images)")
    order = torch.randperm(n, generator=make_generator(split_seed))
    return order[val_size:].sort().values, order[:val_size].sort().values


def constant_scores(fit_labels: Tensor, held_labels: Tensor, num_classes: int
                    ) -> tuple[float, float]:
    """(NLL in nats, accuracy) on ``held_labels`` of the predictor that always answers the
    class frequencies of ``fit_labels`` (its prediction: the most frequent class)."""
    counts = torch.bincount(fit_labels.cpu(), minlength=num_classes).double()
    log_freq = (counts / counts.sum()).log()
    held = held_labels.cpu()
    return (-float(log_freq[held].mean()),
            float((held == int(counts.argmax())).double().mean()))


@torch.no_grad()
def held_out_predictive(module: nn.Module, images: Tensor) -> Categorical:
    """The network's softmax on ``images``, in batches of ``EVAL_BATCH``."""
    device = next(module.parameters()).device
    logits = [module(images[i:i + EVAL_BATCH].to(device)).double().cpu()
              for i in range(0, len(images), EVAL_BATCH)]
    return Categorical.from_logits(torch.cat(logits))


def split_name(images: str, val_size: int, split_seed: int) -> str:
    """The trained-network store's dataset name of the fit part (so a network trained on it is
    never taken for one trained on the whole training set or on another split)."""
    return f"{images}_without_{val_size}_held_out_seed{split_seed}"


@takes(datasets=(ImageClassificationData,), methods=(ClassifierMethod,))
def run(cfg: DictConfig) -> TaskResult:
    """Train every candidate recipe on the fit part, score it on the held-out part, choose."""
    selection = cfg.selection
    data: ImageClassificationData = instantiate(cfg.dataset)
    seed, split_seed = int(cfg.seed), int(selection.split_seed)
    splits = data.splits(seed)
    val_size = selection.val_size
    fit, held = held_out_split(len(splits.x_train), val_size, split_seed)
    x_fit, y_fit = splits.x_train[fit], splits.y_train[fit]
    x_held, y_held = splits.x_train[held], splits.y_train[held]
    baseline, baseline_acc = constant_scores(y_fit, y_held, data.num_classes)
    identity = {"name": split_name(data.images, val_size, split_seed),
                "preprocessing": data.normalisation,
                "image_shape": list(data.input_shape), "train_size": len(fit)}
    candidates = OmegaConf.to_container(selection.candidates, resolve=True)
    if not candidates:
        raise ConfigError("selection.candidates is empty; name at least one recipe")
    result = TaskResult()
    result.fitted[CELL_UNITS] = NEUTRAL_CELLS
    network = OmegaConf.to_container(cfg.network, resolve=True)
    scores, hashes, point_nlls = [], {}, {}
    for name, node in candidates.items():
        recipe = recipe_for(network | {"stages": node["stages"]}, identity)
        watch = Stopwatch()
        stored = trained_network(recipe, seed, x_fit, y_fit, cfg.results_dir, cfg.device)
        result.timings[f"{name}/network_s"] = watch.elapsed()
        predictive = held_out_predictive(stored.module, x_held)
        score = RecipeScore(name, nll(predictive, y_held), baseline,
                            accuracy(predictive, y_held), baseline_acc)
        point_nlls[name] = -predictive.log_prob(y_held.cpu()).double()
        scores.append(score)
        hashes[name] = stored.recipe_hash
        final = stored.history[-1]["objective"] if stored.history else math.nan
        for column, value in (("val_nll", score.val_nll), ("val_acc", score.val_acc),
                              ("constant_nll", baseline), ("constant_acc", baseline_acc),
                              ("final_objective", final)):
            result.add(name, column, value)
    choice = choose_recipe(scores, text=selection.get("text"), code=selection.get("code"))
    for score in scores:
        result.add(score.name, "chosen", float(score.name == choice.chosen))
        gap = point_nlls[score.name] - point_nlls[choice.chosen]
        result.add(score.name, "nll_gap_to_chosen", float(gap.mean()))
        result.add(score.name, "nll_gap_se", float(gap.std() / math.sqrt(len(gap))))
    result.fitted.update({"choice": choice.to_dict(), "recipe_hashes": hashes,
                          "split": {"val_size": val_size, "split_seed": split_seed,
                                    "fit_size": len(fit)}})
    return result
