"""The artifact registry: experiment configs and report specs pair up, nothing is listed twice."""

from __future__ import annotations

import pkgutil

import pytest

import bench.reporting.specs as specs_package
from bench.cli import artifacts
from bench.cli.reproduce_command import artifact_experiment
from bench.harness.errors import ConfigError
from bench.reporting.catalog import CATALOG, catalog_entry
from bench.reporting.registry import (
    experiment_configs,
    implemented_artifacts,
    natural_key,
    registry_problems,
    results_experiment,
    side_run_configs,
    specs_reading,
)
from bench.reporting.spec import ArtifactSpec
from bench.reporting.specs import SPECS


def test_every_experiment_config_has_a_spec_and_every_spec_a_config():
    assert registry_problems() == []
    read = {spec.experiment for spec in SPECS.values()}
    assert {results_experiment(name) for name in experiment_configs()} == read


def test_a_side_run_config_is_read_by_the_spec_of_the_records_it_joins():
    assert results_experiment("laplace_redux/table-2-budget") == "laplace_redux/table-2"
    assert results_experiment("laplace_redux/table-2") == "laplace_redux/table-2"
    assert "laplace_redux/table-2-budget" in experiment_configs()
    assert "laplace_redux/table-2-budget" not in implemented_artifacts()
    assert side_run_configs("laplace_redux/table-2") == ["laplace_redux/table-2-budget"]
    assert side_run_configs("laplace_redux/table-3") == ["laplace_redux/table-3-side-runs"]
    assert side_run_configs("laplace_redux/table-2-budget") == []


def test_every_spec_module_is_discovered_without_a_list():
    names = [info.name for info in pkgutil.iter_modules(specs_package.__path__)
             if not info.name.startswith("_")]
    assert names, "bench/reporting/specs/ has spec modules"
    for name in names:
        module = __import__(f"bench.reporting.specs.{name}", fromlist=["SPECS"])
        assert {spec.key for spec in module.SPECS} <= set(SPECS), name


def test_implemented_comes_from_the_registry_not_from_flags():
    implemented = implemented_artifacts()
    assert set(implemented) == set(SPECS)
    assert {entry.key for entry in CATALOG if entry.implemented} == set(implemented)
    assert all(catalog_entry(key) is not None for key in implemented)



def test_an_artifact_without_a_spec_is_not_implemented(monkeypatch):
    assert catalog_entry("laplace_redux/figure-10").implemented
    monkeypatch.delitem(SPECS, "laplace_redux/figure-10")
    assert not catalog_entry("laplace_redux/figure-10").implemented


def test_a_figure_drawn_from_a_table_reproduces_through_the_table_experiment():
    assert artifact_experiment("ssla/figure-2") == "ssla/table-2"
    assert artifact_experiment("ssla/table-2") == "ssla/table-2"
    assert [spec.key for spec in specs_reading("ssla/table-2")] == ["ssla/table-2",
                                                                   "ssla/figure-2"]
    with pytest.raises(ConfigError, match="choose one of: .*ssla/blr"):
        artifact_experiment("ssla/table-99")


def test_problems_name_a_config_without_spec_and_a_spec_without_config(monkeypatch):
    real = experiment_configs()
    monkeypatch.setattr("bench.reporting.registry.group_options",
                        lambda: {"experiment": [*real, "ssla/table-99"]})
    monkeypatch.setitem(SPECS, "ssla/figure-99", ArtifactSpec(paper="ssla", artifact="figure-99",
                                                              title="not configured"))
    problems = registry_problems()
    assert any("conf/experiment/ssla/table-99.yaml has no report spec" in p for p in problems)
    assert any("ssla/figure-99 reads experiment 'ssla/figure-99'" in p for p in problems)
    assert "ssla/figure-99" not in implemented_artifacts()


def test_natural_order_puts_table_2_before_table_10():
    assert sorted(["ssla/table-10", "ssla/table-2", "ssla/blr"], key=natural_key) == [
        "ssla/blr", "ssla/table-2", "ssla/table-10"]


def test_cli_lists_artifacts_targets_and_checks(capsys):
    assert artifacts.main([]) == 0
    assert capsys.readouterr().out.split() == list(implemented_artifacts())
    assert artifacts.main(["--targets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "reproduce-ssla-table-2  (short form: reproduce-table-2)" in lines
    assert "reproduce-subnet-figure-1" in lines
    assert artifacts.main(["--check"]) == 0


@pytest.mark.second_tier
def test_side_runs_of_every_experiment_parse_each_config_once(monkeypatch):
    """side_run_configs reads every experiment's name; each file is parsed once, not once per
    call (33 experiments made it a thousand YAML parses, seconds of every test that asks)."""
    from bench.reporting import registry

    parsed = []
    real_load = registry.yaml.safe_load
    monkeypatch.setattr(registry.yaml, "safe_load", lambda text: parsed.append(text) or
                        real_load(text))
    registry._parsed_yaml.cache_clear()
    names = experiment_configs()
    sides = {name: side_run_configs(name) for name in names}
    assert sides["laplace_redux/table-3"] == ["laplace_redux/table-3-side-runs"]
    assert len(parsed) == len(names)


def test_an_edited_experiment_file_is_read_again(tmp_path, monkeypatch):
    import os

    from bench.reporting import registry

    monkeypatch.setattr(registry, "CONF_DIR", tmp_path)
    path = tmp_path / "experiment" / "paper" / "side.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("name: paper/table-1\n")
    assert results_experiment("paper/side") == "paper/table-1"
    path.write_text("name: paper/table-2\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert results_experiment("paper/side") == "paper/table-2"
    registry.experiment_file("paper/side")["name"] = "changed by a caller"
    assert results_experiment("paper/side") == "paper/table-2"
