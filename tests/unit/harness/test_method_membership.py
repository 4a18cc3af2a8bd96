"""Methods declare the experiments that sweep them (``appears_in``): a new method for an
existing table is its class and its yaml."""

from __future__ import annotations

import shutil

import pytest
import yaml

from bench.cli.reproduce_command import sweep_overrides
from bench.harness.errors import ConfigError
from bench.harness.method_membership import (
    declared_memberships,
    methods_appearing_in,
    sweep_owner,
    unknown_memberships,
)
from bench.harness.method_nodes import instantiate_method
from bench.harness.overrides import CONF_DIR
from bench.harness.records import config_hash
from tests.helpers import compose_config


def test_every_appears_in_names_an_experiment_that_sweeps_its_members():
    assert declared_memberships(CONF_DIR)["swag"] == [
        "laplace_redux/table-3", "laplace_redux/table-4", "laplace_redux/table-5"]
    assert unknown_memberships(CONF_DIR) == []


def test_an_experiment_sweeps_the_methods_that_list_it_sorted_by_name():
    assert methods_appearing_in("ssla/table-2", CONF_DIR) == [
        "hmc", "la", "mfvi", "nn_assla", "nn_ssla", "vi"]
    commands = sweep_overrides("ssla/table-2", "paper", [])
    assert commands[0][3] == "method=hmc,la,mfvi,nn_assla,nn_ssla,vi"


def test_an_experiment_loading_another_sweeps_the_members_of_the_one_it_loads():
    assert sweep_owner("laplace_redux/figure-9", CONF_DIR) == "laplace_redux/table-3"
    assert sweep_owner("laplace_redux/figure-9-cifar10c", CONF_DIR) == "laplace_redux/table-4"
    assert methods_appearing_in("laplace_redux/figure-9", CONF_DIR) == methods_appearing_in(
        "laplace_redux/table-3", CONF_DIR)


def test_a_new_method_yaml_joins_the_table_without_editing_the_experiment(tmp_path):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    node = yaml.safe_load((conf / "method" / "la.yaml").read_text())
    node.update(name="la_copy", appears_in=["ssla/table-2"])
    (conf / "method" / "la_copy.yaml").write_text(yaml.safe_dump(node))
    assert "la_copy" in methods_appearing_in("ssla/table-2", conf)


def test_a_membership_of_an_experiment_that_lists_its_methods_is_reported(tmp_path):
    conf = tmp_path / "conf"
    (conf / "method").mkdir(parents=True)
    (conf / "experiment" / "ssla").mkdir(parents=True)
    (conf / "method" / "m.yaml").write_text("appears_in: [ssla/x, ssla/missing]\n")
    (conf / "experiment" / "ssla" / "x.yaml").write_text("sweep:\n  method: [m]\n")
    assert unknown_memberships(conf) == ["m: ssla/x", "m: ssla/missing"]
    with pytest.raises(ConfigError, match="no conf/method node lists it in appears_in"):
        methods_appearing_in("ssla/other", conf)
    (conf / "method" / "m.yaml").write_text("appears_in: ssla/x\n")
    with pytest.raises(ConfigError, match="appears_in='ssla/x' is not valid"):
        declared_memberships(conf)


def test_appears_in_is_neither_an_argument_nor_part_of_the_record_hash():
    cfg = compose_config(["experiment=ssla/table-2", "method=la", "scale=smoke"])
    assert list(cfg.method.appears_in) == ["ssla/table-2"]
    assert instantiate_method(cfg.method).name == cfg.method.name
    resolved = {"method": {"name": "LA", "appears_in": ["ssla/table-2"]}}
    assert config_hash(resolved) == config_hash({"method": {"name": "LA"}})
