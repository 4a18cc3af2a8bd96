"""Subnetwork Figures 1 and 2 run end to end at smoke scale, and their reports render."""

from __future__ import annotations

import math

import pytest

from bench.harness.job_execution import execute
from bench.jobs.replication_runner import replication_seeds
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from tests.helpers import compose_config

FIGURE_1_SETTINGS = [["dataset.specification=misspecified"],
                     ["dataset.specification=wellspecified"]]
FIGURE_2_SETTINGS = [[f"dataset.likelihood={likelihood}", f"dataset.specification={spec}"]
                     for likelihood in ("regression", "classification")
                     for spec in ("misspecified", "wellspecified")]
SUBSET_ROWS = {"Greedy-Laplace", "Gradient-Laplace", "Gradient-Laplace (test ref.)",
               "Subnet diagonal", "Last k"}


def smoke_records(experiment: str, settings: list[list[str]], results_dir) -> list[dict]:
    """One smoke-scale record per setting, each checked to be ok with finite cells."""
    records = []
    for overrides in settings:
        cfg = compose_config([f"experiment={experiment}", "scale=smoke", *overrides,
                              f"results_dir={results_dir}"])
        record = execute(cfg)
        assert record["status"] == "ok", record["traceback"]
        assert record["cells"] and all(math.isfinite(c["value"]) for c in record["cells"])
        records.append(record)
    return records


@pytest.fixture(scope="module")
def figure_1_records(tmp_path_factory) -> list[dict]:
    return smoke_records("subnet/figure-1", FIGURE_1_SETTINGS, tmp_path_factory.mktemp("f1"))


@pytest.fixture(scope="module")
def figure_2_records(tmp_path_factory) -> list[dict]:
    return smoke_records("subnet/figure-2", FIGURE_2_SETTINGS, tmp_path_factory.mktemp("f2"))


@pytest.mark.second_tier
def test_figure_1_has_every_method_domain_and_k(figure_1_records):
    for record in figure_1_records:
        spec = record["config"]["dataset"]["specification"]
        k_grid = record["config"]["k_grid"]
        cells = {(c["row"], c["column"]) for c in record["cells"]}
        for row in SUBSET_ROWS:
            for domain in ("in_distribution", "ood", "mixed"):
                assert {(row, f"{spec}/{domain}/w2@k={k}") for k in k_grid} <= cells
        assert ("NeuralLinear", f"{spec}/mixed/w2") in cells
        assert all(c["value"] >= 0 for c in record["cells"])
        assert record["arrays"]["k"] == [float(k) for k in k_grid]


@pytest.mark.second_tier
def test_figure_2_has_baselines_and_coverages_in_unit_interval(figure_2_records):
    for record in figure_2_records:
        data = record["config"]["dataset"]
        panel = f"{data['likelihood']}/{data['specification']}"
        rows = {c["row"] for c in record["cells"] if c["column"] == f"{panel}/cov95"}
        assert {"LLA", "Split", "Ensemble", "NeuralLinear", "PrecisionDiag",
                "Block Laplace"} <= rows
        assert all(0 <= c["value"] <= 1 for c in record["cells"])


@pytest.mark.second_tier
def test_reports_render_from_smoke_records(figure_1_records, figure_2_records, tmp_path):
    for key, records in (("subnet/figure-1", figure_1_records),
                         ("subnet/figure-2", figure_2_records)):
        written = render_report(SPECS[key], records, tmp_path)
        assert {path.suffix for path in written} == {".csv", ".png", ".md", ".tex"}
        text = (tmp_path / f"{key}.md").read_text()
        assert "## Anchors" in text and "no paper value" in text


def test_replication_seeds_are_distinct_and_reproducible():
    seeds = replication_seeds(42, 5)
    assert len(set(seeds)) == 5
    assert seeds == replication_seeds(42, 5)
    assert not set(seeds) & set(replication_seeds(0, 5))
