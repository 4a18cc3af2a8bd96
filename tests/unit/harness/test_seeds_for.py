"""An experiment's ``seeds_for`` entries: well-formed ones read, malformed ones one line."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from bench.cli.reproduce_command import seed_lists, sweep_overrides
from bench.harness.errors import ConfigError

SWEEP = {"dataset": ["uci_bike", "uci_wine"], "protocol": ["paper", "corrected"],
         "task.n": [100, 1000]}


def test_well_formed_entries_read_as_key_value_seeds():
    entries = OmegaConf.create([{"override": "dataset=uci_bike", "seeds": [42]},
                                {"override": "task.n=1000", "seeds": [0, 1]}])
    assert seed_lists(entries, OmegaConf.create(SWEEP)) == [("dataset", "uci_bike", [42]),
                                                            ("task.n", "1000", [0, 1])]
    assert seed_lists(None, SWEEP) == [] == seed_lists([], SWEEP)


@pytest.mark.parametrize("entries, expected", [
    ([{"override": "dataset=uci_bike"}],
     "seeds_for[0] is not valid (keys ['override']); each entry must be "
     "{override: <swept key>=<value>, seeds: [<int>, ...]}"),
    ([{"overide": "dataset=uci_bike", "seeds": [1]}], "seeds_for[0] is not valid (keys"),
    (["dataset=uci_bike"], "seeds_for[0] is not valid ('dataset=uci_bike'); each entry must"),
    ({"override": "dataset=uci_bike", "seeds": [1]}, "seeds_for={'override'"),
    ([{"override": "uci_bike", "seeds": [1]}],
     "seeds_for[0].override='uci_bike' is not valid; it must read <swept key>=<value>"),
    ([{"override": "datset=uci_bike", "seeds": [1]}],
     "datset is not swept by this experiment; choose one of: dataset, protocol, task.n"),
    ([{"override": "dataset=uci_bke", "seeds": [1]}],
     "the sweep of dataset has no uci_bke; choose one of: uci_bike, uci_wine"),
    ([{"override": "dataset=uci_bike", "seeds": 42}],
     "seeds_for[0].seeds=42 is not valid; it must be a non-empty list of integers"),
    ([{"override": "dataset=uci_bike", "seeds": []}], "seeds_for[0].seeds=[] is not valid"),
    ([{"override": "dataset=uci_bike", "seeds": [1.5]}], "seeds_for[0].seeds=[1.5]"),
    ([{"override": "dataset=uci_bike", "seeds": [1]}, {"override": "dataset=uci_bike",
                                                      "seeds": [2]}],
     "seeds_for[1].override='dataset=uci_bike' is not valid; an earlier entry"),
])
def test_malformed_entry_is_a_one_line_config_error(entries, expected):
    with pytest.raises(ConfigError) as raised:
        seed_lists(OmegaConf.create(entries), OmegaConf.create(SWEEP))
    message = str(raised.value)
    assert expected in message and "\n" not in message


def test_sweep_overrides_rejects_a_malformed_entry_of_an_experiment():
    with pytest.raises(ConfigError, match=r"^seeds_for\[0\] is not valid \(keys \['override'\]\)"):
        sweep_overrides("ssla/table-4", "smoke", ["seeds_for=[{override:'dataset=uci_liver'}]"])
    main, own = sweep_overrides(
        "ssla/table-4", "smoke", ["seeds_for=[{override:'dataset=uci_real_estate',seeds:[7]}]"])
    assert "dataset=uci_daily_demand" in main and "seed=42" in main
    assert "dataset=uci_real_estate" in own and "seed=7" in own


@pytest.mark.second_tier
def test_every_experiment_sweeps_at_every_scale():
    """``bench.reproduce <experiment> --scale <s>`` can plan its multiruns for every experiment
    and scale: an experiment that loads another (map-recipe and the Table 3 side runs load
    Table 3) must not inherit a seeds_for entry naming a method its own sweep lacks."""
    from bench.harness.overrides import group_options

    for experiment in group_options()["experiment"]:
        for scale in ("smoke", "cpu", "paper"):
            assert sweep_overrides(experiment, scale, []), (experiment, scale)
