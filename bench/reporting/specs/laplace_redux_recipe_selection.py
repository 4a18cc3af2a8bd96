"""Report spec of the rule that chooses Laplace Redux Table 3's MAP recipe
(``laplace_redux/map-recipe-selection``, :mod:`bench.tasks.recipe_selection`).

Nothing here is judged against the paper: the selection's cells are validation numbers on a
held-out part of the training set, and the paper prints none. Each row is one candidate
recipe; the ``chosen`` column marks the rule's choice, and its cause quotes the record's
reasons (the tier that decided and why the earlier tiers did not).
"""

from __future__ import annotations

from typing import Any

from bench.reporting.causes.laplace_redux import choice_cause
from bench.reporting.spec import ArtifactSpec
from bench.tuning.recipe_choice import TIERS

COLUMNS = ("val_nll", "val_acc", "constant_nll", "constant_acc", "final_objective", "chosen",
           "nll_gap_to_chosen", "nll_gap_se")


def choice_of(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``fitted.choice`` of the ok records, one per seed; LookupError when there is none."""
    choices = [r["fitted"]["choice"] for r in records if "choice" in r.get("fitted", {})]
    if not choices:
        raise LookupError("no selection record holds a choice")
    return choices[-1]


NOTES = (
    "The rule (bench/tuning/recipe_choice.py), in order: " + ", then ".join(TIERS) + ". text: "
    "the recipe the paper's text states; code: the authors' training script's; validation: "
    "the candidate with the lowest validation NLL. A recipe is taken only when its fit is "
    "healthy: a finite validation NLL below the constant predictor's and an accuracy above its "
    "(constant_nll, constant_acc: the fit part's class frequencies, predicting the most "
    "frequent class; a network whose output does not depend on its input learns them and can "
    "fall a few 1e-6 below constant_nll by rounding, never above constant_acc). The paper's "
    "numbers and the test set are never read.",
    "Sources (conf/experiment/laplace_redux/map-recipe-selection.yaml). Text (appendix C.2.1): "
    "'We use Adam and Nesterov-SGD to train LeNet and WRN, respectively. The initial learning "
    "rate is 0.1 and annealed via the cosine decay method over 100 epochs. The weight decay is "
    "set to 5e-4'; no batch size, so its candidate (adam_lr01_b512) takes the batch 512 of "
    "the authors' (F)MNIST loader. Code: runame/laplace-redux has no MAP training script for "
    "Table 3's LeNets (run_uq_baselines.sh loads downloaded weights from models/); every "
    "LeNet it does train (marglik_training configs fmnist_map, mnist_marglik, fmnist_marglik; "
    "baselines/bbb; continual_learning.py) uses Adam at lr 1e-3, and its only lr 0.1 runs are "
    "Nesterov SGD on the WRN.",
    "Candidates: conf/map_recipe/ (100 epochs, cosine, weight decay 5e-4): adam_b512, "
    "adam_b128, adamw_b512, adam_lr01_b512, sgd_nesterov_b512; each trains the LeNet on the "
    "fit part of the MNIST training set and is scored on the held-out part (val_size images "
    "drawn by a generator seeded with split_seed, both in the record's config). "
    "final_objective: the last epoch's mean training objective. nll_gap_to_chosen: the "
    "candidate's held-out NLL minus the chosen one's; nll_gap_se: its standard error over the "
    "held-out images (paired); the rule does not read them.",
)

MAP_RECIPE_SELECTION = ArtifactSpec(
    paper="laplace_redux",
    artifact="map-recipe-selection",
    records_health=True,
    title="Table 3's MAP recipe chosen without the paper's numbers: validation NLL on a "
          "held-out part of the MNIST training set",
    paper_seed=None,
    column_order=COLUMNS,
    causes={("*", "chosen"): choice_cause},
    spread="stderr",
    notes=NOTES,
)

SPECS = [MAP_RECIPE_SELECTION]
