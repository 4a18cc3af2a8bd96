"""``bench.reproduce``: a sweep among the extra overrides, and where the reports of a run at
another scale than the committed reports go."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.cli import reproduce_command as reproduce
from bench.reporting.render import existing_report_scale
from tests.helpers import REPO

COMMITTED = REPO / "reports" / "ssla" / "table-7.md"


@pytest.mark.parametrize("scale", ["smoke", "cpu"])
@pytest.mark.second_tier
def test_a_seed_sweep_among_the_overrides_replaces_the_experiments_seeds(scale, capsys):
    assert reproduce.main(["ssla/table-1", "--scale", scale, "seed=0,1", "--dry-run",
                           "--workers", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" seed=0,1")
    assert lines[0].count("seed=") == 1 and "task.dtype=float32,float64" in lines[0]


def test_a_sweep_of_a_swept_key_replaces_the_experiments_values(capsys):
    assert reproduce.main(["ssla/table-1", "--scale", "smoke", "task.n=100000,200000",
                           "--dry-run", "--workers", "1"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.count("task.n=") == 1 and line.endswith(" task.n=100000,200000")


def _committed_cpu_report(root: Path) -> Path:
    """``root``/reports holding the committed cpu-scale report of SSLA Table 7."""
    report = root / "reports" / "ssla" / "table-7.md"
    report.parent.mkdir(parents=True)
    report.write_bytes(COMMITTED.read_bytes())
    assert existing_report_scale(report) == "cpu"
    return report


def test_report_folder_keeps_the_committed_reports_of_another_scale(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _committed_cpu_report(tmp_path)
    artifacts = ["ssla/table-7"]
    reports = Path("reports")
    assert reproduce.report_folder(artifacts, "cpu")[0] == reports
    folder, note = reproduce.report_folder(artifacts, "paper")
    assert folder == reports / "paper" and "cpu-scale" in note and "--replace-scale" in note
    assert reproduce.report_folder(artifacts, "paper", replace_scale=True) == (reports, None)
    folder, note = reproduce.report_folder(["ssla/table-1"], "smoke")
    assert folder == reports / "smoke" and "--out" in note
    assert reproduce.report_folder(artifacts, "smoke", out=tmp_path / "x") == (tmp_path / "x",
                                                                               None)


@pytest.mark.second_tier
def test_smoke_reproduce_renders_beside_a_committed_cpu_report(tmp_path, monkeypatch, capsys):
    """``make reproduce-ssla-table-7 SCALE=smoke`` in a checkout whose report is at cpu scale:
    exit 0, a smoke report to read, the committed report and overview pages untouched."""
    monkeypatch.chdir(tmp_path)
    committed = _committed_cpu_report(tmp_path)
    before = committed.read_bytes()
    status = reproduce.main(["ssla/table-7", "--scale", "smoke", "--workers", "1",
                             f"results_dir={tmp_path / 'records'}"])
    assert status == 0, capsys.readouterr().err
    assert committed.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["smoke", "ssla"]
    smoke = tmp_path / "reports" / "smoke" / "ssla" / "table-7.md"
    assert existing_report_scale(smoke) == "smoke"
    assert "reports/smoke" in capsys.readouterr().err


def test_a_sweep_the_overrides_cannot_expand_is_one_line(tmp_path, capsys):
    assert reproduce.main(["ssla/table-1", "--scale", "smoke", "task.n=glob(*)", "--dry-run",
                           f"results_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "task.n=glob(*)" in err[0]
    assert "key=a,b" in err[0]
