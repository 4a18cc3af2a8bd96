"""Report spec of Laplace Redux (Daxberger et al. 2021) Table 2: Hessian structures of a LeNet
trained on Fashion-MNIST with online marginal likelihood.

The paper's test log-likelihood, accuracy, mean OOD AUROC and prediction time beside ours
(mean ± standard error over the training seeds). Prediction times are hardware-specific (the
paper's GPU, our CPU): the seconds are ``not comparable``, and so are the anchors' ratios FULL
/ DIAG and KFAC / DIAG (each taken within a seed) unless every record ran on CUDA: only then
are they judged against the paper's (62.8 / 29.5 and 30.6 / 29.5). A FULL row fitted as the
last-layer stand-in is another method than the paper's all-weights FULL: its cells and the
FULL / DIAG ratio are ``not comparable`` too.

Side runs (``laplace_redux/table-2-budget``) repeat the seed-711 DIAG job with one factor of
the cpu scale's budget moved toward the paper's protocol; their rows ``LA/DIAG (<budget>)``
are shown as sensitivity rows, judged against the paper's DIAG row, and the DIAG cells' cause
quotes them beside the seed-711 record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.reporting.causes.laplace_redux import (
    ALL_WEIGHTS_FULL,
    BUDGET_SEED,
    BUDGETS,
    budget_cause,
    budget_row,
    seconds_reason,
    sibling_budget_cause,
    stand_in_reason,
)
from bench.reporting.ranking import RankedMetric
from bench.reporting.side_runs import is_side_run
from bench.reporting.spec import Anchor, ArtifactSpec, DataNeed
from bench.reporting.verdicts import Factor, Tolerance

STRUCTURE_ROWS = ("LA/DIAG", "LA/KFAC", "LA/FULL")
COLUMNS = ("test_loglik", "test_acc", "ood_auroc_avg", "pred_time")
# The sets the appendix averages ood_auroc_avg over (names as in the records' fitted.ood_sets).
PAPER_OOD_SETS = ("emnist_digits_torchvision", "mnist", "kmnist")
# Table 2's rows, then the budget side runs' (sensitivity rows of DIAG).
ROWS = (*STRUCTURE_ROWS, *(budget_row(label) for label in BUDGETS.values()))


def cell(record: dict[str, Any], column: str) -> float | None:
    """The record's value of ``column`` (its one row), or None."""
    return next((c["value"] for c in record.get("cells", []) if c["column"] == column), None)


def time_ratio(row: str) -> Callable[[list[dict[str, Any]]], float]:
    """Anchor getter: mean over the seeds that have both rows of ``pred_time(row) /
    pred_time(LA/DIAG)``. A FULL row fitted as the last-layer stand-in is not the paper's
    FULL: those seeds are left out (LookupError when none is left)."""

    def get(records: list[dict[str, Any]]) -> float:
        by_seed: dict[int, dict[str, dict]] = {}
        for record in (r for r in records if not is_side_run(r)):
            by_seed.setdefault(record["seed"], {})[record["method"]] = record
        ratios, stand_ins = [], 0
        for rows in by_seed.values():
            if row not in rows or "LA/DIAG" not in rows:
                continue
            fitted = rows[row]["fitted"]["methods"][row]
            if row == "LA/FULL" and fitted.get("laplace_class") != ALL_WEIGHTS_FULL:
                stand_ins += 1
                continue
            ratios.append(cell(rows[row], "pred_time") / cell(rows["LA/DIAG"], "pred_time"))
        if not ratios:
            reason = (f"the {stand_ins} FULL record(s) are the last-layer stand-in; the paper's "
                      "all-weights FULL is the paper-scale GPU job") if stand_ins else \
                f"no seed has both {row} and LA/DIAG"
            raise LookupError(reason)
        return sum(ratios) / len(ratios)

    return get


