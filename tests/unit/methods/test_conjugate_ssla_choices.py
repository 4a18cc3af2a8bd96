"""Conjugate SSLA / ASSLA: the config's refit and increment names become strategies once."""

from __future__ import annotations

import pytest

from bench.harness.errors import ConfigError
from bench.methods.ssla.algorithm import (
    AggregateLikelihoodIncrement,
    CandidateRefit,
    DirectLikelihoodIncrement,
    SelfPredictionRefit,
)
from bench.methods.ssla.conjugate_ssla import ASSLAMethod, SSLAMethod


@pytest.mark.parametrize(("name", "kind"), [("candidate", CandidateRefit),
                                            ("self_prediction", SelfPredictionRefit)])
def test_ssla_refit_name_gives_its_strategy(name, kind):
    assert type(SSLAMethod(refit=name).refit) is kind


@pytest.mark.parametrize(("name", "kind"), [("aggregate", AggregateLikelihoodIncrement),
                                            ("direct", DirectLikelihoodIncrement)])
def test_assla_increment_name_gives_its_strategy(name, kind):
    assert type(ASSLAMethod(increment=name).increment) is kind


def test_a_strategy_passes_through_unchanged():
    direct = DirectLikelihoodIncrement()
    assert ASSLAMethod(increment=direct).increment is direct


@pytest.mark.parametrize(("build", "message"), [
    (lambda: SSLAMethod(refit="literal"),
     "method.refit='literal' is not valid; choose one of: candidate, self_prediction"),
    (lambda: ASSLAMethod(increment="sum"),
     "method.increment='sum' is not valid; choose one of: aggregate, direct"),
])
def test_an_unknown_name_is_a_one_line_config_error_listing_the_choices(build, message):
    with pytest.raises(ConfigError) as error:
        build()
    assert str(error.value) == message
