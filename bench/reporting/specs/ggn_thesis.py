"""Report specs of the GGN thesis (Immer), Chapter 5: Figures 5.2-5.5.

The thesis prints figures and a few numbers: the marginal-likelihood optima (delta = 0.63,
sigma^2 = 0.1 on Snelson; delta = 0.13 on two moons) and the "optimal range" of delta. Those
are anchors computed from the grid in the records (:mod:`bench.reporting.figures.ggn_toys`);
the qualitative claims about NN vs GLM sampling are anchors on the table cells (test NLL, mean
predictive sd, decisiveness), judged by :class:`bench.reporting.claims.ClaimRule`.
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any

from bench.metrics.fit_health import assess, grid_checks
from bench.reporting.causes.ggn_thesis import (
    CLASSIFICATION_STEP,
    NEAR_OPTIMAL_NATS,
    SIDE_RUN_NOISES,
    STATIONARY_GAP_NATS,
    Records,
    describe_fits,
    elbo_gap_cause,
    elbo_gap_in_standard_errors,
    evidence_gap_cause,
    figure_5_3_cause,
    main_records,
    near_optimal_end,
    noise_records,
    optima_cause,
    optimum_cells_cause,
    overfitting_cause,
    side_run_cause,
    unconverged_elbo_reason,
    upper_median,
)
from bench.reporting.claims import ClaimRule, Means, fraction, over_seeds
from bench.reporting.figures.ggn_toys import (
    FIGURE_POSTERIORS,
    POSTERIORS,
    best_point,
    classification_model_selection,
    classification_predictives,
    grid_points,
    regression_model_selection,
    regression_predictives,
)
from bench.reporting.protocol_claims import (
    PROTOCOLS,
    Claim,
    protocol_anchors,
    protocol_label,
    records_of,
)
from bench.reporting.spec import Anchor, ArtifactSpec
from bench.reporting.verdicts import Count, Factor, Interval, Sign

# One step of the regression grids (0.2 decades).
REGRESSION_STEP = 10**0.2
ON_GRID_POINT = Factor(agree=1.05, close=REGRESSION_STEP * 1.05)
ON_CLASSIFICATION_POINT = Factor(agree=1.05, close=CLASSIFICATION_STEP * 1.05)
ALWAYS = ClaimRule(agree=1.0, close=0.75)


def optimum(coordinate: str, metric: str = "log_evidence"):
    """Anchor getter: ``coordinate`` (prior_precision / noise_variance) of the grid point
    maximising ``metric``."""
    return lambda records: float(getattr(best_point(grid_points(records), metric), coordinate))


def grid_steps_between_optima(step: float):
    """Anchor getter: grid steps of factor ``step`` (the larger over delta and sigma^2)
    between the evidence optimum and the test-log-likelihood optimum, as an integer: the
    log-ratio of two grid values is a whole number of steps up to rounding (2.0000000000005),
    and a ratio that is not within 1e-6 of one is refused (ValueError: not a grid step)."""

    def steps_between(a: float, b: float) -> int:
        steps = abs(math.log(a / b)) / math.log(step)
        if abs(steps - round(steps)) > 1e-6:
            raise ValueError(f"{a:g} and {b:g} are not a whole number of grid steps of "
                             f"{step:g} apart ({steps:.6g})")
        return round(steps)

    def get(records: Records) -> int:
        points = grid_points(records)
        a, b = best_point(points), best_point(points, "test_ll")
        steps = [steps_between(a.prior_precision, b.prior_precision)]
        if a.noise_variance is not None:
            steps.append(steps_between(a.noise_variance, b.noise_variance))
        return max(steps)

    return get


def train_ll_at_weakest_prior(records: Records) -> float:
    """Mean train log likelihood of the networks with the smallest delta."""
    points = grid_points(records)
    weakest = min(p.prior_precision for p in points)
    values = [p.train_ll for p in points if p.prior_precision == weakest]
    return sum(values) / len(values)


def overfitting_rejected(records: Records) -> float:
    """Share of {evidence, test LL} that is lower at the smallest delta than at the evidence
    optimum (for each sigma^2 of the grid)."""
    points = grid_points(records)
    outcomes = []
    for noise in {p.noise_variance for p in points}:
        row = [p for p in points if p.noise_variance == noise]
        weakest = min(row, key=lambda p: p.prior_precision)
        best = best_point(row)
        outcomes += [weakest.log_evidence < best.log_evidence, weakest.test_ll < best.test_ll]
    return fraction(outcomes)


def evidence_gap(records: Records) -> float:
    """Median over grid points of ``|eq. 3.17-3.18 - eq. 3.19|`` (nats): zero at a stationary
    ``theta*``, so it measures how much the MAP's inexactness moves the evidence."""
    gaps = sorted(abs(float(a) - float(b)) for r in records
                  for a, b in zip(r.get("arrays", {}).get("log_evidence", []),
                                  r.get("arrays", {}).get("linearised_log_evidence", []),
                                  strict=True) if a is not None and b is not None)
    if not gaps:
        raise LookupError("no log_evidence / linearised_log_evidence in the records")
    return gaps[len(gaps) // 2]


def test_ll_loss_at_evidence_optimum(records: Records) -> float:
    """Test log likelihood at the evidence optimum minus the best test log likelihood of the
    grid (0: the evidence picks the test-LL optimum; small: it lies on its plateau)."""
    points = grid_points(records)
    return best_point(points).test_ll - best_point(points, "test_ll").test_ll


def _cell(means: Means, row: str, column: str) -> float:
    if (row, column) not in means:
        raise LookupError(f"no cell {row} / {column}")
    return means[(row, column)]


def ratio(row: str, column: str):
    """Statistic: ``nn/<column>`` over ``glm/<column>`` of one posterior."""
    return lambda means: _cell(means, row, f"nn/{column}") / _cell(means, row, f"glm/{column}")


def difference(row: str, column: str):
    """Statistic: ``nn/<column>`` minus ``glm/<column>`` of one posterior."""
    return lambda means: _cell(means, row, f"nn/{column}") - _cell(means, row, f"glm/{column}")


def value(row: str, column: str):
    """Statistic: one cell."""
    return lambda means: _cell(means, row, column)


def nn_minus_best_glm(row: str, column: str):
    """Statistic: ``nn/<column>`` of one posterior minus the best (lowest) ``glm/<column>`` of
    the four (judges NN sampling against a working predictive, not against its own GLM, which
    may fail too)."""
    return lambda means: (_cell(means, row, f"nn/{column}")
                          - min(_cell(means, r, f"glm/{column}") for r in POSTERIORS))


def glm_consistent(column: str, tolerance: float, higher_is_better: bool):
    """Statistic: share of the four posteriors whose GLM ``column`` is within ``tolerance`` of
    the best posterior's."""

    def statistic(means: Means) -> float:
        values = [_cell(means, row, f"glm/{column}") for row in POSTERIORS]
        best = max(values) if higher_is_better else min(values)
        return fraction(abs(v - best) <= tolerance for v in values)

    return statistic


# Figure 5.5b's decision boundary: map inputs whose Bernoulli sd sqrt(Lambda) is at least this
# (p in [0.2, 0.8]).
BOUNDARY_NOISE_SD = 0.4


def _points(flat: list[float]) -> list[tuple[float, float]]:
    return list(zip(flat[0::2], flat[1::2], strict=True))


def boundary_log_growth(record: dict[str, Any]) -> float:
    """log10 of the median BLR model sd over map inputs on the decision boundary (Bernoulli
    sd >= :data:`BOUNDARY_NOISE_SD`) at least ``task.far_distance`` from every training input,
    over its median on the boundary within ``task.near_distance`` of one (LookupError when
    either set is empty or a median is 0)."""
    arrays, task = record["arrays"], record["config"]["task"]
    x_plot, x_train = _points(arrays["x_plot"]), _points(arrays["x_train"])
    near, far = [], []
    for point, model_sd, noise_sd in zip(x_plot, arrays["blr/model_sd"],
                                         arrays["blr/noise_sd"], strict=True):
        if noise_sd < BOUNDARY_NOISE_SD:
            continue
        distance = min(math.dist(point, train) for train in x_train)
        if distance <= float(task["near_distance"]):
            near.append(model_sd)
        elif distance >= float(task["far_distance"]):
            far.append(model_sd)
    if not near or not far:
        raise LookupError(f"decision boundary with {len(near)} map input(s) near the data and "
                          f"{len(far)} far from it")
    low, high = upper_median(near), upper_median(far)
    if low <= 0 or high <= 0:
        raise LookupError("a median model sd on the boundary is 0")
    return math.log10(high / low)


def boundary_model_sd_growth(row: str):
    """Claim statistic of the records: :func:`boundary_log_growth` of ``row``'s record of
    each seed, the mean over seeds with its 95% CI."""

    def growth(seed_records: Records) -> float:
        found = [r for r in seed_records
                 if r.get("variant") == row and "blr/model_sd" in r.get("arrays", {})]
        if not found:
            raise LookupError(f"no {row} record with the BLR maps")
        return boundary_log_growth(found[0])

    return over_seeds(growth, f"{row} record with the BLR maps")


def nn_worse_than_glm(rows: tuple[str, ...]):
    """Statistic: share of ``rows`` whose NN test NLL exceeds their GLM test NLL."""
    return lambda means: fraction(_cell(means, row, "nn/test_nll") > _cell(means, row,
                                                                             "glm/test_nll")
                                  for row in rows)


GRID_TABLE = (("*", "argmax_delta"), ("*", "max_log_evidence"))
MODEL_SELECTION_NOTES = (
    "Protocol (notes sections 1-4): MLP with 5 hidden layers of 25 tanh units (P = 2676 for "
    "Snelson, 2701 for two moons), PyTorch's default Linear init from the job seed, shared by "
    "every grid point; MAP by full-batch Adam on the summed negative log joint in float64; at "
    "each MAP the Laplace-GGN log evidence of eq. 3.17-3.18 at mu = theta* (log-determinant "
    "in function space, exact), the average train and test log likelihood at the MAP (eq. "
    "5.1, with the grid point's sigma^2). The thesis does not say how many points its grids "
    "have; we use the notes' grids, on which the reported optima lie.",
    "The table shows per sigma^2 row the evidence-maximising delta and the maximum; the CSV "
    "holds every grid point (`delta=<value>/<quantity>`): log_evidence, train_ll, test_ll, "
    "eq. 3.19's exact linearised evidence (equal to log_evidence at a stationary theta*), "
    "|mu_BLR - theta*| / |theta*| and the final gradient norm.",
    "Anchors: an optimum agrees when it is the paper's grid point (factor 1.05), close one "
    "grid step away. The stationarity anchor is our own check, not a paper claim: the median "
    "gap between the Laplace evidence at theta* and eq. 3.19's exact linearised evidence, "
    "which agree at a stationary theta* (|mu_BLR - theta*| / |theta*| is in the CSV; it is "
    "not used, since it is 1 for networks that collapse to theta* = 0 at large delta).",
    "Adam at paper scale and for Figure 5.3 at every scale but smoke: the notes' lr 1e-3 "
    "for 10,000 steps (the thesis: 'until convergence').",
)
CPU_GRID_NOTE = (
    "cpu scale (deviation, every Figure 5.2 cell): Adam lr 1e-2 annealed to 0 (cosine) over "
    "3000 steps instead of a constant 1e-3 for 10,000, so the 651 networks fit in about 20 "
    "core-minutes; the stationarity anchor and the CSV's gradient norms show how close each "
    "MAP is."
)


def with_grid_health(record: dict[str, Any]) -> dict[str, Any]:
    """A model-selection record with its grid's health
    (:func:`bench.metrics.fit_health.grid_checks`, as the task records it), computed from the
    record's own arrays and config when it was written before the task recorded health."""
    arrays = record.get("arrays") or {}
    if record.get("health") or "prior_precision" not in arrays or not record.get("cells"):
        return record
    cap = (((record.get("config") or {}).get("method") or {}).get("polish_iterations")
           if "polish_iterations" in arrays else None)
    row = record["cells"][0]["row"]
    return {**record, "health": {row: assess(grid_checks(arrays, int(cap) if cap else None))}}


FIGURE_5_2 = ArtifactSpec(
    paper="ggn_thesis",
    artifact="figure-5.2",
    records_health=True,
    # Grids written before the task recorded health get it from their own arrays.
    record_view=with_grid_health,
    title="Figure 5.2: Snelson with a gap, Laplace-GGN marginal likelihood over delta x "
          "sigma^2",
    paper_seed=None,
    ignore_targets=(("*", "*"),),
    table_cells=GRID_TABLE,
    figure=regression_model_selection,
    anchors=(
        Anchor("delta maximising the marginal likelihood", "0.63", optimum("prior_precision"),
               ON_GRID_POINT),
        Anchor("sigma^2 maximising the marginal likelihood", "0.1", optimum("noise_variance"),
               ON_GRID_POINT),
        Anchor("grid steps between the evidence optimum and the test-LL optimum",
               "close (0 steps)", grid_steps_between_optima(REGRESSION_STEP),
               Count(agree=1, close=2),
               cause=optima_cause),
        Anchor("share of {evidence, test LL} lower at the smallest delta than at the evidence "
               "optimum, over sigma^2 rows", "overfitting rejected (1)", overfitting_rejected,
               ALWAYS, cause=overfitting_cause),
        Anchor("our check: median |eq. 3.18 - eq. 3.19| over the grid (nats)",
               "stationary MAP (0)", evidence_gap,
               ClaimRule(agree=STATIONARY_GAP_NATS, close=2.0, higher_is_better=False),
               cause=evidence_gap_cause),
    ),
    notes=(*MODEL_SELECTION_NOTES, CPU_GRID_NOTE),
)

# Labels of the Figure 5.3 anchors whose cause is the record's fits and the measured analysis
# (figure_5_3_cause).
FIGURE_5_3_CAUSED = ("delta maximising the marginal likelihood", "*maximum (text's range)",
                     "largest delta with log evidence*", "grid steps between*")
FIGURE_5_3_COLLAPSE = (
    "Collapse to f = 0 (measured at cpu scale: seed 0 from delta = 7.74, seeds 1 and 2 from "
    "12.9; side runs on seed 0, L(theta) = sum BCE + delta/2 |theta|^2). The labels are "
    "balanced (75 / 75), so at theta = 0 (f = 0, L = 150 log 2 = 103.97) the gradient is "
    "exactly 0, and the Hessian there (computed, P = 2701) is delta I plus n/4 = 37.5 on the "
    "output bias alone: theta = 0 is a strict local minimum at every delta of the grid. "
    "Which minimum a network reaches depends on its initialisation: the seed-0 init has "
    "output range max|f| = 0.13 and |grad sum BCE| = 11.2 against the prior's delta |theta| = "
    "6.83 delta (seeds 1 and 2: 16.3 and 22.7); Adam at delta = 7.74, 21.5 and 100 shrinks "
    "it to max|f| < 5e-4 within 250 steps with train accuracy 0.5 throughout, and L-BFGS "
    "from the same init ends at theta = 0 already at delta = 4.64 (at 1.67 and 2.78 at a "
    "near-linear boundary). Is f = 0 the global MAP? L-BFGS from six other starts (the delta "
    "= 4.64 MAP; the delta = 0.6 MAP scaled by 0.8 and 0.5; a one-unit-per-layer network "
    "computing 0.5, 1 or 2 x the logistic-regression function) and the continuation up the "
    "grid: at delta = 7.74 they end at a near-linear boundary with L = 87.23 (train / test "
    "accuracy 0.807 / 0.835; from the logistic-regression starts L = 103.01), below L(0), so "
    "there f = 0 is a local minimum reached from the seed-0 init, not the MAP (seeds 1 and 2 "
    "keep a near-linear boundary at 7.74: train LL -0.366, evidence -91.6 against -104.9 at "
    "f = 0); at delta = 12.9 the near-linear minimum (L = 107.85) lies above L(0); at delta "
    "= 21.5, 35.9, 59.9 and 100 all seven starts (these six and the init) and the "
    "continuation end at theta = 0, so f = 0 is the only "
    "minimum we found there, and a linear boundary at B is not a minimum of this objective at "
    "delta = 100 in our runs (B's delta is our reading: the thesis gives none; we plot the "
    "grid's largest, 100).",
    "Effect of the polish: the anchors' causes quote it from the plotted records (per seed "
    "the largest gradient norm after the polish, where, its L-BFGS iterations, and Adam's "
    "largest before it). A side run on an earlier record (seed 0, an Adam-only record "
    "polished afterwards; not the plotted records, whose gradient norms differ) found the "
    "evidence moving only at delta <= 0.215, where Adam had not reached a minimum (0.01: "
    "-89.9 -> -61.4; "
    "0.129: -107.9 -> -109.5; 0.215: -63.2 -> -88.9, Adam had stopped short of the "
    "interpolating minimum; the others 0.3-4.5 nats), and by less than 0.01 nats at "
    "0.359-100. The optimum stays at 0.599."
)


def of_records(select, function):
    """``function`` (an anchor getter, a cause or a figure) applied to ``select(records)``."""
    return lambda records, *rest: function(select(records), *rest)


def side_run_anchors(noise: float) -> tuple[Anchor, ...]:
    """The optimum and the 2-nat range of Figure 5.3 read from the side runs at ``noise``."""
    select, tag = noise_records(noise), f" [side run: data noise {noise:g}]"
    rule = Factor(agree=CLASSIFICATION_STEP * 1.05, close=3.0)
    side = {"cause": side_run_cause(noise), "study": True,
            "rows": (f"bernoulli (data noise {noise:g})",)}
    return (
        Anchor("delta maximising the marginal likelihood" + tag, "0.13",
               of_records(select, optimum("prior_precision")), ON_CLASSIFICATION_POINT, **side),
        Anchor(f"smallest delta with log evidence within {NEAR_OPTIMAL_NATS:g} nats of the "
               "maximum (text's range)" + tag, "0.02",
               of_records(select, near_optimal_end("low")), rule, **side),
        Anchor(f"largest delta with log evidence within {NEAR_OPTIMAL_NATS:g} nats of the "
               "maximum" + tag, "2", of_records(select, near_optimal_end("high")), rule, **side),
    )


def _figure_5_3_anchor(label: str, paper: str, statistic, rule) -> Anchor:
    """An anchor of Figure 5.3 read from the experiment's own records (side runs apart; its
    fits: row ``bernoulli``), caused by :func:`figure_5_3_cause` when its label matches
    :data:`FIGURE_5_3_CAUSED`."""
    caused = any(fnmatch.fnmatchcase(label, pattern) for pattern in FIGURE_5_3_CAUSED)
    return Anchor(label, paper, of_records(main_records, statistic), rule,
                  cause=figure_5_3_cause if caused else None, rows=("bernoulli",))


FIGURE_5_3 = ArtifactSpec(
    paper="ggn_thesis",
    artifact="figure-5.3",
    records_health=True,
    title="Figure 5.3: two moons, Laplace-GGN marginal likelihood over delta",
    paper_seed=None,
    ignore_targets=(("*", "*"),),
    table_cells=(("*", "delta=*/log_evidence"), ("*", "delta=*/test_ll"), *GRID_TABLE),
    paper_rows={"bernoulli": "bernoulli", "bernoulli (data noise *)": "bernoulli"},
    record_view=with_grid_health,
    figure=of_records(main_records, classification_model_selection),
    causes={(pattern, "*"): optimum_cells_cause for pattern in FIGURE_5_3_CAUSED},
    anchors=(
        _figure_5_3_anchor("delta maximising the marginal likelihood", "0.13",
                           optimum("prior_precision"), ON_CLASSIFICATION_POINT),
        _figure_5_3_anchor(f"smallest delta with log evidence within {NEAR_OPTIMAL_NATS:g} "
                           "nats of the maximum (text's range)", "0.02",
                           near_optimal_end("low"),
                           Factor(agree=CLASSIFICATION_STEP * 1.05, close=3.0)),
        _figure_5_3_anchor("the same against the caption's range", "0.3",
                           near_optimal_end("low"),
                           Factor(agree=CLASSIFICATION_STEP * 1.05, close=3.0)),
        _figure_5_3_anchor(f"largest delta with log evidence within {NEAR_OPTIMAL_NATS:g} nats "
                           "of the maximum", "2", near_optimal_end("high"),
                           Factor(agree=CLASSIFICATION_STEP * 1.05, close=3.0)),
        _figure_5_3_anchor("grid steps between the evidence optimum and the test-LL optimum",
                           "plateau of the test LL (0 steps)",
                           grid_steps_between_optima(CLASSIFICATION_STEP),
                           Count(agree=1, close=2)),
        _figure_5_3_anchor("test LL at the evidence optimum minus the best test LL (mean, nats)",
                           "on the test LL's plateau (0)", test_ll_loss_at_evidence_optimum,
                           ClaimRule(agree=-0.05, close=-0.1)),
        _figure_5_3_anchor("train log likelihood at the smallest delta (tends to 0)", "0",
                           train_ll_at_weakest_prior, ClaimRule(agree=-0.05, close=-0.15)),
        _figure_5_3_anchor("share of {evidence, test LL} lower at the smallest delta than at "
                           "the evidence optimum", "overfitting rejected (1)",
                           overfitting_rejected, ALWAYS),
        _figure_5_3_anchor("our check: median |eq. 3.18 - eq. 3.19| over the grid (nats)",
                           "stationary MAP (0)", evidence_gap,
                           ClaimRule(agree=0.5, close=2.0, higher_is_better=False)),
        *(anchor for noise in SIDE_RUN_NOISES for anchor in side_run_anchors(noise)),
    ),
    notes=(*MODEL_SELECTION_NOTES,
           "Figure 5.3 (deviation from the notes' Adam-only fit, every scale): each grid "
           "point's Adam end point is polished by full-batch L-BFGS (at most 10,000 "
           "iterations at cpu / paper scale, 200 at smoke; to a gradient norm of 1e-6 or until "
           "the objective stops decreasing), the thesis's 'until convergence'; the CSV holds "
           "per grid point Adam's gradient norm (adam_gradient_norm), the polished one "
           "(gradient_norm) and the L-BFGS iterations (polish_iterations). Seeds: the figure "
           "shows the mean over seeds with its 95% Student-t band (the train and test log "
           "likelihood bands cut at 0, the bound of a log probability) and each seed's curve; "
           "the anchors read the mean-over-seeds curves, their causes each seed's optimum and "
           "gradient norms.",
           "Optimal range: the thesis's text says 0.02-2, its caption 0.3-2 (only the text's "
           f"contains the optimum 0.13); ours is the delta range with log evidence within "
           f"{NEAR_OPTIMAL_NATS:g} nats (total over the 150 points) of the maximum, judged "
           "against both; an end agrees within one grid step (factor 1.67).",
           "Side runs (conf/experiment/ggn_thesis/figure-5.3-noise.yaml, sensitivity rows "
           "'bernoulli (data noise 0.1)' and '(data noise 0.2)'): the thesis does not state "
           "the two-moons noise, so ours (0.3, the companion code's default) is an input of "
           "ours; the side runs repeat the experiment's seeds, grid, network and training at "
           "noise 0.1 and 0.2. The figure and the thesis's anchors read the 0.3 records only; "
           "the side runs have anchors of their own, listed with the studies.",
           *FIGURE_5_3_COLLAPSE),
)


PREDICTIVE_NOTES = (
    "Protocol paper (notes sections 3 and 5): the four posteriors start from the same initial "
    "mean (job seed). VOGGN / LGVA / OGGN: full-batch natural-gradient VI with the GGN, full "
    "covariance in float64, step size 0.999, one Monte Carlo sample, Sigma_0 = 0.1 I, the "
    "notes' fixed iteration count; L-GGN: full-batch Adam MAP then the Laplace-GGN. 1000 "
    "parameter draws per posterior, the same draws for NN sampling (network at the draw) and "
    "GLM sampling (network linearised at the final mean / theta*).",
    "Protocol corrected (conf/ggn_fit/corrected.yaml): the same, but step size 0.1 (at 0.999 "
    "each update is an undamped Gauss-Newton step), run until the stationarity rule "
    "(bench/training/stopping.py) says so or the scale's cap ends it: OGGN stops when every "
    "iterate of the last 20 has a gradient norm of the MAP objective at the mean <= 1e-3 and "
    "a relative step <= 1e-4; VOGGN / LGVA when the gradient of their objective averaged over "
    "the last 200 iterations has norm <= 0.1 and the mean's net drift is <= 1e-4 per "
    "iteration; VOGGN (and VOGGN-S10) also when its ELBO stops rising (elbo_plateau, "
    "bench/training/elbo_plateau.py: an estimate of 200 draws every 50 iterations, always "
    "the same draws, and 5 estimates in a row that do not beat the best by 2 paired "
    "standard errors); all only after (1 - 0.1)^t <= 1e-3 (Sigma_0 forgotten). The L-GGN MAP is "
    "polished by full-batch L-BFGS (at most 3000 iterations, to a gradient norm of 1e-6 or "
    "until the objective stops decreasing). Anchors are judged per protocol; a cause quotes "
    "how every fit ended (iterations and why it stopped, gradient norm of its objective at "
    "the final mean and the rule's window measures, training NLL at the mean, seconds per "
    "iteration) and the other protocol's value.",
    "Known answers behind the algorithms (tests/unit/methods/test_ggn_known_answers.py): on "
    "Bayesian linear regression OGGN at step 1 is the exact posterior in one step and all "
    "three converge for steps < 1 (VOGGN / LGVA within a derived Monte Carlo tolerance); on "
    "Bayesian logistic regression OGGN at step 1 is Newton's method to the MAP and its "
    "Laplace precision, and VOGGN at a small step reaches an independently computed "
    "Gaussian-VI optimum. On nonlinear networks (1-10-1 tanh and 2-6-5-1, Gaussian and "
    "Bernoulli, random and far states) one OGGN, VOGGN and LGVA step equals a second "
    "implementation written from the thesis's equations to 1e-10 and fails when J or f is "
    "taken at the wrong point (tests/unit/methods/test_ggn_step_nonlinear.py). These test the "
    "update, not where a fit ends: whether a q is the ELBO's optimum is read against the "
    "reference VI.",
    "reference-VI (our oracle, not in the thesis): pyro's reparameterisation-gradient "
    "Gaussian VI on the same network, delta, likelihood and points (mean-field and "
    "low-rank-plus-diagonal guides, from the seed's initialisation and from the MAP pyro "
    "finds from it; 32 particles, 3000 steps, learning rate 1e-2 decayed to 5e-4), the fit "
    "with the highest ELBO kept (conf/method/ggn_posteriors.yaml). The cell elbo of every "
    "row is one definition (bench/metrics/elbo.py: 1000 draws, closed-form KL) on the "
    "training set; the causes give its Monte Carlo standard error and each q's gap to the "
    "reference's best. The reference fit does not depend on the protocol: it is stored once "
    "per seed and loaded by the other protocol's job (state_reused in its record).",
    "VOGGN-S10 (our sensitivity row, not in the thesis): VOGGN with S = 10 draws per "
    "iteration, same step and rule as VOGGN under each protocol.",
    "Iterations: 1000 at paper scale (notes [R]) under the paper protocol, at most 20,000 "
    "under the corrected one; cpu scale (deviation, every VOGGN / LGVA / OGGN / VOGGN-S10 "
    "cell): paper protocol 300 (VOGGN-S10 150), corrected protocol at most 600 (VOGGN, LGVA), "
    "1000 (OGGN) and 250 (VOGGN-S10), since each iteration costs a 2676 x 2676 GGN product "
    "and Cholesky (seconds per iteration in the causes). L-GGN: Adam lr 1e-3 for 10,000 "
    "steps at both scales.",
)

# Measured in side runs for issues 23 and 42 (seed 0; scripts not in the project).
VOGGN_UNDERFIT_SIDE_RUN = (
    "Why VOGGN under-fits, as far as measured (side runs, seed 0, step 0.1, S = 1, Monte Carlo "
    "ELBO with 1000 draws on the training set). An earlier side run compared VOGGN's end "
    "state from the shared init (600 it.: ELBO -1462 +- 10, train NLL at the mean 395; "
    "predicting mean(y) gives 395.25, the polished MAP 21.4) with VOGGN started at the "
    "Laplace-GGN posterior (-1593 +- 12, NLL 388) and with MAP-centred q's (the Laplace-GGN "
    "posterior -30462 +- 643, its covariance scaled by the best factor 0.03 -5399 +- 63) and "
    "read it as the ELBO preferring the flat solution. That reading does not hold: pyro's "
    "reference Gaussian VI on the same network, delta, sigma^2 and points found a low-rank q "
    "with ELBO -509 +- 2.2 whose mean fits the data (train NLL 232), far above VOGGN's end "
    "state (-1473 +- 11 in that run). So VOGGN's end state is neither converged nor the "
    "ELBO's optimum. The reference-VI row (our oracle, not in the thesis) and the causes "
    "give each q's ELBO beside the reference's best where the records have them."
)

# Measured by bench.benchmarks.lgva_single_sample (make diagnose-lgva-single-sample,
# reports/ggn_thesis/lgva-single-sample.md), issue 42.
LGVA_SINGLE_SAMPLE_DIAGNOSIS = (
    "Why LGVA fails with one Monte Carlo sample, as measured (reports/ggn_thesis/"
    "lgva-single-sample.md, make diagnose-lgva-single-sample; seed 0, from OGGN's state at the "
    "cpu cap: 1000 iterations at step 0.1, gradient norm 0.674, not at its rule, train NLL "
    "22.24). Distances d are in OGGN's precision norm (posterior sds). From that state, "
    "OGGN itself stays at NLL 22.24 for 400 more iterations (d 0.27). LGVA at step 0.1, S = "
    "1: the draw's part of the mean step moves the mean by d 0.30, then 1.28, and the train "
    "NLL jumps from 22.29 to 1849 at the second update; in a linear model the mean would "
    "jitter at an RMS d of 0.86 around its fixed point (module docstring) and the NLL change "
    "by about d^2 / 2. "
    "At step 0.01 the draw's part at the third update is 6.8 times step x the draw's offset "
    "as the update sees it (the least-norm e with J e = f-hat - f(mu)), "
    "above the linear model's bound of about 1, and the NLL jumps to 1904; with S = 10 draws at "
    "step 0.1 it reaches 62 at the second update and 877 at the third. After 400 updates every "
    "LGVA run sits at d 14-318 with NLL 433-3008. So the training NLL of this network rises "
    "by about 10^3 nats when the mean moves by at most 1.6 GGN posterior standard deviations "
    "from OGGN's (at most 0.66 at step 0.01: the sum of the draws' parts before the jump), and "
    "the draws' term of the LGVA mean update, of that size, throws the mean out of the basin in "
    "two or three updates; a smaller step or ten draws delays it by an update and does not "
    "prevent it. Measured from one state of one seed.")

REGRESSION_CLAIMS = (
    Claim("GLM works for all four: share within 0.2 nats of the best GLM test NLL",
          "all four", glm_consistent("test_nll", 0.2, higher_is_better=False), ALWAYS,
          POSTERIORS),
    *(Claim(f"{row} NN sampling fails: NN / GLM mean predictive sd", "huge variance",
            ratio(row, "mean_sd"), ClaimRule(agree=5.0, close=2.0), (row,))
      for row in ("L-GGN", "OGGN")),
    *(Claim(f"{row} NN sampling fails: NN minus GLM test NLL (nats)", "wrong mean",
            difference(row, "test_nll"), ClaimRule(agree=1.0, close=0.3), (row,))
      for row in ("L-GGN", "OGGN")),
    Claim("LGVA NN sampling overestimates uncertainty: NN / GLM mean predictive sd",
          "overestimated (> 1.5)", ratio("LGVA", "mean_sd"), ClaimRule(agree=1.5, close=1.2),
          ("LGVA",)),
    Claim("VOGGN NN sampling is reasonable: NN minus GLM test NLL (nats)",
          "similar to GLM (<= 0.2)", difference("VOGGN", "test_nll"),
          ClaimRule(agree=0.2, close=0.5, higher_is_better=False), ("VOGGN",)),
    Claim("VOGGN NN sampling is reasonable: NN test NLL minus the best GLM test NLL",
          "similar to GLM (<= 0.2)", nn_minus_best_glm("VOGGN", "test_nll"),
          ClaimRule(agree=0.2, close=0.5, higher_is_better=False), POSTERIORS),
    Claim("VOGGN NN sampling is reasonable: NN / GLM mean predictive sd", "similar to GLM",
          ratio("VOGGN", "mean_sd"), Interval(low=0.5, high=2.0, close_factor=2.0), ("VOGGN",)),
)

# The natural-gradient q's whose ELBO the reference VI checks (the thesis's VOGGN, and ours
# with ten draws per update).
ELBO_CHECKED_ROWS = ("VOGGN", "VOGGN-S10")


def elbo_gap_label(row: str, protocol: str) -> str:
    """The label of the ELBO check of ``row`` under ``protocol``."""
    return protocol_label(f"our check: reference VI's best ELBO minus {row}'s, in combined "
                          "standard errors", protocol)


def elbo_gap_anchors(rows: tuple[str, ...]) -> tuple[Anchor, ...]:
    """Our check per protocol: how far each natural-gradient q's ELBO lies below the best the
    reference VI found on the same seed, in combined standard errors (the update maximises
    the ELBO, thesis Ch. 4). Only the reference's health counts (the gap measures the q's own
    fit, whatever it is); the cause says by how much every q lies below and whether its fit
    converged, and a q whose fit did not reach its rule is not comparable
    (:func:`elbo_check_not_comparable`). Shown where the protocol's records have a reference
    VI fit."""
    return tuple(
        Anchor(elbo_gap_label(row, protocol), "0 (the update maximises the ELBO; within 3)",
               of_records(lambda records, p=protocol: records_of(p, records),
                          elbo_gap_in_standard_errors(row)),
               ClaimRule(agree=3.0, close=10.0, higher_is_better=False),
               cause=of_records(lambda records, p=protocol: records_of(p, records),
                                elbo_gap_cause),
               protocol=protocol, rows=("reference-VI",), study=True,
               applies=lambda records, p=protocol: any(
                   r.get("protocol") == p and r.get("variant") == "reference-VI"
                   for r in records))
        for protocol in PROTOCOLS for row in rows)


def elbo_check_not_comparable(rows: tuple[str, ...]) -> dict:
    """The ELBO checks of fits that ended by their cap: "fit not converged", with the gaps."""
    return {(elbo_gap_label(row, protocol), ""):
            of_records(lambda records, p=protocol: [r for r in records
                                                    if r.get("protocol") == p],
                       unconverged_elbo_reason(row))
            for protocol in PROTOCOLS for row in rows}


FIGURE_5_4 = ArtifactSpec(
    paper="ggn_thesis",
    artifact="figure-5.4",
    records_health=True,
    title="Figure 5.4: Snelson, NN vs GLM predictive of VOGGN, LGVA, OGGN, L-GGN",
    paper_seed=None,
    ignore_targets=(("*", "*"),),
    row_order=FIGURE_POSTERIORS,
    figure=regression_predictives,
    anchors=(*protocol_anchors(REGRESSION_CLAIMS, describe_fits),
             *elbo_gap_anchors(ELBO_CHECKED_ROWS)),
    not_comparable=elbo_check_not_comparable(ELBO_CHECKED_ROWS),
    notes=(*PREDICTIVE_NOTES,
           "Cells: test_nll (NN: the mixture of the draws' N(f_s, sigma^2); GLM: the closed "
           "form N(mean, J Sigma J^T + sigma^2)), test_rmse of the predictive mean, mean_sd the "
           "function's predictive sd averaged over x in [0, 6] (the figure's band, sigma^2 not "
           "added, notes 7.4), elbo the ELBO of the row's q on the training set. delta = 0.63, "
           "sigma^2 = 0.1 (Figure 5.2's optimum).",
           VOGGN_UNDERFIT_SIDE_RUN,
           LGVA_SINGLE_SAMPLE_DIAGNOSIS,
           "Corrected OGGN past the cpu cap (side run, seed 0, the same deterministic "
           "iterates continued to 2800): not stationary; |grad L| at the mean falls to 0.037 "
           "by iteration 1400, then rises slowly to 0.054 at 2800 while the train NLL stays "
           "at 22.2425 (to 1e-5) and the mean moves 1.4e-4 per iteration (relative): the "
           "case an NLL band calls settled."),
)

CLASSIFICATION_CLAIMS = (
    Claim("GLM works for all four: share within 0.03 of the best GLM test accuracy",
          "all four", glm_consistent("accuracy", 0.03, higher_is_better=True), ALWAYS,
          POSTERIORS),
    Claim("L-GGN NN sampling is near uniform: mean |2p - 1| on the test set",
          "uniform (near 0)", value("L-GGN", "nn/decisiveness"),
          ClaimRule(agree=0.1, close=0.25, higher_is_better=False), ("L-GGN",)),
    Claim("VOGGN NN sampling is viable: NN minus GLM test NLL (nats)", "similar to GLM",
          difference("VOGGN", "test_nll"),
          ClaimRule(agree=0.05, close=0.15, higher_is_better=False), ("VOGGN",)),
    Claim("VOGGN NN sampling is viable: NN test NLL minus the best GLM test NLL",
          "similar to GLM", nn_minus_best_glm("VOGGN", "test_nll"),
          ClaimRule(agree=0.05, close=0.15, higher_is_better=False), POSTERIORS),
    Claim("LGVA and OGGN NN sampling worse than their GLM: share with higher NN test NLL",
          "worse (both)", nn_worse_than_glm(("LGVA", "OGGN")), ALWAYS, ("LGVA", "OGGN")),
    Claim("our reading of Figure 5.5b: L-GGN model sd on the decision boundary (Bernoulli "
          "sd >= 0.4, p in [0.2, 0.8]) grows away from the data: log10 of its median far from "
          "the data over its median near the data (mean over seeds, 95% CI)",
          "low where the boundary is supported by data, grows away from it",
          boundary_model_sd_growth("L-GGN"), Sign(positive=True), ("L-GGN",),
          of_records=True),
)

FIGURE_5_5 = ArtifactSpec(
    paper="ggn_thesis",
    artifact="figure-5.5",
    records_health=True,
    title="Figure 5.5: two moons, NN vs GLM predictive of VOGGN, LGVA, OGGN, L-GGN; BLR "
          "model and noise uncertainty",
    paper_seed=None,
    ignore_targets=(("*", "*"),),
    row_order=FIGURE_POSTERIORS,
    figure=classification_predictives,
    anchors=(*protocol_anchors(CLASSIFICATION_CLAIMS, describe_fits),
             *elbo_gap_anchors(ELBO_CHECKED_ROWS)),
    not_comparable=elbo_check_not_comparable(ELBO_CHECKED_ROWS),
    notes=(*PREDICTIVE_NOTES,
           "Cells: test_nll, accuracy and decisiveness (mean |2p - 1|, 0 for uniform "
           "predictions) of the predictive probability E[s(f)] over the draws; elbo the "
           "ELBO of the row's q on the training set; "
           "model_sd_far_over_near (CSV only): the BLR model sd sqrt(Lambda J Sigma J^T "
           "Lambda) averaged over map inputs at distance >= 1 from every training input over "
           "its average within 0.2 of one; a mean that the few inputs on the boundary's "
           "extension dominate, where Lambda is not tiny. The anchor reads Figure 5.5b's two "
           "halves on the decision boundary alone (Bernoulli sd >= 0.4): the median model sd "
           "far from the data (>= 1) over the median near it (<= 0.2), as log10, judged by "
           "whether its CI over seeds lies above 0 (one seed: close at best). delta = 0.13 "
           "(Figure 5.3's optimum).",
           "VOGGN's under-fitting (train NLL at the mean near chance, 150 ln 2 = 104): the "
           "side runs behind Figure 5.4's note were made on Snelson only; on two moons the "
           "reference-VI row and the causes compare VOGGN's ELBO with the reference's best "
           "where the records have them.",
           "Corrected OGGN past the cpu cap (side run, seed 0, the same deterministic "
           "iterates continued): the stationarity rule stops it at iteration 2439 (|grad L| "
           "9.4e-4 at every iterate of the last 20, train NLL 0.678); at the cap of 1000 its "
           "gradient norm was 0.23."),
)

SPECS = [FIGURE_5_2, FIGURE_5_3, FIGURE_5_4, FIGURE_5_5]