ANCHORS = (
    Anchor("prediction time FULL / DIAG, within a seed (paper: 62.8 s / 29.5 s on its GPU)",
           "2.13", time_ratio("LA/FULL"), Factor(agree=1.25, close=2.0)),
    Anchor("prediction time KFAC / DIAG, within a seed (paper: 30.6 s / 29.5 s)", "1.04",
           time_ratio("LA/KFAC"), Factor(agree=1.25, close=2.0)),
)

PROTOCOL_NOTES = (
    "Protocol (reproduction notes sections 2, 10.6): the Redux LeNet (44,426 parameters) and "
    "its prior precision trained together on the 60k Fashion-MNIST images by online marginal "
    "likelihood, as laplace-torch 0.3's marglik_training: Adam lr 1e-3 with a per-step cosine "
    "to 1e-6, batch 512, loss CE + 0.5 theta^T diag(delta) theta / N, layerwise prior from "
    "delta_0 = 30, after every epoch a Laplace refit (GGN by AsdlGGN, the row's structure, "
    "all weights) and 100 Adam steps at lr 1.0 on log delta against the Laplace log marginal "
    "likelihood; the best-marglik epoch restored and refitted on all 60k; GLM predictive with "
    "Monte-Carlo link, 100 samples (seed 711). Our own loop, bit for bit marglik_training on "
    "the same minibatches (tests/unit/training/test_online_marglik.py), checkpointed every "
    "epoch so a killed run resumes; the learned prior precisions are in each record "
    "(fitted.methods.<row>.prior_precision).",
    "Choices the paper leaves open (notes 2, 10.6): GGN (not EF) and a layerwise prior "
    "(not per-parameter); no all-weights FULL config was released, so FULL is the full GGN of "
    "every weight (what the printed times imply) with the same layerwise prior and "
    "laplace-torch's log-determinant per hyper-step (`method.log_det=eigen "
    "method.prior_structure=scalar` is the one-eigendecomposition alternative).",
    "Cells: test_loglik = mean log p(y|x) (nats) and test_acc on the FMNIST 8k test part "
    "(2k / 8k random_split, generator 42); ood_auroc_avg = mean over the OOD sets present of "
    "the AUROC (FMNIST positive, score = largest probability), auroc_<set> each one; "
    "pred_time = mean over the input sets (test part and OOD sets) of the seconds the "
    "predictive takes on the whole set. The paper's three training seeds are not named; ours "
    "are 711 (the authors' default), 712, 713. ± is the standard error over seeds, as the "
    "paper's.",
    "EMNIST-digits is not in the offline data: ood_auroc_avg averages MNIST and KMNIST (the "
    "records' fitted.ood_sets) until its files are in $BENCH_DATA_DIR/emnist/.",
    "Prediction times are hardware-specific (paper: a GPU, sets of 8k, 40k, 10k and 10k "
    "images): the seconds are not comparable; the anchors' within-seed ratios are judged "
    "against the paper's on CUDA records only (on a CPU the relative cost of sampling each "
    "structure differs, so they are shown as not comparable). laplace-torch 0.3 "
    "takes the all-weights Jacobians with torch.func for the ASDL backends and recomputes the "
    "full structure's covariance for every predictive batch: both are in our times as in the "
    "library the authors used.",
)

CPU_NOTES = (
    "cpu scale deviations (every cell): 50 epochs instead of 250 (the cosine spans the 50); "
    "the update after every epoch as the paper, but each Laplace refit on a fixed random "
    "5,000 of the 60,000 training images with curvature and loss scaled by 12 "
    "(laplace-torch's temperature 1/12), the final refit on all 60k; 2,000 images of each "
    "test / OOD set (drawn from the seed) instead of 8k / 10k; 3 seeds. Measured costs on one "
    "thread and the budget are in conf/experiment/laplace_redux/table-2.yaml.",
    "cpu scale, LA/FULL row: a stand-in, not the paper's FULL (its cells and the FULL / DIAG "
    "ratio are not comparable). The all-weights 44,426^2 GGN "
    "cannot be formed on 2 cores (hours per refit, 7.9 GB per copy, hours of prediction); the "
    "row is a full GGN over the last layer (850 weights) with a scalar prior learned online by "
    "the eigendecomposition marginal likelihood, the other weights regularised at delta_0 = "
    "30. The paper-scale config runs the real FULL on a GPU (device=cuda).",
    "Side runs (laplace_redux/table-2-budget, run by `make reproduce-laplace_redux-table-2` "
    "after the table's jobs): the seed-711 DIAG job with one factor of the cpu budget moved "
    "toward the paper's, 100 epochs (cosine over the 100) or every refit on 20k of the 60k "
    "images; rows 'LA/DIAG (<budget>)', judged against the paper's DIAG row, and quoted beside "
    "the seed-711 DIAG record in the DIAG cells' causes (KFAC's quote how far they move DIAG). "
    "Each record's best-marglik epoch and learned prior are in fitted.methods.LA/DIAG.",
)

