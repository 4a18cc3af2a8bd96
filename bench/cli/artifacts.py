"""List the implemented paper artifacts (an experiment config and a report spec each).

    python -m bench.cli.artifacts             # one <paper>/<artifact> per line
    python -m bench.cli.artifacts --targets   # their make targets (+ the SSLA short forms)
    python -m bench.cli.artifacts --check     # exit 1 naming configs without specs and so on

The Makefile's ``list-reproduce`` and ``reproduce-all`` read this, so a new artifact needs no
Makefile edit.
"""

from __future__ import annotations

import argparse
import sys

from bench.reporting.catalog import make_target
from bench.reporting.registry import implemented_artifacts, registry_problems


def target_lines() -> list[str]:
    """``reproduce-<paper>-<artifact>`` per artifact, followed by its short form if it has one."""
    lines = []
    for spec in implemented_artifacts().values():
        long_form = f"reproduce-{spec.paper}-{spec.artifact}"
        short_form = make_target(spec.paper, spec.artifact)
        lines.append(long_form if short_form == long_form
                     else f"{long_form}  (short form: {short_form})")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the artifacts, their targets, or the registry's problems (exit 1 if any)."""
    parser = argparse.ArgumentParser(prog="python -m bench.cli.artifacts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--targets", action="store_true", help="print make targets")
    group.add_argument("--check", action="store_true", help="report registry inconsistencies")
    args = parser.parse_args(argv)
    if args.check:
        problems = registry_problems()
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        return 1 if problems else 0
    lines = target_lines() if args.targets else list(implemented_artifacts())
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
