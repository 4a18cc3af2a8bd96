"""Move records whose folder name is not their config's hash any more to the folder the hash
names, so that a rerun finds (and skips) them.

A record's folder is its ``config_hash`` (:func:`bench.harness.records.config_hash`). When the
hash's canonical spelling of a config changes (a settings sub-node respelled), records written
in between sit under a name no job composes. :func:`rehash_records` finds them, moves each folder
(its job log included) to the name its config hashes to now, and rewrites its record with the
new ``config_hash``, the old one kept as ``rehashed_from`` and a fresh ``record_sha256``
(atomically: a reader sees the old record or the new one). A record whose new folder is taken
is left where it is and reported. ``python -m bench.harness.rehash [--results DIR]
[--dry-run]``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from bench.harness.overrides import default_results_dir
from bench.harness.records import (
    RECORD_NAME,
    DamagedRecord,
    config_hash,
    read_record_file,
    write_record_atomically,
)


@dataclass(frozen=True)
class Move:
    """One record folder whose name is not its config's hash: from ``old`` to ``new``."""

    old: Path
    new: Path
    taken: bool


def misnamed_records(results_dir: Path) -> list[Move]:
    """Every ``<experiment>/<scale>/<hash>/record.json`` under ``results_dir`` whose config
    hashes to another name, with whether that folder is taken (damaged records are skipped)."""
    moves = []
    for path in sorted(Path(results_dir).glob(f"*/*/*/*/{RECORD_NAME}")):
        try:
            record = read_record_file(path)
        except DamagedRecord:  # its job sets it aside and runs again
            continue
        chash = config_hash(record["config"])
        if chash != path.parent.name:
            new = path.parent.with_name(chash)
            moves.append(Move(path.parent, new, new.exists()))
    return moves


def rehash_records(results_dir: Path, dry_run: bool = False) -> list[Move]:
    """Move every misnamed record (:func:`misnamed_records`) whose new folder is free; returns
    them all (the taken ones stay)."""
    moves = misnamed_records(results_dir)
    if dry_run:
        return moves
    for move in moves:
        if not move.taken:
            _move(move)
    return moves


def _move(move: Move) -> None:
    os.rename(move.old, move.new)
    record = read_record_file(move.new / RECORD_NAME)
    record["rehashed_from"] = record["config_hash"]
    record["config_hash"] = move.new.name
    write_record_atomically(move.new, record, replace=True)


def main(argv: list[str] | None = None) -> int:
    """Print each move (and do it unless ``--dry-run``); exit 1 when a new folder is taken."""
    parser = argparse.ArgumentParser(prog="python -m bench.harness.rehash", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=None,
                        help="results folder (default: $BENCH_RESULTS_DIR or ./results)")
    parser.add_argument("--dry-run", action="store_true", help="list the moves, move nothing")
    args = parser.parse_args(argv)
    moves = rehash_records(args.results or default_results_dir(), dry_run=args.dry_run)
    for move in moves:
        state = "taken, left" if move.taken else ("would move" if args.dry_run else "moved")
        print(f"{state}: {move.old} -> {move.new.name}")
    print(f"{len(moves)} record(s) named by an old hash; {sum(m.taken for m in moves)} left")
    return 1 if any(move.taken for move in moves) else 0


if __name__ == "__main__":
    raise SystemExit(main())
