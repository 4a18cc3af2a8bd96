"""Without root or without a Slurm, the cluster tier is skipped with one reason saying how to
run it. No Slurm needed."""

from __future__ import annotations

from tests.cluster import conftest


def test_without_root_the_reason_says_root_and_how_to_start_slurm(monkeypatch):
    monkeypatch.setattr(conftest.os, "geteuid", lambda: 1000)
    reason = conftest.slurm_unavailable()
    assert "needs root" in reason and "make test-cluster" in reason and "\n" not in reason


def test_without_a_slurm_config_the_reason_names_it(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest.os, "geteuid", lambda: 0)
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    reason = conftest.slurm_unavailable()
    assert "no Slurm configured" in reason and str(tmp_path / "slurm.conf") in reason
    assert "tools/local_slurm.sh" in reason
