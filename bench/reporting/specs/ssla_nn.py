"""Report specs of the SSLA paper's network experiments: Table 2 and Figure 2."""

from __future__ import annotations

from bench.reporting.claims import ClaimRule
from bench.reporting.figures.nn_regression_plots import predictive_bands
from bench.reporting.ranking import RankedMetric
from bench.reporting.spec import Anchor, ArtifactSpec
from bench.reporting.verdicts import PrintedDigits, Tolerance

PAPER_SEED = 42
ROWS = ("SSLA/KFAC", "SSLA/DIAG", "SSLA/DENSE", "ASSLA/KFAC", "ASSLA/DIAG", "ASSLA/DENSE",
        "LA/KFAC", "LA/DIAG", "LA/DENSE", "VI/VI", "VI/MFVI", "MCMC/HMC")
COVERAGE = ("cov95", "cov90", "cov75", "cov50")
RANDOM_ROWS = ("SSLA/*", "VI/VI", "MCMC/HMC")


def _refit_counts(records: list[dict]) -> list[float]:
    """The ``*/refit_not_converged`` metrics of every record (one per row that ran SSLA's
    converged refit)."""
    return [value for record in records for key, value in record.get("metrics", {}).items()
            if key.endswith("/refit_not_converged")]


def refits_not_converged(records: list[dict]) -> float:
    """Corrected SSLA: the (x, y) refits, over every record, that stopped before the
    gradient tolerance (the ``*/refit_not_converged`` metrics)."""
    counts = _refit_counts(records)
    if not counts:
        raise LookupError("no record of a converged-refit SSLA (protocol=corrected)")
    return float(sum(counts))


def base_maps_not_converged(records: list[dict]) -> float:
    """Corrected SSLA: the MAPs of D (one per record and row) that stopped before the
    gradient tolerance (``fitted.<row>.base_map_converged``)."""
    flags = [not fitted["base_map_converged"] for record in records
             for fitted in record.get("fitted", {}).values()
             if isinstance(fitted, dict) and "base_map_converged" in fitted]
    if not flags:
        raise LookupError("no record of a converged-refit SSLA (protocol=corrected)")
    return float(sum(flags))


def has_converged_refits(records: list[dict]) -> bool:
    """Whether any record ran SSLA's opt-in converged refit (``method.refit.name=newton``)."""
    return bool(_refit_counts(records))


NONE_ALLOWED = ClaimRule(agree=0.0, close=0.0, higher_is_better=False)
REFIT_LABELS = ("corrected SSLA: (x, y) refits not converged (all records)",
                "corrected SSLA: MAPs of D not converged (all records and rows)")
# Harness checks, not paper numbers: every converged-refit SSLA record is counted (shown
# only where the records ran that opt-in refit).
REFIT_ANCHORS = (
    Anchor(REFIT_LABELS[0], "0 (harness check)", refits_not_converged, NONE_ALLOWED,
           applies=has_converged_refits),
    Anchor(REFIT_LABELS[1], "0 (harness check)", base_maps_not_converged, NONE_ALLOWED,
           applies=has_converged_refits),
)
REFIT_CAUSE = ("a refit stopped by method.refit.newton.max_steps / base_max_steps (or a failed "
               "line search) before |grad log joint| <= method.refit.newton.grad_tol: its log-PPD "
               "value is "
               "a lower bound; per row the record keeps max/median gradient norm and steps "
               "(metrics <row>/refit_*). A ReLU network's MAP generally sits on kinks "
               "(pre-activations exactly 0) where the gradient does not vanish")
REFIT_NOTE = (
    "Corrected SSLA refit: one Gauss-Newton step from theta-hat (method.refit.name="
    "gauss_newton, the default). The opt-in method.refit.name=newton (damped Newton on the "
    "exact log joint of D + (x, y) "
    "from the MAP of D, converged at |grad log joint| <= 1e-6) does not converge on this ReLU "
    "network (side run, seed 42): theta-hat has gradient norm 456 and negative Hessian "
    "eigenvalues, and both Newton and full-batch L-BFGS stall near gradient norm 10 on the "
    "kinks of the ReLU log joint (0 of 201 refits reached the tolerance; about 6 h per seed "
    "estimated); where it is run, two anchors count the refits that stopped short. On a "
    "smooth (tanh) network it agrees with L-BFGS refits to 2e-7 nats "
    "(reports/ssla/refit-perf.md)."
)

