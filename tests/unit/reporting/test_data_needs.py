"""Artifacts without their data get a "needs data" report naming the files expected."""

from __future__ import annotations

import numpy as np

from bench.cli.report_command import report_one
from bench.reporting.data_needs import NEEDS_DATA, missing_data, needs_data_table
from bench.reporting.spec import ArtifactSpec, DataNeed
from bench.reporting.specs import SPECS
from tests.unit.datasets.image_fixtures import write_cifar, write_svhn

CIFAR_SPEC = ArtifactSpec(paper="generalized_laplace", artifact="figure-4",
                          title="needs CIFAR", target_artifacts=("text",),
                          needs_data=(DataNeed("cifar10", ("train", "test")),
                                      DataNeed("svhn", ("test",))))


def test_missing_files_are_named_relative_to_the_data_root(tmp_path):
    lines = missing_data(CIFAR_SPEC, tmp_path)
    assert len(lines) == 2
    assert "data_batch_1" in lines[0] and "$BENCH_DATA_DIR/cifar10/" in lines[0]
    assert "test_32x32.mat" in lines[1] and str(tmp_path) not in "".join(lines)


def test_nothing_is_missing_once_the_files_are_there(tmp_path):
    rng = np.random.default_rng(0)
    write_cifar(tmp_path / "cifar10" / "cifar-10-batches-py", rng)
    write_svhn(tmp_path / "svhn", rng)
    assert missing_data(CIFAR_SPEC, tmp_path) == []


def test_paper_cells_are_listed_as_needing_data():
    table = needs_data_table(CIFAR_SPEC)
    assert len(table) == 1
    assert table.loc[0, "paper"] == "1.0985e9" and table.loc[0, "verdict"] == NEEDS_DATA


def test_report_without_records_says_needs_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "data"))
    spec = SPECS["generalized_laplace/figure-5b"]
    report_one(spec, tmp_path / "results", tmp_path / "reports", scale=None)
    text = (tmp_path / "reports" / "generalized_laplace" / "figure-5b.md").read_text()
    assert f"Status: **{NEEDS_DATA}**" in text and "test_32x32.mat" in text
    assert "(needs data)" in capsys.readouterr().out