# Not yet explained by a measurement: the cpu scale's shorter training and smaller refit and
# test sets are candidates; the side runs measure the first two for DIAG only.
SCALE_CAUSE = ("no measured cause yet: the cpu scale trains 50 epochs (paper 250), refits on 5k "
               "images (paper 60k) and tests on 2k per set (notes); no side run has separated "
               "these for this row")
BUDGET_ROW_CAUSE = (f"side run (laplace_redux/table-2-budget): Table 2's seed-{BUDGET_SEED} DIAG "
                    "job with one factor of the cpu budget changed, one seed; the paper's budget "
                    "is 250 epochs with refits on all 60k")


TABLE_2 = ArtifactSpec(
    paper="laplace_redux",
    artifact="table-2",
    records_health=True,
    title="Table 2: Hessian structures on FMNIST with online marginal likelihood: test "
          "log-likelihood, accuracy, OOD AUROC, prediction time",
    leaderboard=(RankedMetric("test_loglik", "higher"), RankedMetric("test_acc", "higher"),
                 RankedMetric("ood_auroc_avg", "higher")),
    paper_seed=None,
    row_order=ROWS,
    column_order=COLUMNS,
    rules={("*", "test_loglik"): Tolerance(abs=0.01), ("*", "test_acc"): Tolerance(abs=0.005),
           ("*", "ood_auroc_avg"): Tolerance(abs=0.015)},
    paper_rows={**{row: row for row in STRUCTURE_ROWS}, budget_row("*"): "LA/DIAG"},
    causes={("*", "*"): SCALE_CAUSE,
            ("*", "ood_auroc_avg"): f"{SCALE_CAUSE}; EMNIST needs data: MNIST and KMNIST only",
            ("LA/DIAG", "test_loglik"): budget_cause("test_loglik"),
            ("LA/DIAG", "test_acc"): budget_cause("test_acc"),
            ("LA/DIAG", "ood_auroc_avg"): budget_cause("ood_auroc_avg"),
            **{("LA/KFAC", column): sibling_budget_cause(column)
               for column in ("test_loglik", "test_acc", "ood_auroc_avg")},
            (budget_row("*"), "*"): BUDGET_ROW_CAUSE,
            (budget_row("*"), "ood_auroc_avg"): BUDGET_ROW_CAUSE},
    not_comparable={("LA/FULL", "*"): stand_in_reason, ("*", "pred_time"): seconds_reason,
                    (ANCHORS[0].label, ""): stand_in_reason},
    timed=(("*", "pred_time"), ("prediction time * / DIAG, within a seed *", "")),
    averaged_sets={"ood_auroc_avg": PAPER_OOD_SETS},
    anchors=ANCHORS,
    needs_data=(DataNeed("fashion_mnist", ("train", "test")), DataNeed("mnist", ("test",)),
                DataNeed("kmnist", ("test",)),
                DataNeed("emnist_digits_torchvision", ("test",),
                         cells=(("*", "auroc_emnist"),))),
    spread="stderr",
    notes=(*PROTOCOL_NOTES, *CPU_NOTES),
)

SPECS = [TABLE_2]
