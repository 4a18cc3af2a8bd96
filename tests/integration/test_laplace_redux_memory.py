"""Laplace Redux Table 5 at smoke scale through ``bench.reproduce``: MAP and LA / LA* of the
Redux LeNet measured exactly, and the report renders with its anchors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.harness.records import iter_records
from bench.reporting.render import render_report
from bench.reporting.specs import SPECS
from tests.helpers import REPO

# The Redux LeNet: 44,426 float32 parameters, no buffers; last layer 84 -> 10 (850 values).
M, H, K = 44_426, 84, 10
LAST = H * K + K
# laplace-torch's K-FAC: weight factors K^2 and H^2, bias factor K^2, their eigenvectors (the
# same sizes), H + 2K eigenvalues and two deltas.
KRON = 2 * (K * K + H * H + K * K) + (H + 2 * K) + 2
SCALARS = 4  # prior precision, prior mean, noise, loss


@pytest.mark.second_tier
def test_smoke_reproduce_measures_map_and_laplace_exactly(tmp_path):
    env = {**os.environ, "BENCH_RESULTS_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "bench.reproduce", "laplace_redux/table-5",
                           "--scale", "smoke", "--no-report"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    records = list(iter_records(tmp_path, "laplace_redux/table-5"))
    assert sorted(r["method"] for r in records) == ["MAP", "la_classifier"]
    assert all(r["status"] == "ok" for r in records)
    cells = {(c["row"], c["column"]): c["value"] for r in records for c in r["cells"]}
    network = 4 * M
    assert cells[("MAP", "bytes")] == network
    # LA / LA*: what they need to predict, their own copy of the network, the last-layer mean,
    # the curvature, the scalars; as laplace-torch holds them, the parameters of the harness's
    # copy of the network it was handed (la.params) besides.
    for row, state in (("LA", KRON), ("LA*", 2 * LAST ** 2)):
        assert cells[(row, "bytes")] == network + 4 * (LAST + state + SCALARS)
        assert cells[(f"{row} (as held, incl. the harness's copy)", "bytes")] \
            == 2 * network + 4 * (LAST + state + SCALARS)
    assert cells[("LA", "mem_lenet_mnist")] == cells[("LA", "bytes")] / 1e6
    assert cells[("LA", "analytic_mb")] == 4 * (M + H * H + K * K) / 1e6
    assert ("LA*", "analytic_mb") not in cells
    assert cells[("MAP", "buffers_mb")] == 0.0
    parts = next(r for r in records if r["method"] == "la_classifier")["fitted"]["parts_bytes"]
    assert parts["LA"]["la.model"] == network and "la.params" not in parts["LA"]
    assert parts["LA (as held, incl. the harness's copy)"]["la.params"] == network
    assert not list(tmp_path.glob("**/.memory-scratch-*"))

    written = render_report(SPECS["laplace_redux/table-5"], records, tmp_path / "out")
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "## Anchors" in text and "rounded up" in text
    held = [line for line in text.splitlines()
            if line.startswith("| LA (as held, incl. the harness's copy) ")]
    assert any("| unread_mb " in line for line in held)
