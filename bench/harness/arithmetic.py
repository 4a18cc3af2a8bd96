"""Which float arithmetic a process does: this CPU's native kernels, or one pinned set that
every x86-64 CPU computes to the same bits.

The same float program rounds differently on CPUs with other vector units: torch, oneMKL,
oneDNN, glibc's libm and numpy each choose their kernels from the instruction sets the CPU has
(AVX-512, AVX2 and FMA, or SSE), and the kernels sum and round in other orders. A long
stochastic training turns that last digit into another network. The pinned arithmetic
(:data:`PINNED_ARITHMETIC`) chooses, for each of those libraries, the kernels every x86-64 CPU
runs, in one thread:

- ``ATEN_CPU_CAPABILITY=default``: torch's own kernels (elementwise, reductions, random draws)
  without vector units;
- ``MKL_CBWR=COMPATIBLE``: oneMKL's Conditional Numerical Reproducibility branch for every
  Intel and compatible processor (matrix products, LAPACK);
- ``ONEDNN_MAX_CPU_ISA=SSE41``: oneDNN's convolution kernels capped at SSE4.1;
- ``GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA``: libm's exp, log and cos without their FMA
  variants (torch's default kernels call them; the double-precision random normals move
  otherwise). glibc reads it when a process starts only;
- ``NPY_DISABLE_CPU_FEATURES``: numpy's loops at its x86-64-v2 baseline;
- one thread for OpenMP and oneMKL.

The test suite runs in it (``tests/conftest.py``), so the goldens mean the same on every
x86-64 machine; users' runs keep the native, faster kernels unless they ask for it
(``bench.reproduce --pinned-arithmetic``). Other processors (Arm) have no such settings.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

PINNED_ARITHMETIC: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3,X86_V4,AVX512_ICL,AVX512_SPR",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
# Read by the dynamic loader when the process starts: setting it later changes nothing here.
READ_AT_PROCESS_START = ("GLIBC_TUNABLES",)
X86_64_MACHINES = ("x86_64", "amd64")
# Set in a command restarted in the pinned arithmetic, so that it never restarts twice.
RESTARTED_VARIABLE = "BENCH_PINNED_RESTART"


def pinned_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with the pinned arithmetic's variables set."""
    return {**(os.environ if environ is None else environ), **PINNED_ARITHMETIC}


def is_x86_64() -> bool:
    """Whether this CPU is an x86-64 one (the only kind the pinned arithmetic is defined for;
    elsewhere its variables name features the libraries do not know)."""
    return platform.machine().lower() in X86_64_MACHINES


def pin_arithmetic() -> None:
    """Set the pinned arithmetic's variables in this process's environment (on x86-64; a no-op
    elsewhere): the processes it starts run in the pinned arithmetic, and so does this one
    where the libraries have not chosen their kernels yet (all but glibc's, see
    :func:`unpinned_because`)."""
    if is_x86_64():
        os.environ.update(PINNED_ARITHMETIC)


def _start_environment() -> dict[str, str] | None:
    """The environment this process was started with (None where /proc cannot tell)."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return None
    pairs = (entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, value in pairs}


def unpinned_because() -> str | None:
    """Why this process does not compute in the pinned arithmetic (None: it does).

    Every variable must hold its pinned value now, and those read at start-up must have held
    it when the process started; the CPU must be an x86-64 one."""
    if not is_x86_64():
        return f"a {platform.machine()} CPU: the pinned arithmetic is defined for x86-64 only"
    differ = sorted(name for name, value in PINNED_ARITHMETIC.items()
                    if os.environ.get(name) != value)
    if differ:
        return f"{', '.join(differ)} not set to the pinned value"
    started = _start_environment()
    if started is None:
        return "the environment this process started with cannot be read"
    late = sorted(name for name in READ_AT_PROCESS_START
                  if started.get(name) != PINNED_ARITHMETIC[name])
    if late:
        return f"{', '.join(late)} set after the process started (read at start-up only)"
    return None


def restart_pinned(module: str, args: list[str],
                   changes: Mapping[str, str] | None = None) -> str | None:
    """Replace this process by ``python -m module args`` started in the pinned arithmetic,
    unless it computes in it already (None) or cannot (the reason: another processor, or a
    restart that did not pin it). With ``changes`` (variables set on top of the pin, a
    measurement of what they move) it restarts once, unless it is that restart (None)."""
    why = unpinned_because()
    if changes:
        if os.environ.get(RESTARTED_VARIABLE):
            return None
    elif why is None or not is_x86_64():
        return why
    elif os.environ.get(RESTARTED_VARIABLE):
        return f"{why}, after a restart in it"
    os.execve(sys.executable, [sys.executable, "-m", module, *args],
              {**pinned_environment(), **(changes or {}), RESTARTED_VARIABLE: "1"})
    return None  # not reached: execve does not return


def arithmetic_mode() -> str:
    """``"pinned"`` or ``"native"``: what a record says of the arithmetic its numbers came from."""
    return "native" if unpinned_because() else "pinned"


if __name__ == "__main__":
    # ``env $(python -m bench.harness.arithmetic) <command>`` runs a command pinned from its
    # start (no value holds a space); on another processor it prints nothing.
    if is_x86_64():
        print(" ".join(f"{name}={value}" for name, value in PINNED_ARITHMETIC.items()))
