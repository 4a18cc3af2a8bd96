"""The one loop over a job's fitted variants: the only reader of a method node's ``variants``.

A method node holds what its rows share and, under ``variants``, each row's own settings
(:func:`bench.harness.method_nodes.method_variants`). One policy for every task: a job fits
every variant of its node, or only the one its experiment names under a top-level
``posterior`` key (the experiments that sweep posteriors, one job each). For each row the loop
merges the settings, instantiates the method, checks the capability the task needs, hands it
the base network where the method fits on one, times the fit and yields a
:class:`FittedVariant`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from bench.harness.errors import require_choice
from bench.harness.method_nodes import instantiate_method, method_variants
from bench.harness.task_inputs import capability
from bench.harness.timing import Stopwatch


@dataclass(frozen=True)
class FittedVariant:
    """One row: its name, the fitted method, the fit's diagnostics and its seconds."""

    row: str
    method: Any
    diagnostics: dict[str, Any]
    fit_s: float


def job_variants(node: DictConfig, posterior: str | None = None) -> Mapping[str, dict[str, Any]]:
    """Row name -> constructor arguments: every variant of ``node``, or only ``posterior``
    when the experiment names one (a one-line ConfigError naming the variants otherwise)."""
    variants = method_variants(node)
    if posterior is None:
        return variants
    row = require_choice("posterior", str(posterior), list(variants))
    return {row: variants[row]}


def built_variants(node: DictConfig, posterior: str | None = None,
                   protocol: type | None = None) -> Iterator[tuple[str, Any]]:
    """Each job variant's row and method, instantiated and, with ``protocol``, checked for that
    capability (:func:`bench.contracts.capabilities.capability`)."""
    for row, arguments in job_variants(node, posterior).items():
        method = instantiate_method(node, **arguments)
        yield row, method if protocol is None else capability(method, protocol)
        del method  # the next row is built without this one alive


def fitted_variants(node: DictConfig, data: Any, seed: int, *, posterior: str | None = None,
                    protocol: type | None = None, base: Any = None,
                    base_copy: Callable[[Any], Any] | None = None,
                    prepare: Callable[[Any], Any] | None = None) -> Iterator[FittedVariant]:
    """Fit each job variant on ``data`` with ``seed`` (:func:`built_variants`; ``prepare``
    may replace a built method before its fit). A method with ``fits_on_base`` receives
    ``base`` (``base_copy(base)`` where given, for methods that change the network they are
    handed); the others None."""
    for row, method in built_variants(node, posterior, protocol):
        if prepare is not None:
            method = prepare(method)
        given = None
        if base is not None and type(method).fits_on_base:
            given = base if base_copy is None else base_copy(base)
        watch = Stopwatch()
        diagnostics = method.fit(data, seed, base=given)
        yield FittedVariant(row, method, diagnostics or {}, watch.elapsed())
        del method, given  # the next row fits without this one alive (memory is measured)
