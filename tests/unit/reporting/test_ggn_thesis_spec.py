"""GGN thesis report anchors read the optima and claims from records (synthetic records)."""

from __future__ import annotations

import pytest

from bench.reporting.compare import anchor_table
from bench.reporting.figures.ggn_toys import best_point, grid_points
from bench.reporting.protocol_claims import protocol_label
from bench.reporting.specs.ggn_thesis import (
    FIGURE_5_2,
    FIGURE_5_3,
    FIGURE_5_4,
    grid_steps_between_optima,
    near_optimal_end,
)

DELTAS = [10 ** (-2 + 4 * k / 18) for k in range(19)]


def grid_record(noise, evidence, test_ll, train_ll=None, seed=0):
    n = len(DELTAS)
    return {"status": "ok", "seed": seed, "fitted": {"noise_variance": noise},
            "arrays": {"prior_precision": DELTAS, "log_evidence": evidence,
                       "test_ll": test_ll, "train_ll": train_ll or [-0.01] * n,
                       "blr_mean_shift": [1e-3] * n,
                       "linearised_log_evidence": [v + 0.1 for v in evidence]},
            "cells": [], "config": {}}


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


def predictive_record(row, cells, protocol="paper", fitted=None, trace=None):
    step = 0.999 if protocol == "paper" else 0.1
    arrays = {} if trace is None else {"trace/train_nll": trace,
                                       "trace/log_det_precision": [-900.0] * len(trace)}
    return {"status": "ok", "seed": 0, "protocol": protocol, "variant": row,
            "cells": [{"row": row, "column": c, "value": v} for c, v in cells.items()],
            "arrays": arrays, "fitted": fitted or {},
            "config": {"posterior": row, "method": {"variants": {row: {"step_size": step}}}}}


def regression_records(protocol="paper", ogg_nn_nll=3.0, traces=None):
    glm = {"glm/test_nll": 0.3, "glm/mean_sd": 0.2}
    traces = traces or {}
    return [predictive_record("VOGGN", {**glm, "nn/test_nll": 0.35, "nn/mean_sd": 0.25},
                              protocol, trace=traces.get("VOGGN")),
            predictive_record("LGVA", {**glm, "nn/test_nll": 0.6, "nn/mean_sd": 0.5},
                              protocol, trace=traces.get("LGVA")),
            predictive_record("OGGN", {**glm, "nn/test_nll": ogg_nn_nll, "nn/mean_sd": 5.0},
                              protocol, trace=traces.get("OGGN")),
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
    settled = [30.0] * 50 + [24.0] * 20
    noisy = [float(100 + 10 * (k % 2)) for k in range(300)]
    paper = regression_records("paper", ogg_nn_nll=0.1,
                               traces={"OGGN": noisy, "VOGGN": noisy, "LGVA": noisy})
    corrected = regression_records("corrected", ogg_nn_nll=3.0,
                                   traces={"OGGN": settled, "VOGGN": noisy, "LGVA": noisy})
    corrected[3]["fitted"] = {"gradient_norm": 2e-7, "adam_gradient_norm": 8.4}
    lines = anchor_table(FIGURE_5_4, paper + corrected).set_index("label")
    label = "OGGN NN sampling fails: NN minus GLM test NLL (nats)"
    assert lines.loc[protocol_label(label, "paper"), "ours"] == pytest.approx(-0.2)
    assert lines.loc[protocol_label(label, "paper"), "verdict"] == "differs"
    assert lines.loc[protocol_label(label, "corrected"), "ours"] == pytest.approx(2.7)
    assert lines.loc[protocol_label(label, "corrected"), "verdict"] == "agrees"
    cause = lines.loc[protocol_label(label, "paper"), "cause"]
    assert "Protocol corrected: 2.7 (agrees); its fits — " in cause
    assert ("OGGN: step 0.999, 300 it., train NLL 110, not settled (NLL band 0.095), log det "
            "band 0;") in cause
    assert "OGGN: step 0.1, 70 it., train NLL 24, settled" in cause
    assert "L-GGN: gradient norm 1.5e+03" in cause
    assert "L-GGN: gradient norm 2e-07 (Adam's 8.4, polished)" in cause
    assert lines.loc[protocol_label(label, "corrected"), "cause"] == ""  # agrees: no cause
    early = regression_records("corrected", traces={"OGGN": settled[-30:]})
    cause = anchor_table(FIGURE_5_4, paper + early).set_index("label").loc[
        protocol_label(label, "paper"), "cause"]
    assert "OGGN: step 0.1, 30 it., train NLL 24, stopped before forgetting Sigma_0" in cause
