"""Report specs of the SSLA paper's UCI case study: Table 3 (data) and Table 4 (results)."""

from __future__ import annotations

from bench.reporting.spec import ArtifactSpec
from bench.reporting.specs.ssla_nn import REFIT_ANCHORS, REFIT_CAUSE, REFIT_LABELS, REFIT_NOTE
from bench.reporting.verdicts import PrintedDigits, Tolerance

PAPER_SEED = 42
# Table 4's order, with the test-set size that reproduces its coverage fractions (notes §7).
DATASETS = {
    "Auto MPG": 79, "Liver Disorders": 69, "Concrete Compressive Strength": 50,
    "Wine Quality": 50, "Bike Sharing": 50, "Airfoil Self-Noise": 50,
    "Daily Demand Forecasting Orders": 12, "Real Estate Valuation": 83,
}
METHODS = ("SSLA", "ASSLA", "LA")
TABLE_4_COLUMNS = ("cov95", "cov75", "cov50", "nll", "crps")


def _two_test_points(n_test: int) -> Tolerance:
    """Coverage within two test points of the paper's value (or the paper inside a CI that
    stays inside the close band)."""
    return Tolerance(abs=200.0 / n_test + 1e-9)


TABLE_3 = ArtifactSpec(
    paper="ssla",
    artifact="table-3",
    title="Table 3: the UCI data sets as loaded (rows, inputs, split sizes, test subsampling)",
    paper_seed=PAPER_SEED,
    row_order=tuple(DATASETS),
    column_order=("n_rows", "n_rows_used", "n_features_raw", "n_features", "n_train", "n_val",
                  "n_test_full", "n_test", "subsampled"),
    rule=PrintedDigits(close_units=0),
    causes={
        ("corrected", "Bike Sharing", "n_features_raw"): "corrected keeps yr, holiday, "
                                                          "workingday and the rental counts",
    },
    notes=(
        "The paper's Table 3 prints descriptions, a size class and a subsampling mark; its "
        "numbers here are the subsampling mark (1 = subsampled to n = 50), the feature counts "
        "its descriptions state, and the test sizes that reproduce every Table 4 coverage "
        "fraction (reproduction notes §7; not printed in the paper).",
        "Split (both protocols): sklearn train_test_split 80/20 (random_state = seed), the "
        "train part 80/20 into train/val, val 60/40 into val/calibration (unused); the four "
        "medium data sets cut the test set to 50 points with the first randperm of a generator "
        "seeded by the seed. Columns: n_features_raw = input columns before one-hot encoding, "
        "n_features = network inputs after it.",
        "Raw files from BENCH_DATA_DIR/uci/ (layout as shared/data/uci), else ucimlrepo.",
    ),
)

TABLE_4 = ArtifactSpec(
    paper="ssla",
    artifact="table-4",
    records_health=True,
    title="Table 4: coverage (%), NLL and CRPS of SSLA, ASSLA and LA on eight UCI data sets",
    paper_seed=PAPER_SEED,
    row_order=tuple(f"{d}/{m}" for d in DATASETS for m in METHODS),
    column_order=TABLE_4_COLUMNS,
    rule=PrintedDigits(),
    rules={
        **{(f"{d}/SSLA", "cov*"): _two_test_points(n) for d, n in DATASETS.items()},
        ("*/SSLA", "nll"): Tolerance(abs=0.05, rel=0.1),
        ("*/SSLA", "crps"): Tolerance(abs=0.05, rel=0.1),
        ("corrected", "*", "*"): Tolerance(abs=5.0, rel=0.1),
    },
    anchors=REFIT_ANCHORS,
    causes={
        **{(label, "*"): REFIT_CAUSE for label in REFIT_LABELS},
        ("*/SSLA", "*"): "SSLA depends on 10-epoch stochastic refits whose minibatch order we "
                         "cannot replay (our refits are batched)",
        ("Real Estate Valuation/*", "*"): "unexplained; untested hypothesis: the input data "
                                          "(no untouched copy of the xlsx exists, MANIFEST: "
                                          "every copy was re-saved in Excel, and the authors "
                                          "read ucimlrepo's data.csv, which is not here, so "
                                          "the hypothesis cannot be tested on this machine)",
        ("Wine Quality/*", "*"): "one test point of 50 from the CPU's rounding: on the machine "
                                 "of the 11-29 records, same code and raw CSVs, seed 42 with "
                                 "ATEN_CPU_CAPABILITY=default gives all 10 printed ASSLA and "
                                 "LA digits of the paper, with its AVX512 kernels 8 (ASSLA "
                                 "cov50 60 vs 62, NLL 0.40 vs 0.39)",
        ("Airfoil Self-Noise/*", "*"): "unexplained: the seed-42 network moves with the "
                                       "CPU's rounding (test RMSE 0.227 on the machine of the "
                                       "11-29 records with its AVX512 kernels, 0.234 there "
                                       "with ATEN_CPU_CAPABILITY=default, 0.279 in the records "
                                       "of 11-25), but the default-kernel run still gives "
                                       "ASSLA NLL 0.17 against the paper's 0.24 (measured for "
                                       "issue 41), so rounding does not account for the gap",
        ("Airfoil Self-Noise/LA", "*"): "unexplained: no LA measurement under other kernels "
                                        "or inputs exists; the seed-42 network moves with the "
                                        "CPU's rounding (test RMSE 0.227 to 0.279 across the "
                                        "records of 11-25 and 11-29), its effect on LA "
                                        "unmeasured",
        ("corrected", "*", "*"): "corrected protocol (train-only scalers, Gaussian likelihood "
                                 "with fitted sigma, MAP, quadrature density) is not what the "
                                 "paper ran",
    },
    notes=(
        "Data: notes §7 (Table 3 report). Seed 42 is the paper's split and initialisation; "
        "other seeds are other splits and initialisations, so the CI spans data splits too.",
        "Protocol paper: the authors' code: n_input-50-50-1 ReLU MLP, MSE, Adam with the tuned "
        "lr/batch size per data set (conf/tuned/paper/uci), 500 epochs, patience 20; ASSLA and "
        "SSLA with K-FAC over the whole network, LA last-layer K-FAC with sigma 1 and 100 Adam "
        "steps on tau (lightning-uq-box keeps tau after 99 of them); KDE-bandwidth summary; "
        "intervals mean ± z·sd with z = 1.96/1.15/0.67.",
        "Protocol corrected: scalers fit on the train part only, MAP network with Gaussian "
        "likelihood and fitted sigma, SSLA by one Gauss-Newton refit step, fine "
        "grid normalised by quadrature, LA with tau and sigma by marginal likelihood, quantile "
        "intervals.",
        "Seeds per cell are the n column. At cpu scale Bike runs at the paper seed only "
        "(seeds_for in the experiment: about 30 min per job on 2 cores), every other data "
        "set at seeds 42 and 0-4.",
        "Verdicts: exact printed digits for ASSLA and LA at seed 42 (deterministic given the "
        "network); SSLA coverage within two test points, NLL/CRPS within 0.05 + 10 %, or the "
        "paper value inside a seed CI that stays within 3 times that tolerance; a CI holding "
        "the paper value but reaching past it is inconclusive.",
        REFIT_NOTE,
    ),
)

SPECS: list[ArtifactSpec] = [TABLE_3, TABLE_4]