TABLE_2 = ArtifactSpec(
    paper="ssla",
    artifact="table-2",
    records_health=True,
    title="Table 2: coverage (%) of central intervals on the heteroscedastic toy's test points",
    leaderboard=(RankedMetric("nll"), RankedMetric("cov95", nominal=95.0), RankedMetric("crps")),
    paper_seed=PAPER_SEED,
    row_order=ROWS,
    column_order=(*COVERAGE, "nll", "crps", "rmse"),
    rule=PrintedDigits(),
    rules={
        **{(row, "*"): Tolerance(abs=8.0) for row in RANDOM_ROWS},
        ("corrected", "*", "*"): Tolerance(abs=8.0),
    },
    anchors=REFIT_ANCHORS,
    causes={
        **{(label, "*"): REFIT_CAUSE for label in REFIT_LABELS},
        ("SSLA/*", "*"): "SSLA's columns differ only by the randomness of 500 ten-epoch refits "
                         "(the curvature term is exactly 0: det of a singular Fisher, notes §12); "
                         "our batched refit draws other minibatch orders",
        ("VI/VI", "*"): "the authors' own rerun of VI differed by 1-2 test points (notes §12); "
                        "Lightning-UQ-Box draw order",
        ("MCMC/HMC", "*"): "pyro HMC instead of hamiltorch (not on any registry): other random "
                           "streams; with the tuned step size the chain barely moves",
        ("corrected", "*", "*"): "corrected protocol (Gaussian likelihood, fitted sigma, MAP, "
                                 "prior in the curvature) is not what the paper ran",
    },
    notes=(
        "Data: Lightning-UQ-Box ToyHeteroscedasticDatamodule(n_points=250, test_fraction=0.1), "
        "noise/split seed = run seed; seed 42 is the paper's 200/15/10/25 split, so coverage "
        "comes in steps of 4 points. Other seeds are fresh datasets and initialisations.",
        "Protocol paper: the authors' code (notes §1, §6): 1-50-50-1 ReLU MLP with MSE through "
        "Lightning, ASSLA/SSLA with the mean unit-noise GGN and their KDE-bandwidth summary, "
        "LA last-layer with sigma 1 and 100 Adam steps on tau (lightning-uq-box keeps tau "
        "after 99 of them), VI/HMC with Tanh, HMC's "
        "variance counted twice; intervals mean ± z·sd with z = 1.96/1.64/1.15/0.67.",
        "Protocol corrected: MAP network with Gaussian likelihood and fitted sigma, SSLA by a "
        "Gauss-Newton refit with prior in the curvature (the step always uses the dense GGN; "
        "KFAC/DIAG/DENSE is the curvature of the log-det term only), fine grid normalised by "
        "quadrature, "
        "LA with tau and sigma by marginal likelihood, VI/HMC with ReLU (as tuned), HMC "
        "variance counted once; quantile intervals. Corrected cells are compared with the "
        "paper's numbers only for orientation.",
        "Verdicts: exact-digit match required for ASSLA, LA and MFVI at seed 42 (the notes "
        "reproduce these digit for digit); SSLA, VI and HMC rows, whose numbers depend on "
        "random streams we cannot replay, agree within 8 points (2 test points) or when the "
        "paper value is inside a seed CI that stays within 3 times that; a CI holding the "
        "paper value but reaching past it is inconclusive.",
        "Hardware: the VI baseline's ~140 epochs of Monte Carlo training amplify last-bit "
        "differences between torch's AVX2 and AVX512 CPU kernels into other weights (other "
        "epochs at early stopping), so its cells move with the machine; records name the "
        "kernels (versions.torch_cpu_capability), and ATEN_CPU_CAPABILITY=avx2 selects the "
        "AVX2 ones. Against records made on an AVX2 machine, no other row moved beyond 1e-5.",
        REFIT_NOTE,
    ),
)

FIGURE_2 = ArtifactSpec(
    paper="ssla",
    artifact="figure-2",
    records_health=True,
    title="Figure 2: predictive mean and ±2·sd band (labelled 95 % in the paper) per method",
    experiment="ssla/table-2",
    paper_seed=PAPER_SEED,
    target_artifacts=("table-2",),
    row_order=ROWS,
    column_order=("cov95",),
    extra_cells=False,
    rule=TABLE_2.rule,
    rules=TABLE_2.rules,
    causes=TABLE_2.causes,
    figure=lambda records, spec: predictive_bands(records, seed=PAPER_SEED),
    notes=(
        "Panels as the paper's 4 x 3 layout (SSLA, ASSLA, LA rows; MFVI, VI, HMC last), paper "
        "protocol left, corrected right; the band is ±2·sd as the authors' plot drew it "
        "although labelled 95 % (notes §10.16). Same records as Table 2.",
    ),
)

SPECS: list[ArtifactSpec] = [TABLE_2, FIGURE_2]
