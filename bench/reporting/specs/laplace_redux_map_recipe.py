"""Report spec of the Laplace Redux Table 3 MAP-recipe study (``laplace_redux/map-recipe``).

The paper's MAP LeNet recipe is not known: the text says Adam with initial lr 0.1, the
authors' code trains every LeNet with Adam 1e-3 and no MAP script was released (notes 3, 10.1).
The study trains the MAP network with each recipe a reader can take from the text and the
code (``conf/map_recipe/``) and scores Table 3's MAP, LA and LA* rows on top of each; every
row ``<recipe> / <row>`` is judged against the paper's Table 3 row of the same name. The
anchors say, per recipe, how far its MAP row is from the paper's, in units of the verdict
tolerance.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from typing import Any

from bench.harness.overrides import group_options
from bench.reporting.causes.laplace_redux import (
    JUDGED,
    PAPER_MAP,
    per_seed_outcome,
    recipe_outcome,
    row_name,
)
from bench.reporting.claims import ClaimRule, Means, Statistic, cell_means, claim
from bench.reporting.spec import Anchor, ArtifactSpec
from bench.reporting.specs.laplace_redux import MEAN_RULES, OOD_IN_PERCENT

RECIPES = tuple(group_options()["map_recipe"])
TABLE_3_ROWS = ("MAP", "LA", "LA*")
WITHIN = ClaimRule(agree=1.0, close=3.0, higher_is_better=False)


def largest_gap(recipe: str) -> Statistic:
    """The largest |ours - paper| over the judged MAP cells of ``recipe``, each divided by its
    verdict tolerance (at most 1: every cell agrees)."""

    def statistic(means: Means) -> float:
        gaps = []
        for column, tolerance in JUDGED.items():
            ours = means.get((row_name(recipe, "MAP"), column))
            if ours is None:
                raise LookupError(f"no {row_name(recipe, 'MAP')} {column} cell")
            gaps.append(abs(ours - PAPER_MAP[column]) / tolerance)
        return max(gaps)

    return statistic


def worst_seed_gap(recipe: str) -> Callable[[list[dict[str, Any]]], float]:
    """Anchor getter: :func:`largest_gap` of each model seed's own cells, the largest over the
    seeds (a mean over seeds within tolerance can hide a seed that is not)."""
    statistic = largest_gap(recipe)

    def get(records: list[dict[str, Any]]) -> float:
        seeds = sorted({record["seed"] for record in records})
        gaps = []
        for seed in seeds:
            try:
                gaps.append(statistic(cell_means([r for r in records if r["seed"] == seed])))
            except LookupError:
                continue
        if not gaps:
            raise LookupError(f"no seed has the {row_name(recipe, 'MAP')} cells")
        return max(gaps)

    return get


ANCHORS = tuple(
    anchor
    for recipe in RECIPES
    for anchor in (
        Anchor(f"{recipe}: MAP row's largest gap to the paper's MAP row (FMNIST, KMNIST "
               "confidence / 2 points, AUROC / 1 point), mean over seeds",
               "<= 1 if this is the paper's recipe", claim(largest_gap(recipe)), WITHIN,
               cause=recipe_outcome(recipe)),
        Anchor(f"{recipe}: the same gap on the worst model seed",
               "<= 1 if this is the paper's recipe", worst_seed_gap(recipe), WITHIN,
               cause=per_seed_outcome(recipe)),
    )
)

RECIPE_CAUSE = ("measured by this study: the row's MAP network is trained with the recipe it "
                "names (its anchors give the outcome, on the mean over seeds and on the worst "
                "seed); the study's recipes are not the paper's rows")

NOTES = (
    "Why: with the code's Adam 1e-3 at batch 512, Table 3's MAP FMNIST confidence was 12 "
    "points above the paper's, and every row on top of the MAP inherited it. The "
    "paper text (C.2.1) says 'Adam and Nesterov-SGD to train LeNet and WRN, respectively', "
    "initial lr 0.1, cosine decay over 100 epochs, weight decay 5e-4; no MAP script was "
    "released (the authors downloaded their weights, notes 3).",
    "Recipes (conf/map_recipe/, 100 epochs, cosine, weight decay 5e-4): adam_b512 = the "
    "code's (Adam 1e-3, coupled decay, batch 512 of the authors' loader; Table 3's networks "
    "before this study); adam_b128 = the same at batch 128 (Table 3's now); adamw_b512 = "
    "decoupled decay (AdamW); adam_lr01_b512 = the text read literally (Adam, lr 0.1); "
    "sgd_nesterov_b512 = the text's WRN optimizer (Nesterov SGD lr 0.1, momentum 0.9) on the "
    "LeNet.",
    "Rows: '<recipe> / MAP' is the recipe's network; '<recipe> / LA' and '/ LA*' are Table "
    "3's last-layer KFAC GGN and full EF Laplace on it (scalar prior precision by post-hoc "
    "marglik, probit); their column prior_precision is the learned delta. Coupled decay 5e-4 "
    "on the mean cross-entropy is the prior precision N x 5e-4 = 30 of the summed loss.",
    "Verdicts as Table 3's: confidence within 2 points, AUROC within 1 point of the paper's "
    "row of the same name, close within 3 times that. EMNIST is not in the offline data and "
    "its columns are left out.",
    "Outcome: the anchors give each recipe's largest gap to the paper's MAP row, on the mean "
    "over seeds and on the worst seed, and their causes quote the cells seed by seed. Which "
    "recipe Table 3 trains is not decided here: laplace_redux/map-recipe-selection chooses it "
    "by a rule that never reads the paper's numbers (validation NLL on a held-out part of the "
    "training set).",
    "Why the two lr 0.1 recipes give chance accuracy, measured on model seed 6's initial "
    "weights and batches over the first epoch (reports/laplace_redux/nesterov-lenet.md, make "
    "diagnose-nesterov-lenet): no value becomes non-finite; after a gradient spike the ReLU "
    "units of a whole conv layer are zero on every probe image (Nesterov SGD: conv2; Adam: "
    "both convs), the logits no longer depend on the input and the loss stays at the "
    "class-frequency level. From the same weights and batches, gradient-norm clipping at 1 or "
    "lr 0.03 trains; the authors' code has neither clipping nor warm-up and trains no LeNet "
    "with lr 0.1. Whether Nesterov SGD dies depends on the run, not only on the recipe: the "
    "same recipe and initial weights on the 50k fit part of laplace_redux/map-recipe-selection "
    "(another batch order) trained (held-out accuracy in that report), while Adam lr 0.1 "
    "died there too. Not measured: the units of this study's 100-epoch networks beyond their "
    "history.json, and other model seeds' own runs.",
    "cpu scale: every recipe on model seed 6; on seed 12 too the code's recipe (adam_b512) and "
    "adam_b128, which was chosen after seed 6's records as the recipe nearest the paper's MAP "
    "row: a choice made on the paper's numbers. Each MAP network is the paper protocol's (100 "
    "epochs, full training set).",
)

MAP_RECIPE = ArtifactSpec(
    paper="laplace_redux",
    artifact="map-recipe",
    records_health=True,
    study=True,
    title="Table 3's MAP recipe: MAP, LA and LA* rows per training recipe (MNIST OOD, %)",
    paper_seed=None,
    target_artifacts=("table-3",),
    ignore_targets=(("*", "*_emnist"),),
    paper_rows={row_name("*", glob.escape(row)): row for row in TABLE_3_ROWS},
    row_order=tuple(row_name(recipe, row) for recipe in RECIPES for row in TABLE_3_ROWS),
    column_order=(*JUDGED, "prior_precision", "acc_mnist", "nll_mnist"),
    rules=MEAN_RULES,
    causes={("*", "*"): RECIPE_CAUSE},
    anchors=ANCHORS,
    spread="stderr",
    notes=NOTES,
    record_view=OOD_IN_PERCENT,
)

SPECS = [MAP_RECIPE]
