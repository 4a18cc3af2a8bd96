"""GGN thesis Figures 5.2-5.5 end to end at smoke scale: every experiment's jobs give complete
records, the reports render with their anchors, and bad settings stop with one line (exit 2)
before anything is written."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import pytest

from bench.harness.errors import ConfigError
from bench.harness.job_execution import execute
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from bench.training.stopping import STOP_REASONS
from tests.helpers import REPO, compose_config

POSTERIORS = ("VOGGN", "LGVA", "OGGN", "L-GGN")
PROTOCOLS = ("paper", "corrected")


def smoke_record(experiment: str, results_dir, *overrides: str) -> dict:
    """One ok smoke-scale record with finite cells."""
    cfg = compose_config([f"experiment={experiment}", "scale=smoke", "seed=0", *overrides,
                          f"results_dir={results_dir}"])
    record = execute(cfg)
    assert record["status"] == "ok", record["traceback"]
    assert record["cells"] and all(math.isfinite(c["value"]) for c in record["cells"])
    return record


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return tmp_path_factory.mktemp("ggn-thesis")


@pytest.mark.second_tier
def test_model_selection_rows_and_report(results, tmp_path):
    rows = [smoke_record("ggn_thesis/figure-5.2", results, f"grid.noise_variance_index={i}")
            for i in (0, 1)]
    for record in rows:
        deltas = record["arrays"]["prior_precision"]
        assert len(deltas) == 3 and record["fitted"]["n_networks"] == 3
        assert len(record["arrays"][f"delta={deltas[0]:.3g}/glm_sd"]) == len(
            record["arrays"]["x_plot"])
        columns = {c["column"] for c in record["cells"]}
        assert {"argmax_delta", "max_log_evidence", f"delta={deltas[1]:.3g}/test_ll"} <= columns
        assert "adam_gradient_norm" not in record["arrays"]  # Figure 5.2 is not polished
    assert sorted(r["fitted"]["noise_variance"] for r in rows) == pytest.approx([0.01, 0.1])
    written = render_report(SPECS["ggn_thesis/figure-5.2"], rows, tmp_path)
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "## Anchors" in text and "sigma^2 maximising the marginal likelihood" in text
    assert any(p.suffix == ".png" for p in written)


@pytest.mark.second_tier
def test_two_moons_grid_repeats_bit_for_bit_and_reports(results, tmp_path):
    record = smoke_record("ggn_thesis/figure-5.3", results)
    again = smoke_record("ggn_thesis/figure-5.3", tmp_path / "again")
    assert record["cells"] == again["cells"]
    probability = record["arrays"][f"delta={record['arrays']['prior_precision'][0]:.3g}"
                                   "/glm_probability"]
    assert len(probability) == 12 * 12 and all(0 <= p <= 1 for p in probability)
    # every grid point's Adam end point is polished by L-BFGS, both norms recorded per point
    arrays, deltas = record["arrays"], record["arrays"]["prior_precision"]
    assert record["config"]["method"]["polish_iterations"] == 200
    assert len(arrays["adam_gradient_norm"]) == len(arrays["polish_iterations"]) == 3
    for b, delta in enumerate(deltas):
        assert 0 < arrays["polish_iterations"][b] <= 200
        assert arrays["gradient_norm"][b] < arrays["adam_gradient_norm"][b]
        columns = {c["column"]: c["value"] for c in record["cells"]}
        assert columns[f"delta={delta:.3g}/adam_gradient_norm"] == arrays["adam_gradient_norm"][b]
        assert columns[f"delta={delta:.3g}/gradient_norm"] == arrays["gradient_norm"][b]
    # A polish that stopped before its cap reached its tolerance; one at the cap has still
    # lowered the gradient (delta = 0.01 of this smoke job in the pinned arithmetic: 200
    # iterations, Adam's 5.04 -> 1.91; the native AVX2 kernels ended below 1).
    cap, tolerance = (record["config"]["method"][key]
                      for key in ("polish_iterations", "polish_tolerance"))
    assert all(norm <= tolerance for norm, iterations in
               zip(arrays["gradient_norm"], arrays["polish_iterations"], strict=True)
               if iterations < cap)
    assert min(arrays["gradient_norm"]) <= tolerance < 1.0 < max(arrays["adam_gradient_norm"])
    assert record["metrics"]["max_adam_gradient_norm"] == max(arrays["adam_gradient_norm"])
    assert record["timings"]["polish_s"] > 0
    written = render_report(SPECS["ggn_thesis/figure-5.3"], [record], tmp_path / "out")
    assert "delta maximising the marginal likelihood" in next(
        p for p in written if p.suffix == ".md").read_text()


@pytest.mark.second_tier
@pytest.mark.parametrize(("experiment", "columns"), [
    ("ggn_thesis/figure-5.4", {"nn/test_nll", "glm/test_nll", "nn/mean_sd", "glm/mean_sd"}),
    ("ggn_thesis/figure-5.5", {"nn/accuracy", "glm/decisiveness", "model_sd_far_over_near"}),
])
def test_four_posteriors_under_both_protocols(experiment, columns, results, tmp_path):
    records = {protocol: [smoke_record(experiment, results, f"posterior={row}",
                                       f"protocol={protocol}") for row in POSTERIORS]
               for protocol in PROTOCOLS}
    for protocol, rows in records.items():
        for row, record in zip(POSTERIORS, rows, strict=True):
            assert record["protocol"] == protocol
            assert {c["row"] for c in record["cells"]} == {row}
            # a statistic that overflows is a failed cell with its reason, never a number
            failed = {c["column"]: c["reason"] for c in record["failed_cells"]}
            assert columns <= {c["column"] for c in record["cells"]} | set(failed)
            assert set(failed) <= {"model_sd_far_over_near"} and all(failed.values())
            assert record["fitted"]["n_params"] == record["metrics"]["n_params"]
        assert "trace/train_nll" in rows[0]["arrays"] and "trace/train_nll" not in rows[3][
            "arrays"]
    paper, corrected = records["paper"], records["corrected"]
    # paper: the thesis's settings, nothing of the corrected protocol
    assert paper[2]["config"]["method"]["variants"]["OGGN"]["step_size"] == 0.999
    assert paper[2]["fitted"]["iterations"] == 5
    assert paper[2]["fitted"]["stop_reason"] == "max_iterations"
    assert paper[2]["fitted"]["window_gradient_norm"] is None  # no stopping rule
    assert "adam_gradient_norm" not in paper[3]["fitted"]
    # corrected: damped step and the stationarity rule (OGGN: every iterate of a 20-window);
    # every fit records why it stopped and its final gradient norm; the L-GGN MAP is polished
    oggn = corrected[2]
    assert oggn["config"]["method"]["variants"]["OGGN"]["step_size"] == 0.1
    fitted, arrays = oggn["fitted"], oggn["arrays"]
    assert fitted["stop_reason"] in STOP_REASONS
    assert fitted["converged"] == (fitted["stop_reason"] == "stationary")
    assert len(arrays["trace/gradient_norm"]) == fitted["iterations"]
    assert fitted["final_gradient_norm"] == arrays["trace/gradient_norm"][-1]
    assert fitted["window_gradient_norm"] == max(arrays["trace/gradient_norm"][-20:])
    voggn = corrected[0]["fitted"]
    assert voggn["window_gradient_standard_error"] > 0 and voggn["window_step"] >= 0
    laplace = corrected[3]["fitted"]
    assert laplace["gradient_norm"] < laplace["adam_gradient_norm"]
    written = render_report(SPECS[experiment], paper + corrected, tmp_path)
    text = next(p for p in written if p.suffix == ".md").read_text()
    anchors = text.split("## Anchors")[1].split("\n## ")[0]
    assert "missing" not in anchors
    assert "[protocol paper]" in anchors and "[protocol corrected]" in anchors
    assert "Compact table (protocol corrected)" in text


@pytest.mark.parametrize(("override", "message"), [
    ("grid.prior_precision.low=-1e-4", "grid.prior_precision.low=-0.0001"),
    ("grid.noise_variance.high=0", "grid.noise_variance.high=0"),
    ("method.lr_schedule=linear", "method.lr_schedule='linear'"),
])
def test_bad_model_selection_settings_write_nothing(override, message, tmp_path):
    _assert_refused_writing_nothing(["experiment=ggn_thesis/figure-5.2"], override, message,
                                    tmp_path)


@pytest.mark.parametrize(("override", "message"), [
    ("posterior=SWAG",
     "posterior='SWAG' is not valid; choose one of: VOGGN, LGVA, OGGN, VOGGN-S10, L-GGN"),
    ("method.variants.VOGGN.algorithm=adam", "method.algorithm='adam'"),
    ("method.variants.LGVA.step_size=1.5", "method.step_size=1.5"),
    ("method.variants.OGGN.step_size=0", "method.step_size=0"),
    ("method.variants.VOGGN-S10.mc_samples=0", "method.mc_samples=0"),
    ("method.variants.LGVA.initial_variance=-0.1", "method.initial_variance=-0.1"),
    ("method.prior_precision=0", "method.prior_precision=0"),
])
@pytest.mark.second_tier
def test_bad_posterior_settings_write_nothing(override, message, tmp_path):
    _assert_refused_writing_nothing(["experiment=ggn_thesis/figure-5.4"], override, message,
                                    tmp_path)


@pytest.mark.parametrize(("override", "message"), [
    ("method.variants.OGGN.stop_window=-3", "method.stop_window=-3"),
    ("method.variants.VOGGN.stop_gradient_tolerance=0", "method.stop_gradient_tolerance=0"),
    ("method.variants.OGGN.stop_step_tolerance=-1", "method.stop_step_tolerance=-1"),
    ("method.variants.LGVA.stop_window=500", "method.stop_window=500"),
    ("method.variants.L-GGN.polish_iterations=-1", "method.polish_iterations=-1"),
])
@pytest.mark.second_tier
def test_bad_corrected_protocol_settings_write_nothing(override, message, tmp_path):
    _assert_refused_writing_nothing(["experiment=ggn_thesis/figure-5.4", "protocol=corrected"],
                                    override, message, tmp_path)


def _assert_refused_writing_nothing(base: list[str], override: str, message: str,
                                    tmp_path) -> None:
    """The smoke job of ``base`` + ``override`` raises a ConfigError containing ``message``
    (taken literally) and writes no record."""
    cfg = compose_config([*base, "scale=smoke", override, f"results_dir={tmp_path}"])
    with pytest.raises(ConfigError, match=re.escape(message)):
        execute(cfg, [override])
    assert not any(tmp_path.rglob("record.json"))


@pytest.mark.second_tier
def test_cli_exits_2_with_one_line_naming_the_key(tmp_path):
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "bench.run", "experiment=ggn_thesis/figure-5.4",
                           "scale=smoke", "method.variants.VOGGN.step_size=2"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "method.step_size=2" in lines[0]
    assert not any(tmp_path.rglob("record.json"))
