"""Dependencies: every direct import is declared, and requirements.lock agrees with the pins."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

import pytest

from bench.harness.provenance import TRACKED_PACKAGES
from tests.helpers import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


def normalise(name: str) -> str:
    """The registry's canonical package name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lines: list[str]) -> dict[str, str]:
    """``name==version`` requirement lines as {normalised name: version}."""
    found = {}
    for line in lines:
        match = PIN.match(line.strip())
        if match:
            found[normalise(match.group(1))] = match.group(2)
    return found


def third_party_imports(folder: str) -> dict[str, set[str]]:
    """Top-level modules imported by the .py files under ``folder`` that are neither the
    standard library nor this repository's own packages, with the files importing them."""
    modules: dict[str, set[str]] = {}
    for path in (REPO / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("bench", "tests"):
                    modules.setdefault(top, set()).add(path.relative_to(REPO).as_posix())
    return modules


DECLARED = pins(PROJECT["dependencies"])
TEST_EXTRA = pins(PROJECT["optional-dependencies"]["test"])
LOCKED = pins((REPO / "requirements.lock").read_text().splitlines())


def undeclared(folder: str, declared: set[str]) -> list[str]:
    """Imports under ``folder`` whose distribution is not in ``declared``."""
    distributions = packages_distributions()
    missing = []
    for module, files in sorted(third_party_imports(folder).items()):
        names = {normalise(d) for d in distributions.get(module, [module])}
        if not names & declared:
            missing.append(f"{module} ({', '.join(sorted(names))}) imported by {sorted(files)}")
    return missing


def test_every_dependency_is_pinned():
    assert len(DECLARED) == len(PROJECT["dependencies"])
    assert len(TEST_EXTRA) == len(PROJECT["optional-dependencies"]["test"])


@pytest.mark.second_tier
def test_every_package_bench_imports_is_a_declared_dependency():
    assert undeclared("bench", set(DECLARED)) == []


@pytest.mark.second_tier
def test_every_package_the_tests_import_is_declared_and_test_only_ones_are_extras():
    assert undeclared("tests", set(DECLARED) | set(TEST_EXTRA)) == []
    assert "properscoring" in TEST_EXTRA and "properscoring" not in DECLARED


@pytest.mark.parametrize("name", sorted({**DECLARED, **TEST_EXTRA}))
def test_the_lock_holds_every_pin_at_its_pinned_version(name):
    assert LOCKED.get(name) == {**DECLARED, **TEST_EXTRA}[name], (
        f"{name}: pyproject.toml and requirements.lock disagree; run `make lock`")


def test_records_track_locked_numerics_packages():
    assert "asdl" not in LOCKED, "the PyPI package `asdl` is unrelated to laplace's asdfghjkl"
    for name in TRACKED_PACKAGES:
        assert name == "laplace-bench" or normalise(name) in LOCKED, name
    for name in ("lightning", "curvlinops-for-pytorch", "scikit-learn", "backpack-for-pytorch",
                 "torchvision", "asdfghjkl", "torch", "laplace-torch", "bayesian-torch"):
        assert name in TRACKED_PACKAGES


@pytest.mark.second_tier
def test_modules_imported_by_name_are_the_declared_wilds_extra():
    """``importlib.import_module("<name>")`` calls in bench load the optional `wilds` extra
    (Laplace Redux Figure 10 on a cluster): declared there, not locked, not needed by tests."""
    found = set()
    for path in (REPO / "bench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                found.add(node.args[0].value.split(".")[0])
    extra = pins(PROJECT["optional-dependencies"]["wilds"])
    assert found == {"wilds", "transformers"}
    assert found <= set(extra) and not found & set(DECLARED)
