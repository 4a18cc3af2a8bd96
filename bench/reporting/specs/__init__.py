"""Registry of report specs: ``SPECS["ssla/table-7"]`` is the spec of SSLA Table 7.

Every public module in this folder is imported and must expose ``SPECS: list[ArtifactSpec]``
(modules whose name starts with ``_`` are helpers and are skipped). Adding a spec to one of
these modules, or a new module here, registers it: there is no list to edit. Which registered
artifacts can be reproduced is decided in :mod:`bench.reporting.registry`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType

from bench.reporting.spec import ArtifactSpec


def spec_modules() -> list[ModuleType]:
    """The public modules of this package, imported, in name order."""
    names = sorted(info.name for info in pkgutil.iter_modules(__path__)
                   if not info.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def module_specs(module: ModuleType) -> list[ArtifactSpec]:
    """``module.SPECS``; TypeError naming the module when it has none or holds something else."""
    specs = getattr(module, "SPECS", None)
    if not isinstance(specs, list | tuple) or not all(isinstance(s, ArtifactSpec) for s in specs):
        raise TypeError(f"{module.__name__} must define SPECS: list[ArtifactSpec] "
                        "(prefix helper modules with '_')")
    return list(specs)


def build_registry(specs: Iterable[ArtifactSpec]) -> dict[str, ArtifactSpec]:
    """Specs keyed by ``<paper>/<artifact>``; raises ValueError on a duplicate key."""
    registry: dict[str, ArtifactSpec] = {}
    for spec in specs:
        if spec.key in registry:
            raise ValueError(f"two report specs for {spec.key}")
        registry[spec.key] = spec
    return registry


SPECS: dict[str, ArtifactSpec] = build_registry(
    spec for module in spec_modules() for spec in module_specs(module)
)
