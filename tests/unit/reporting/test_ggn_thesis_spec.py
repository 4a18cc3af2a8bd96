"""GGN thesis report anchors read the optima and claims from records (synthetic records)."""

from __future__ import annotations

import math

import pytest
from matplotlib.collections import PolyCollection

from bench.reporting.aggregate import mean_and_ci
from bench.reporting.causes.ggn_thesis import (
    FIGURE_5_3_OPTIMUM_CAUSE,
    constant_prediction_nll,
    near_optimal_end,
    noise_sensitivity,
    optimum_cells_cause,
)
from bench.reporting.compare import anchor_table
from bench.reporting.figures.ggn_toys import (
    best_point,
    classification_model_selection,
    grid_points,
    seed_curve,
)
from bench.reporting.intervals import LOG_PROBABILITY
from bench.reporting.protocol_claims import protocol_label
from bench.reporting.specs.ggn_thesis import (
    FIGURE_5_2,
    FIGURE_5_3,
    FIGURE_5_4,
    grid_steps_between_optima,
)
from tests.helpers import with_health

DELTAS = [10 ** (-2 + 4 * k / 18) for k in range(19)]


def grid_record(noise, evidence, test_ll, train_ll=None, seed=0):
    n = len(DELTAS)
    return with_health({"status": "ok", "seed": seed, "fitted": {"noise_variance": noise},
            "arrays": {"prior_precision": DELTAS, "log_evidence": evidence,
                       "test_ll": test_ll, "train_ll": train_ll or [-0.01] * n,
                       "blr_mean_shift": [1e-3] * n,
                       "linearised_log_evidence": [v + 0.1 for v in evidence]},
            "cells": [], "config": {}})


def peaked(at: int, height: float = 0.0):
    return [height - (k - at) ** 2 for k in range(len(DELTAS))]


def test_optima_come_from_the_best_grid_point_over_records():
    records = [grid_record(0.01, peaked(3, -50), peaked(3, -5)),
               grid_record(0.1, peaked(5, -10), peaked(6))]
    points = grid_points(records)
    assert len(points) == 2 * len(DELTAS)
    best = best_point(points)
    assert best.noise_variance == 0.1 and best.prior_precision == pytest.approx(DELTAS[5])
    assert grid_steps_between_optima(10 ** (4 / 18))(records) == pytest.approx(1.0)
    lines = anchor_table(FIGURE_5_2, records).set_index("label")
    assert lines.loc["sigma^2 maximising the marginal likelihood", "verdict"] == "agrees"
    assert lines.loc["delta maximising the marginal likelihood", "verdict"] == "differs"


def test_seeds_are_averaged_and_the_near_optimal_range_read_off_the_evidence():
    records = [grid_record(None, peaked(5), peaked(5), seed=0),
               grid_record(None, [v - 2.0 for v in peaked(5)], peaked(5), seed=1)]
    points = grid_points(records)
    assert len(points) == len(DELTAS)
    assert best_point(points).log_evidence == pytest.approx(-1.0)
    assert near_optimal_end("low")(records) == pytest.approx(DELTAS[4])
    assert near_optimal_end("high")(records) == pytest.approx(DELTAS[6])
    lines = anchor_table(FIGURE_5_3, records).set_index("label")
    assert lines.loc["delta maximising the marginal likelihood", "verdict"] == "agrees"
    assert lines.loc["train log likelihood at the smallest delta (tends to 0)",
                     "verdict"] == "agrees"
    assert lines.loc["our check: median |eq. 3.18 - eq. 3.19| over the grid (nats)",
                     "ours"] == pytest.approx(0.1)
    assert lines.loc["test LL at the evidence optimum minus the best test LL (mean, nats)",
                     "ours"] == pytest.approx(0.0)


