"""The command line the size-driven benchmarks share: ``--quick`` picks their small sizes
(CI smoke), an integer option per size overrides it, ``--threads`` sets torch's CPU threads,
``--device`` (where a benchmark takes one) where it runs, ``--out`` where the report goes."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any


def sized_parser(description: str, sizes: Mapping[str, str], *, device: bool = False,
                 threads: int = 1) -> argparse.ArgumentParser:
    """A parser with ``--quick``, one integer option ``--<size>`` per entry ``size -> help``
    of ``sizes`` (underscores as dashes, default None: keep the chosen size), ``--threads``
    (default ``threads``), ``--device`` (default cpu; only with ``device=True``) and ``--out``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke)")
    for size, text in sizes.items():
        parser.add_argument(f"--{size.replace('_', '-')}", type=int, help=text)
    parser.add_argument("--threads", type=int, default=threads, help="torch CPU threads")
    if device:
        parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", help="Markdown report path (printed either way)")
    return parser


def chosen_sizes(args: argparse.Namespace, quick: Mapping[str, Any], full: Mapping[str, Any],
                 sizes: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``quick`` (with ``--quick``) or ``full``, each of ``sizes`` given on the
    command line in its place."""
    chosen = dict(quick if args.quick else full)
    for size in sizes:
        if getattr(args, size) is not None:
            chosen[size] = getattr(args, size)
    return chosen


def parsed_sizes(description: str, sizes: Mapping[str, str], quick: Mapping[str, Any],
                 full: Mapping[str, Any], argv: list[str] | None
                 ) -> tuple[argparse.Namespace, dict[str, Any]]:
    """``argv`` parsed by :func:`sized_parser`, torch's CPU threads set to ``--threads``, and
    the sizes :func:`chosen_sizes` picks."""
    import torch

    args = sized_parser(description, sizes).parse_args(argv)
    torch.set_num_threads(args.threads)
    return args, chosen_sizes(args, quick, full, sizes)
