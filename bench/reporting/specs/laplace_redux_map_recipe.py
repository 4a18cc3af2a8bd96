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
from typing import Any

from bench.harness.overrides import group_options
from bench.reporting.claims import ClaimRule, Means, Statistic, cell_means, claim
from bench.reporting.spec import Anchor, ArtifactSpec
from bench.reporting.specs.laplace_redux import MEAN_RULES, OOD_IN_PERCENT
from bench.reporting.targets import paper_values

RECIPES = tuple(group_options()["map_recipe"])
TABLE_3_ROWS = ("MAP", "LA", "LA*")
# The Table 3 cells judged, with the verdict tolerance of each (MEAN_RULES: confidence within
# 2 points, AUROC within 1 point).
JUDGED = {"conf_fmnist": 2.0, "conf_kmnist": 2.0, "auroc_fmnist": 1.0, "auroc_kmnist": 1.0}
# The paper's MAP row (appendix C.2.2, Table 3), FMNIST and KMNIST columns.
PAPER_MAP = {column: paper_values("laplace_redux", ("table-3",))[("MAP", column)].value
             for column in JUDGED}
WITHIN = ClaimRule(agree=1.0, close=3.0, higher_is_better=False)


def row_name(recipe: str, row: str) -> str:
    """A study row: the Table 3 ``row`` on the MAP network of ``recipe``."""
    return f"{recipe} / {row}"


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


def recipe_outcome(recipe: str):
    """Anchor cause: the recipe's MAP accuracy and judged cells beside the paper's, from the
    records (a recipe that does not train shows chance accuracy)."""

    def cause(records: list[dict[str, Any]]) -> str:
        means = cell_means(records)
        row = row_name(recipe, "MAP")
        if (row, "acc_mnist") not in means:
            raise LookupError(f"no {row} cells")
        cells = ", ".join(f"{column} {means[(row, column)]:.1f} (paper {PAPER_MAP[column]})"
                          for column in JUDGED if (row, column) in means)
        return (f"measured: {row} test accuracy {means[(row, 'acc_mnist')]:.1f}%, {cells}; "
                "the training objective per epoch is in the stored network's history.json")

    return cause


ANCHORS = tuple(
    Anchor(f"{recipe}: MAP row's largest gap to the paper's MAP row (FMNIST, KMNIST "
           "confidence / 2 points, AUROC / 1 point)", "<= 1 if this is the paper's recipe",
           claim(largest_gap(recipe)), WITHIN, cause=recipe_outcome(recipe))
    for recipe in RECIPES
)

RECIPE_CAUSE = ("measured by this study: the row's MAP network is trained with the recipe it "
                "names (its anchor gives the outcome); the adam_b128 rows, on the same seeds, "
                "are the ones that reproduce the paper's MAP row")

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
    "Outcome: Adam 1e-3 at batch 128 reproduces the paper's MAP row on both seeds (every "
    "judged cell within tolerance), so Table 3 and Figure 9 train their MAP and DE networks "
    "with it (conf/experiment/laplace_redux/table-3.yaml). The code's batch 512 leaves the "
    "MAP far more confident on FMNIST; decoupled decay (AdamW 5e-4, i.e. almost none at lr "
    "1e-3) more so. Both lr 0.1 recipes do not train: the training objective stays at ln 10 = "
    "2.303 from the first epoch (history.json of the stored networks), chance accuracy.",
    "cpu scale: every recipe on model seed 6; on seed 12 too the code's recipe (adam_b512) and "
    "adam_b128, chosen after seed 6's records as the recipe nearest the paper's MAP row. Each "
    "MAP network is the paper protocol's (100 epochs, full training set).",
)

MAP_RECIPE = ArtifactSpec(
    paper="laplace_redux",
    artifact="map-recipe",
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