def moons_record(seed, evidence, adam_norm=0.5, polished_norm=1e-7, collapse_from=None):
    """A polished Figure 5.3 record on the 19-point grid with a 3 x 3 plot grid."""
    record = grid_record(None, evidence, peaked(12), seed=seed)
    n = len(DELTAS)
    train_ll = [-0.1] * n
    if collapse_from is not None:
        train_ll[collapse_from:] = [-math.log(2)] * (n - collapse_from)
    record["arrays"].update({
        "train_ll": train_ll, "gradient_norm": [polished_norm] * n,
        "adam_gradient_norm": [adam_norm] * n, "polish_iterations": [40.0] * n,
        "x_plot": [float(v) for k in range(9) for v in (k % 3, k // 3)],
        "x_train": [0.0, 0.0, 1.0, 1.0], "y_train": [0.0, 1.0],
        **{f"delta={d:.3g}/glm_probability": [0.5] * 9 for d in DELTAS}})
    record["fitted"]["plot_shape"] = [9, 2]
    record["config"] = {"examples": {"A": {"prior_precision": 0.01},
                                     "B": {"prior_precision": 100.0}}}
    return record


def test_figure_5_3_curves_are_the_mean_over_seeds_with_a_band():
    records = [moons_record(seed, [v + seed - 1 for v in peaked(5)]) for seed in (2, 0, 1)]
    curve = seed_curve(records, "log_evidence")
    assert list(curve.per_seed) == [0, 1, 2] and curve.prior_precision == pytest.approx(DELTAS)
    mean, _, low, high = mean_and_ci([-1.0, 0.0, 1.0])
    assert curve.summaries[5].mean == pytest.approx(mean) and curve.summaries[5].n == 3
    lows, highs = curve.band()
    assert (lows[5], highs[5]) == pytest.approx((low, high)) and low < mean < high
    single = seed_curve(records[:1], "log_evidence")
    assert single.band() == ([s.mean for s in single.summaries],) * 2
    figure = classification_model_selection(records)
    evidence_axis = figure.axes[0]
    assert len(evidence_axis.lines) >= 3 + 1  # each seed's curve and the mean
    assert any(isinstance(c, PolyCollection) for c in evidence_axis.collections)  # the band
    assert "mean over seeds 0, 1, 2" in figure._suptitle.get_text()


def test_figure_5_3_log_likelihood_bands_stay_at_or_below_0():
    records = [moons_record(seed, peaked(5)) for seed in (0, 1, 2)]
    for record, value in zip(records, (0.0, 0.0, -0.3), strict=True):
        record["arrays"]["train_ll"] = [value] * len(DELTAS)
        record["arrays"]["test_ll"] = [value - 0.1] * len(DELTAS)
    _, _, _, high = mean_and_ci([0.0, 0.0, -0.3])
    assert high > 0.2  # the uncut band of these seeds reaches above 0
    _, highs = seed_curve(records, "train_ll").band(LOG_PROBABILITY)
    assert max(highs) == 0.0
    figure = classification_model_selection(records)
    for axis in figure.axes[1:3]:  # train and test log likelihood
        band = [path.vertices[:, 1] for c in axis.collections
                if isinstance(c, PolyCollection) for path in c.get_paths()]
        assert band and max(v.max() for v in band) <= 0.0


def test_figure_5_3_causes_quote_each_seeds_polished_fits():
    records = [moons_record(0, peaked(8), adam_norm=142.0, polished_norm=0.0135,
                            collapse_from=13),
               moons_record(1, peaked(8), adam_norm=3.86, collapse_from=14)]
    records[0]["arrays"]["gradient_norm"][5] = 0.02
    records[0]["arrays"]["polish_iterations"][5] = 10000.0
    lines = anchor_table(FIGURE_5_3, records).set_index("label")
    label = "delta maximising the marginal likelihood"
    assert lines.loc[label, "verdict"] == "differs"
    cause = lines.loc[label, "cause"]
    assert cause == (
        "The thesis does not state the two-moons noise: ours, 0.3 (the companion code's "
        "default), is our choice; how the optimum moves with it is not measured (no side run "
        "in the records), so this difference is not attributed to the thesis. polished MAPs — "
        "seed 0: optimum 0.599, |grad L| <= 0.02 (delta 0.129, 10000 L-BFGS it.; Adam's up to "
        "142), f = 0 for delta >= 7.74; seed 1: optimum 0.599, |grad L| <= 1e-07 (delta 0.01, "
        "40 L-BFGS it.; Adam's up to 3.86), f = 0 for delta >= 12.9. "
        f"{FIGURE_5_3_OPTIMUM_CAUSE}")
    for record in records:  # records without a polish: the measured analysis alone
        for name in ("adam_gradient_norm", "polish_iterations"):
            del record["arrays"][name]
    assert anchor_table(FIGURE_5_3, records).set_index("label").loc[
        label, "cause"] == optimum_cells_cause(records)


def side_run(seed, evidence, noise):
    record = moons_record(seed, evidence)
    record["config"].update({"row_suffix": f" (data noise {noise})",
                             "dataset": {"noise": noise}})
    return record


def test_data_noise_side_runs_have_their_own_study_anchors_and_leave_the_thesis_ones_alone():
    """Side runs at noise 0.1 peaking at 0.129 (the thesis's 0.13) and at 0.2 at 0.359 beside
    ours peaking at 0.599: the thesis's anchors read ours only; each side run has its optimum
    and range anchors, flagged as studies; the optimum's cause quotes both side runs."""
    ours = [moons_record(seed, peaked(8)) for seed in (0, 1)]
    sides = [side_run(seed, peaked(5), 0.1) for seed in (0, 1)] + [side_run(0, peaked(7), 0.2)]
    lines = anchor_table(FIGURE_5_3, ours + sides).set_index("label")
    label = "delta maximising the marginal likelihood"
    assert lines.loc[label, "ours"] == pytest.approx(DELTAS[8])  # 0.599: side runs apart
    assert not lines.loc[label, "study"]
    noise_01 = lines.loc[f"{label} [side run: data noise 0.1]"]
    assert noise_01["ours"] == pytest.approx(DELTAS[5]) and noise_01["verdict"] == "agrees"
    assert noise_01["study"]
    assert lines.loc[f"{label} [side run: data noise 0.2]", "ours"] == pytest.approx(DELTAS[7])
    assert noise_sensitivity(ours + sides).endswith(
        "Side runs on the same seeds and grid (rows 'bernoulli (data noise ...)'): noise 0.1: "
        "optimum 0.129, 2-nat range 0.0774-0.215 (seeds 0, 1); noise 0.2: optimum 0.359, "
        "2-nat range 0.215-0.599 (seeds 0), against 0.599 at 0.3: at noise 0.1 the optimum "
        "is within one grid step of the thesis's 0.13")
    # Without side-run records their anchors are missing, the thesis's unchanged.
    alone = anchor_table(FIGURE_5_3, ours).set_index("label")
    assert alone.loc[f"{label} [side run: data noise 0.1]", "verdict"] == "missing"
    assert alone.loc[label, "ours"] == pytest.approx(DELTAS[8])


def predictive_record(row, cells, protocol="paper", fitted=None, samples=1):
    step = 0.999 if protocol == "paper" else 0.1
    return with_health({"status": "ok", "seed": 0, "protocol": protocol, "variant": row,
            "cells": [{"row": row, "column": c, "value": v} for c, v in cells.items()],
            "arrays": {}, "fitted": fitted or {},
            "config": {"posterior": row, "method": {"variants": {
                row: {"step_size": step, "mc_samples": samples}}}}})


def ngvi_fit(iterations, reason, gradient, nll, window=None, step=None):
    """The fit diagnostics a natural-gradient record holds."""
    return {"iterations": iterations, "stop_reason": reason, "final_gradient_norm": gradient,
            "final_train_nll": nll, "window_gradient_norm": window, "window_step": step}


def regression_records(protocol="paper", ogg_nn_nll=3.0, fits=None):
    glm = {"glm/test_nll": 0.3, "glm/mean_sd": 0.2}
    fits = fits or {}
    return [predictive_record("VOGGN", {**glm, "nn/test_nll": 0.35, "nn/mean_sd": 0.25},
                              protocol, fitted=fits.get("VOGGN")),
            predictive_record("LGVA", {**glm, "nn/test_nll": 0.6, "nn/mean_sd": 0.5},
                              protocol, fitted=fits.get("LGVA")),
            predictive_record("OGGN", {**glm, "nn/test_nll": ogg_nn_nll, "nn/mean_sd": 5.0},
                              protocol, fitted=fits.get("OGGN")),
            predictive_record("L-GGN", {"glm/test_nll": 0.9, "glm/mean_sd": 0.2,
                                        "nn/test_nll": 9.0, "nn/mean_sd": 30.0}, protocol,
                              fitted={"gradient_norm": 1530.0})]


def test_regression_claims_are_judged_from_the_cells():
    lines = anchor_table(FIGURE_5_4, regression_records()).set_index("label")
    verdicts = lines["verdict"].to_dict()
    glm_label = protocol_label(
        "GLM works for all four: share within 0.2 nats of the best GLM test NLL", "paper")
    assert verdicts[glm_label] == "close"  # L-GGN's GLM NLL is 0.6 above the best: 3 of 4
    assert lines.loc[glm_label, "ours"] == pytest.approx(0.75)
    assert verdicts[protocol_label("L-GGN NN sampling fails: NN / GLM mean predictive sd",
                                   "paper")] == "agrees"
    assert verdicts[protocol_label(
        "LGVA NN sampling overestimates uncertainty: NN / GLM mean predictive sd",
        "paper")] == "agrees"
    assert verdicts[protocol_label("VOGGN NN sampling is reasonable: NN minus GLM test NLL "
                                   "(nats)", "paper")] == "agrees"
    # no corrected-protocol records: its anchors are missing, not judged on the paper's
    assert set(lines.loc[[protocol_label(a, "corrected") for a in (
        "GLM works for all four: share within 0.2 nats of the best GLM test NLL",)],
        "verdict"]) == {"missing"}


def test_each_protocol_is_judged_on_its_own_records_and_causes_quote_the_other():
    cycling = ngvi_fit(300, "max_iterations", 18.0, 110.0)
    paper = regression_records("paper", ogg_nn_nll=0.1,
                               fits={"OGGN": cycling, "VOGGN": cycling, "LGVA": cycling})
    stationary = ngvi_fit(70, "stationary", 4e-4, 24.0, window=9e-4, step=2e-5)
    wandering = {**ngvi_fit(1000, "max_iterations", 2e4, 400.0, window=2.7e3, step=0.013),
                 "window_gradient_standard_error": 2e3}
    corrected = regression_records("corrected", ogg_nn_nll=3.0,
                                   fits={"OGGN": stationary, "VOGGN": wandering,
                                         "LGVA": wandering})
    corrected[3]["fitted"] = {"gradient_norm": 2e-7, "adam_gradient_norm": 8.4}
    corrected[0]["arrays"]["y_train"] = [1.0, -1.0, 2.0, 2.0]  # mean 1, squares 6
    corrected[0]["config"]["method"].update(likelihood="gaussian", noise_variance=0.5)
    constant = 6 / (2 * 0.5) + 2 * math.log(2 * math.pi * 0.5)
    lines = anchor_table(FIGURE_5_4, paper + corrected).set_index("label")
    label = "OGGN NN sampling fails: NN minus GLM test NLL (nats)"
    assert lines.loc[protocol_label(label, "paper"), "ours"] == pytest.approx(-0.2)
    assert lines.loc[protocol_label(label, "paper"), "verdict"] == "differs"
    assert lines.loc[protocol_label(label, "corrected"), "ours"] == pytest.approx(2.7)
    assert lines.loc[protocol_label(label, "corrected"), "verdict"] == "agrees"
    cause = lines.loc[protocol_label(label, "paper"), "cause"]
    assert "Protocol corrected: 2.7 (agrees); its fits — " in cause
    assert ("OGGN: step 0.999, S = 1, 300 it. (max_iterations), gradient norm at the mean "
            "18, train NLL 110;") in cause
    assert ("OGGN: step 0.1, S = 1, 70 it. (stationary), gradient norm at the mean 0.0004 "
            "(window 0.0009, step 2e-05), train NLL 24") in cause
    assert ("VOGGN: step 0.1, S = 1, 1000 it. (max_iterations), gradient norm at the mean "
            "2e+04 (window 2.7e+03, Monte Carlo se 2e+03, step 0.013), train NLL 400") in cause
    assert "L-GGN: gradient norm 1.5e+03" in cause
    assert "L-GGN: gradient norm 2e-07 (Adam's 8.4, polished)" in cause
    assert lines.loc[protocol_label(label, "corrected"), "cause"] == ""  # agrees: no cause
    assert f"a constant prediction has train NLL {constant:.4g}" in cause


def test_constant_prediction_nll_of_a_bernoulli_record_is_the_label_entropy():
    record = {"arrays": {"y_train": [0.0, 1.0, 1.0, 1.0]},
              "config": {"method": {"likelihood": "bernoulli"}}}
    assert constant_prediction_nll(record) == pytest.approx(
        -4 * (0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert constant_prediction_nll({"arrays": {}, "config": {}}) is None


def boundary_record(seed: int, far_boundary_sd: float) -> dict:
    """Two training inputs at the origin; map inputs near them and 2 away, on the decision
    boundary (Bernoulli sd 0.5) or off it (0.1, with a huge model sd that must not count)."""
    x_plot = [0.1, 0.0, 0.0, 0.1, 2.0, 0.0, 0.0, 2.0, 3.0, 3.0]
    return {"variant": "L-GGN", "seed": seed, "protocol": "paper",
            "config": {"task": {"near_distance": 0.2, "far_distance": 1.0}},
            "arrays": {"x_train": [0.0, 0.0, 0.05, 0.0], "x_plot": x_plot,
                       "blr/model_sd": [0.1, 0.1, far_boundary_sd, far_boundary_sd, 1e6],
                       "blr/noise_sd": [0.5, 0.5, 0.5, 0.5, 0.1]}}


def test_model_sd_growth_is_read_on_the_decision_boundary_only():
    from bench.reporting.specs.ggn_thesis import boundary_log_growth, boundary_model_sd_growth

    assert boundary_log_growth(boundary_record(0, 1.0)) == pytest.approx(1.0)
    growth = boundary_model_sd_growth("L-GGN")([boundary_record(0, 1.0),
                                                boundary_record(1, 10.0)])
    assert growth.value == pytest.approx(1.5)
    assert growth.low < 1.5 < growth.high
    record = boundary_record(0, 1.0)
    record["arrays"]["blr/noise_sd"] = [0.5, 0.5, 0.1, 0.1, 0.1]
    with pytest.raises(LookupError, match="2 map input\\(s\\) near the data and 0 far"):
        boundary_log_growth(record)


def test_a_polish_that_ended_at_its_cap_makes_the_claims_on_its_grid_not_comparable():
    """Seed 0's polish at delta 0.129 used all 10,000 iterations (its rule: a gradient norm of
    1e-6 or no further decrease, never met): the record's grid health fails, read from its own
    arrays for a record written before the task recorded health, and the thesis's claims on
    that grid are not comparable; a side run's grid is judged on its own health."""
    ours = [moons_record(seed, peaked(8)) for seed in (0, 1)]
    for record in ours:
        record.pop("health")  # written before the task recorded it
        record["config"]["method"] = {"polish_iterations": 10000}
        record["cells"] = [{"row": "bernoulli", "column": "argmax_delta", "value": 0.599}]
    ours[0]["arrays"]["polish_iterations"][5] = 10000.0
    ours[0]["arrays"]["gradient_norm"][5] = 0.013
    side = side_run(0, peaked(5), 0.1)
    side.pop("health")
    side["config"]["method"] = {"polish_iterations": 10000}
    side["cells"] = [{"row": "bernoulli (data noise 0.1)", "column": "argmax_delta",
                      "value": 0.129}]
    viewed = [FIGURE_5_3.record_view(record) for record in [*ours, side]]
    assert viewed[0]["health"]["bernoulli"]["why"] == (
        "polish at delta 0.129 ended at its cap of 10000 iterations (|grad L| 0.013)")
    assert viewed[1]["health"]["bernoulli"]["healthy"] is True
    lines = anchor_table(FIGURE_5_3, viewed).set_index("label")
    label = "delta maximising the marginal likelihood"
    assert lines.loc[label, "verdict"] == "not comparable"
    assert lines.loc[label, "cause"].startswith("fit failed (bernoulli, seed 0: polish at delta "
                                                "0.129 ended at its cap")
    assert lines.loc[f"{label} [side run: data noise 0.1]", "verdict"] == "agrees"


GLM_WORKS = "GLM works for all four: share within 0.2 nats of the best GLM test NLL"


def with_elbo(fitted, elbo, standard_error):
    return {**fitted, "elbo": elbo, "elbo_standard_error": standard_error}


def test_causes_give_each_qs_elbo_gap_to_the_reference_vi_and_why_it_is_below():
    """VOGGN stopped by its cap far below the reference VI's best: not converged; OGGN stopped
    by its rule far below, with its gradient norm; LGVA within 3 combined standard errors;
    L-GGN's ELBO quoted with its fit."""
    records = regression_records("paper", fits={
        "VOGGN": with_elbo(ngvi_fit(300, "max_iterations", 18.0, 395.0), -1473.0, 11.0),
        "OGGN": with_elbo(ngvi_fit(70, "stationary", 4e-4, 24.0), -700.0, 3.0),
        "LGVA": with_elbo(ngvi_fit(300, "max_iterations", 9.0, 60.0), -515.0, 2.0)})
    records[3]["fitted"] = with_elbo(records[3]["fitted"], -5399.0, 63.0)
    records.append(predictive_record(
        "reference-VI", {"glm/test_nll": 0.3, "nn/test_nll": 0.3}, "paper",
        fitted=with_elbo({"reference_fits": [{}, {}, {}, {}], "best_guide": "low_rank",
                          "best_start": "map", "svi_steps": 3000}, -509.0, 2.2)))
    label = protocol_label(GLM_WORKS, "paper")  # close: the one claim with a cause here
    cause = anchor_table(FIGURE_5_4, records).set_index("label").loc[label, "cause"]
    assert ("reference-VI: best of 4 SVI fits (low_rank guide from the map, 3000 steps "
            "each), ELBO -509 +- 2.2") in cause
    assert "L-GGN: gradient norm 1.5e+03, ELBO -5399 +- 63" in cause
    assert "ELBO of the reference VI's best q (seed 0: -509 +- 2.2)" in cause
    assert ("VOGGN (seed 0) 964 nats below it (85.9 standard errors); its fit ended by "
            "max_iterations: not converged") in cause
    assert ("OGGN (seed 0) 191 nats below it (51.3 standard errors); its update stopped by "
            "its rule (stationary) this far below the reference's q: whether that is the "
            "update's fixed point is not measured; the gradient norm of its objective at the "
            "mean is 0.0004") in cause
    assert "L-GGN (seed 0) 4890 nats below it (77.6 standard errors)" in cause
    assert "LGVA (seed 0) is within 3 standard errors of it or above (-6 nats)" in cause


def test_records_without_a_reference_vi_give_no_elbo_gap():
    records = regression_records("paper", fits={
        "VOGGN": with_elbo(ngvi_fit(300, "max_iterations", 18.0, 395.0), -1473.0, 11.0)})
    label = protocol_label(GLM_WORKS, "paper")  # close: the one claim with a cause here
    cause = anchor_table(FIGURE_5_4, records).set_index("label").loc[label, "cause"]
    assert "train NLL 395, ELBO -1473 +- 11" in cause
    assert "reference VI" not in cause


def test_the_elbo_check_reads_the_gap_in_standard_errors_and_refuses_an_unconverged_fit():
    """VOGGN's q beside the reference VI's best on the same seed: (best - VOGGN) / combined
    SE, judged only when VOGGN's fit was stopped by its rule."""
    from bench.reporting.specs.ggn_thesis import elbo_gap_label

    def fit(reason):
        return {"elbo": -510.0, "elbo_standard_error": 2.0, "stop_reason": reason,
                "iterations": 600}

    reference = predictive_record("reference-VI", {"elbo": -500.0}, "corrected",
                                  fitted={"elbo": -500.0, "elbo_standard_error": 2.0})
    label = elbo_gap_label("VOGGN", "corrected")
    for reason, verdict in (("elbo_plateau", "close"), ("max_iterations", "not comparable")):
        voggn = predictive_record("VOGGN", {"elbo": -510.0}, "corrected", fitted=fit(reason))
        line = anchor_table(FIGURE_5_4, [reference, voggn]).set_index("label").loc[label]
        assert line["ours"] == pytest.approx(10.0 / math.hypot(2.0, 2.0))
        assert line["verdict"] == verdict
    assert line["cause"].startswith("fit not converged (VOGGN seed 0 ended by max_iterations "
                                    "after 600 iterations). ELBO of the reference VI's best q "
                                    "(seed 0: -500 +- 2): VOGGN (seed 0) 10 nats below it")
