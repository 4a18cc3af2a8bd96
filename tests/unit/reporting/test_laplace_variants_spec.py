"""Figure 8's anchors compare contenders only: a variant whose predictive misstates its own
accuracy by more than BROKEN_ECE points (the low-rank probit rows' near-uniform predictive)
is named in the causes but is never the panel's "best"."""

from __future__ import annotations

from bench.reporting.specs.laplace_redux_variants import (
    broken_variants,
    default_competitive,
    default_failures,
    kfac_tradeoff,
)

PANEL = "fmnist, DA"


def means(lowrank_ece: float) -> dict[tuple[str, str], float]:
    """One panel: the default, all-weights KFAC just better and diag just worse, and a low-rank
    variant with the best AUROC and accuracy whose corrected ECE is ``lowrank_ece``."""
    rows = {
        "LL kron post-hoc probit": {"acc": 87.4, "auroc": 89.8, "ece_corrected": 8.9},
        "all kron post-hoc probit": {"acc": 87.6, "auroc": 90.3, "ece_corrected": 8.4},
        "all diag post-hoc probit": {"acc": 87.5, "auroc": 89.0, "ece_corrected": 9.9},
        "all lowrank post-hoc probit": {"acc": 88.2, "auroc": 95.6,
                                        "ece_corrected": lowrank_ece, "conf": 10.8},
    }
    timed = {"fit_s": 10.0, "predict_s": 1.0}
    return {(f"{PANEL} / {row}", column): value
            for row, cells in rows.items() for column, value in {**cells, **timed}.items()}


def test_a_broken_predictive_is_not_the_panel_s_best():
    assert default_competitive(means(lowrank_ece=77.4)) == 1.0
    assert default_failures(means(lowrank_ece=77.4)) == []
    assert broken_variants(means(lowrank_ece=77.4)) == [
        f"{PANEL} / all lowrank post-hoc probit (corrected ECE 77.4, mean confidence 10.8, "
        "accuracy 88.2)"]


def test_a_calibrated_variant_with_the_best_auroc_is_the_best():
    assert default_competitive(means(lowrank_ece=9.0)) == 0.0
    (failure,) = default_failures(means(lowrank_ece=9.0))
    assert "best AUROC 95.6 (all lowrank post-hoc probit)" in failure
    assert broken_variants(means(lowrank_ece=9.0)) == []


def test_kfac_is_compared_with_the_contending_structures_only():
    assert kfac_tradeoff(means(lowrank_ece=77.4)) == 1.0
    assert kfac_tradeoff(means(lowrank_ece=9.0)) == 0.0
