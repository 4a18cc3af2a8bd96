"""A smoke job's start-up overhead against a bare ``import torch``, side by side.

``python -m bench.benchmarks.start_up [--repeats 7] [--quick] [--out FILE]`` runs, alternated
``--repeats`` times in fresh processes on this machine:

* ``python -c "import torch"`` (the floor every job pays), wall seconds;
* ``python -m bench.run experiment=ssla/table-7 scale=smoke`` into a fresh results folder,
  wall seconds, minus the task time its record holds (``timings.total_s``): the overhead.

The report gives the medians, the overhead / import ratio (target at most 1.5x) and the
records' own ``timings.startup_s`` (process start to task start). Timings on a loaded
machine are noise: the header shows the load average at the start.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.benchmarks.command_line import chosen_sizes, sized_parser
from bench.benchmarks.network_ssla import machine, publish

FULL = {"repeats": 7}
QUICK = {"repeats": 1}
SIZES = {"repeats": "alternated runs of each command (median)"}
TARGET = 1.5
JOB = ["experiment=ssla/table-7", "scale=smoke"]


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   cwd=Path(__file__).resolve().parents[2])
    return time.perf_counter() - start


def measure(repeats: int) -> dict[str, list[float]]:
    """Per repeat: the import's wall time, the job's wall time, its task and start-up times."""
    runs: dict[str, list[float]] = {"import_s": [], "job_s": [], "task_s": [], "startup_s": []}
    for _ in range(repeats):
        runs["import_s"].append(_wall([sys.executable, "-c", "import torch"]))
        with tempfile.TemporaryDirectory() as results:
            runs["job_s"].append(_wall([sys.executable, "-m", "bench.run", *JOB,
                                        f"results_dir={results}"]))
            (record_file,) = Path(results).glob("ssla/table-7/smoke/*/record.json")
            timings = json.loads(record_file.read_text())["timings"]
        runs["task_s"].append(timings["total_s"])
        runs["startup_s"].append(timings.get("startup_s", float("nan")))
    return runs


def render(argv: list[str], info: dict, runs: dict[str, list[float]]) -> str:
    """The Markdown report of :func:`measure`'s runs."""
    overheads = [job - task for job, task in zip(runs["job_s"], runs["task_s"], strict=True)]
    median = {key: statistics.median(values) for key, values in runs.items()}
    overhead = statistics.median(overheads)
    ratio = overhead / median["import_s"]
    return "\n".join([
        "# Start-up of a smoke job",
        "",
        f"`python -m bench.benchmarks.start_up {' '.join(argv)}` · commit {info['sha']} · "
        f"{info['cpu']} · load average {info['load']} · torch {info['torch']} · "
        f"python {info['python']}",
        "",
        f"Median of {len(overheads)} alternated run(s), each in a fresh process; "
        f"`bench.run {' '.join(JOB)}` into a fresh results folder.",
        "",
        "| measure | median s |",
        "|:--|--:|",
        f"| `python -c \"import torch\"` (wall) | {median['import_s']:.2f} |",
        f"| smoke job (wall) | {median['job_s']:.2f} |",
        f"| its task (record `timings.total_s`) | {median['task_s']:.2f} |",
        f"| overhead = job wall - task | {overhead:.2f} |",
        f"| record `timings.startup_s` (process start to task start) | "
        f"{median['startup_s']:.2f} |",
        f"| overhead / import torch | {ratio:.2f}x |",
        "",
        f"Target: at most {TARGET:.1f}x ({'met' if ratio <= TARGET else 'not met'}).",
        "",
    ])


def main(argv: list[str] | None = None) -> None:
    """Run the measurement and write the report."""
    args = sized_parser(__doc__.split("\n")[0], SIZES).parse_args(argv)
    cfg = chosen_sizes(args, QUICK, FULL, SIZES)
    info = machine()
    publish(render(sys.argv[1:] if argv is None else argv, info, measure(cfg["repeats"])),
            args.out)


if __name__ == "__main__":
    main()
