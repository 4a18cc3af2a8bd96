"""``bench.reproduce --skip-missing-data`` (what ``make reproduce-all`` passes): an artifact
whose data files are not under the data root is one line and status 0, so one such artifact
no longer ends the whole run (it stopped ``reproduce-all`` at generalized_laplace/figure-4 with
status 2)."""

from __future__ import annotations

from bench.cli.reproduce_command import main, missing_experiment_data


def test_an_artifact_without_its_data_is_skipped_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "empty"))
    status = main(["generalized_laplace/figure-5b", "--scale", "cpu", "--skip-missing-data",
                   "--no-report", f"results_dir={tmp_path / 'results'}"])
    assert status == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("skipped")]
    assert len(lines) == 1
    assert lines[0].startswith("skipped generalized_laplace/figure-5b: needs data: ")
    assert "cifar10" in lines[0]
    assert not (tmp_path / "results" / "generalized_laplace").exists()


def test_the_missing_data_of_an_experiment_cover_every_report_drawn_from_it(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "empty"))
    assert missing_experiment_data("ssla/table-7") == []
    assert missing_experiment_data("generalized_laplace/figure-4")
