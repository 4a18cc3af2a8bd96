"""Keys that choose how a job computes, not what (``NON_SEMANTIC_PATHS``): switching between a
fast replay and its library oracle keeps the record's config hash, so finished records are
reused; a key that changes the numbers still changes the hash."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from bench.harness.records import config_hash
from tests.helpers import compose_config

# (experiment/method, path of the choice, its default, the oracle's value, an override that
# changes numbers)
CHOICES = [
    ("ssla/table-2/nn_ssla", ("base", "loop"), "fast", "lightning", "base.patience=21"),
    ("ssla/table-2/mfvi", ("method", "loop"), "fast", "lightning", "+method.patience=21"),
    ("ssla/table-2/vi", ("method", "loop"), "fast", "lightning", "+method.patience=21"),
    ("ssla/table-2/hmc", ("method", "sampler"), "fast", "pyro", "protocol=corrected"),
    ("laplace_redux/table-3/classifier_ensemble", ("method", "training"), "batched",
     "sequential", "method.members=3"),
]


def _resolved(job: str, *extra: str) -> dict:
    experiment, _, method = job.rpartition("/")
    cfg = compose_config([f"experiment={experiment}", f"method={method}", *extra])
    config = OmegaConf.to_container(cfg, resolve=True)
    config.pop("hydra", None)
    return config


@pytest.mark.parametrize(("method", "path", "default", "oracle", "semantic"), CHOICES)
@pytest.mark.second_tier
def test_the_fast_or_oracle_choice_keeps_the_config_hash(method, path, default, oracle,
                                                         semantic):
    group, key = path
    fast = _resolved(method)
    slow = _resolved(method, f"{group}.{key}={oracle}")
    assert fast[group][key] == default and slow[group][key] == oracle
    assert config_hash(fast) == config_hash(slow)
    assert config_hash(_resolved(method, semantic)) != config_hash(fast)
    del fast[group][key]
    assert config_hash(fast) == config_hash(slow)
