"""The GPU tier: every implemented artifact's smoke jobs on ``device=cuda`` give the records of
the same jobs on the CPU, within float tolerance (tests/gpu/record_comparison.py).

One test per experiment config (artifacts drawn from another's records share its run; side-run
configs are runs of their own). Each runs ``python -m bench.reproduce <config> --scale smoke
--no-report --workers 1`` on both devices at once into its own temporary folders, on the
session's data root, then pairs the records and compares them cell by cell.
"""

from __future__ import annotations

import warnings

import pytest

from tests.gpu.device_runs import REFERENCE_DEVICE, TIMED_OUT, run_pair, tier_device, tier_runs
from tests.gpu.record_comparison import compare_records

UNCHECKED_SHOWN = 5


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("run", tier_runs(), ids=str)
def test_device_records_match_the_cpu_records(run, tier_data, tmp_path):
    device = tier_device()
    outcomes = run_pair(run, tier_data, tmp_path, device)
    for outcome in outcomes:
        # 0: every job ok; 1: some job failed (its record says why, compared below).
        if outcome.returncode not in (0, 1):
            stopped = " (stopped at the timeout)" if outcome.returncode == TIMED_OUT else ""
            pytest.fail(f"{run} on {outcome.device}: bench.reproduce exited with "
                        f"{outcome.returncode}{stopped} after {outcome.seconds:.0f}s; "
                        f"log {outcome.log}:\n{outcome.log_tail()}", pytrace=False)
    reference, candidate = outcomes
    comparison = compare_records(run.experiment, reference.records(run.experiment),
                                 candidate.records(run.experiment), (REFERENCE_DEVICE, device))
    if comparison.unchecked:
        shown = "\n".join(comparison.unchecked[:UNCHECKED_SHOWN])
        warnings.warn(f"{run}: {len(comparison.unchecked)} cell(s) differ where the values are "
                      f"not compared (random streams, timings), e.g.\n{shown}", stacklevel=1)
    if comparison.problems:
        pytest.fail(comparison.report(), pytrace=False)
