"""Which smoke golden job of each experiment the fast tier runs: its cheapest one, by measured
seconds.

``make test`` runs one golden job per experiment (every experiment keeps a smoke golden in the
fast tier); the other jobs of its sweep run under ``make test-integration`` (marked
``second_tier``). The choice reads ``tests/golden/smoke_costs.json``: the seconds each golden
job took in one test run, written by

``python -m tests.golden.costs DURATIONS``

from the output of ``pytest tests/integration/test_golden_cells.py --durations=0 -m "not slow"``
(setup, call and teardown summed). Only the ranking within an experiment matters, so a run on
a loaded machine serves. A job with no measured cost (a new experiment, a new sweep point)
runs in the fast tier until the file is written again.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

from tests.golden.capture import GOLDEN_DIR

COSTS_PATH = GOLDEN_DIR / "smoke_costs.json"
SMOKE_TEST = "test_golden_cells.py::test_smoke_job_reproduces_its_golden_cells"
DURATION_LINE = re.compile(r"^([0-9.]+)s\s+(?:setup|call|teardown)\s+(\S.*)$")


def golden_job_id(experiment: str, key: str) -> str:
    """The pytest id of a smoke golden job (its parameters joined as pytest joins them)."""
    return f"{experiment}-{key}-"


def parse_durations(text: str) -> dict[str, float]:
    """Seconds per smoke golden job id in a ``--durations=0`` listing, phases summed."""
    seconds: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        match = DURATION_LINE.match(line.strip())
        if match and SMOKE_TEST in match.group(2) and "[" in match.group(2):
            job_id = match.group(2).split("[", 1)[1].removesuffix("]")
            seconds[job_id] += float(match.group(1))
    return dict(seconds)


def load_costs(path: Path = COSTS_PATH) -> dict[str, float]:
    """The stored seconds per job id (empty when the file is absent)."""
    return json.loads(path.read_text())["seconds"] if path.exists() else {}


def fast_tier_ids(jobs: list[tuple[str, str]], costs: dict[str, float]) -> set[str]:
    """The ids of ``jobs`` (experiment, key) that the fast tier runs: each experiment's
    cheapest measured job, and every job without a measured cost."""
    cheapest: dict[str, tuple[float, str]] = {}
    chosen = set()
    for experiment, key in jobs:
        job_id = golden_job_id(experiment, key)
        if job_id not in costs:
            chosen.add(job_id)
        elif experiment not in cheapest or costs[job_id] < cheapest[experiment][0]:
            cheapest[experiment] = (costs[job_id], job_id)
    return chosen | {job_id for _, job_id in cheapest.values()}


def main(argv: list[str] | None = None) -> int:
    """Write ``smoke_costs.json`` from a durations listing."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("durations", type=Path, help="pytest --durations=0 output")
    args = parser.parse_args(argv)
    seconds = parse_durations(args.durations.read_text())
    if not seconds:
        parser.error(f"{args.durations} lists no smoke golden job (run pytest with "
                     "--durations=0 on tests/integration/test_golden_cells.py)")
    COSTS_PATH.write_text(json.dumps(
        {"measured": "seconds per smoke golden job in one test run (setup + call + "
                     "teardown), python -m tests.golden.costs",
         "seconds": {key: round(value, 2) for key, value in sorted(seconds.items())}},
        indent=1) + "\n")
    print(f"wrote {COSTS_PATH} ({len(seconds)} jobs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
