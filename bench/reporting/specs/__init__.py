"""Registry of report specs: ``SPECS["ssla/table-7"]`` is the spec of SSLA Table 7.

Each paper has a module here exposing ``SPECS: list[ArtifactSpec]``; to add a paper, import
its module and add it to ``PAPER_MODULES``.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.reporting.spec import ArtifactSpec
from bench.reporting.specs import ssla, ssla_nn, ssla_sine, ssla_uci, subnet

PAPER_MODULES = (ssla, ssla_nn, ssla_sine, ssla_uci, subnet)


def build_registry(specs: Iterable[ArtifactSpec]) -> dict[str, ArtifactSpec]:
    """Specs keyed by ``<paper>/<artifact>``; raises ValueError on a duplicate key."""
    registry: dict[str, ArtifactSpec] = {}
    for spec in specs:
        if spec.key in registry:
            raise ValueError(f"two report specs for {spec.key}")
        registry[spec.key] = spec
    return registry


SPECS: dict[str, ArtifactSpec] = build_registry(
    spec for module in PAPER_MODULES for spec in module.SPECS
)
