"""How long this process took to reach its first job: the start-up a record shows.

A job's record holds ``timings.startup_s``, the wall seconds from the start of the Python
process to the start of its task (interpreter, imports, config composition and checks), when
the job is the first its process runs; later jobs of a multirun in the same process, and
systems without ``/proc``, leave it out.
"""

from __future__ import annotations

import os
from pathlib import Path

_first_job_taken = False


def seconds_since_process_start(proc: Path = Path("/proc")) -> float | None:
    """Wall seconds since this process started, from ``/proc/self/stat`` (its start in clock
    ticks since boot) and ``/proc/uptime`` (1 / ``SC_CLK_TCK`` resolution); None without
    them."""
    try:
        stat = (proc / "self" / "stat").read_text()
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        uptime = float((proc / "uptime").read_text().split()[0])
        ticks_per_second = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - start_ticks / ticks_per_second)


def claim_first_job() -> bool:
    """True for the first job this process asks about, False for every later one."""
    global _first_job_taken
    first, _first_job_taken = not _first_job_taken, True
    return first
