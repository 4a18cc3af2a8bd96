"""Network SSLA's strategies: chosen by the method node's nested ``_target_`` nodes, and bad
input is one line naming the key and its choices."""

from __future__ import annotations

import pytest

from bench.harness.method_nodes import instantiate_method
from bench.methods.ssla.curvature_weights import EmpiricalFisherWeights, GGNWeights
from bench.methods.ssla.refit_gauss_newton import GaussNewtonRefit
from bench.methods.ssla.refit_newton import NewtonRefit
from bench.methods.ssla.refit_sgd import SGDRefit
from bench.methods.ssla.ssla_objectives import AuthorsObjective, GaussianObjective
from tests.helpers import compose_config, config_error_line

TABLE_2_SSLA = ["experiment=ssla/table-2", "method=nn_ssla", "scale=smoke"]


@pytest.mark.parametrize(("overrides", "objective", "refit"), [
    ([], AuthorsObjective, SGDRefit),
    (["protocol=corrected"], GaussianObjective, GaussNewtonRefit),
    (["protocol=corrected", "protocol.ssla_refit=newton"], GaussianObjective, NewtonRefit),
    (["protocol=corrected", "method.refit.name=sgd"], GaussianObjective, SGDRefit),
])
@pytest.mark.second_tier
def test_the_protocol_picks_the_objective_and_the_default_refit(overrides, objective, refit):
    method = instantiate_method(compose_config([*TABLE_2_SSLA, *overrides]).method)
    assert type(method.objective) is objective and type(method.refit) is refit
    assert type(method.curvature) is GGNWeights


@pytest.mark.second_tier
def test_each_refit_takes_its_own_settings_and_the_scale_limits():
    cfg = compose_config([*TABLE_2_SSLA, "+method.refit.sgd.patience=5"])
    sgd = instantiate_method(cfg.method, refit_epochs=2).refit
    assert (sgd.epochs, sgd.patience, sgd.lr) == (2, 5, cfg.base.lr)
    cfg = compose_config([*TABLE_2_SSLA, "protocol=corrected", "protocol.ssla_refit=newton"])
    newton = instantiate_method(cfg.method, refit_max_steps=1, base_max_steps=5).refit
    assert (newton.max_steps, newton.base_max_steps, newton.cg_iterations) == (1, 5, 50)


def test_the_curvature_node_picks_the_empirical_fisher():
    cfg = compose_config(["experiment=ssla/table-2", "method=nn_assla",
                          "method.curvature.name=empirical_fisher"])
    assert type(instantiate_method(cfg.method).curvature) is EmpiricalFisherWeights


@pytest.mark.parametrize(("overrides", "expected"), [
    (["method.curvature.name=foo"],
     "method.curvature.name='foo' is not valid; choose one of: ggn, empirical_fisher"),
    (["protocol.ssla_refit=foo"],
     "method.refit.name='foo' is not valid; choose one of: sgd, newton, gauss_newton"),
    (["method.refit=newton"],
     "method.refit='newton' is not valid; method.refit is a node whose name is one of: sgd, "
     "newton, gauss_newton"),
    (["method.refit.name=newton"], "method.refit.name='newton' needs protocol=corrected"),
    (["protocol=corrected", "protocol.ssla_refit=newton",
      "method.curvature.name=empirical_fisher"],
     "method.refit.name='newton' needs method.curvature.name='ggn'"),
    (["protocol.name=foo"], "protocol.name='foo' is not valid; choose one of: paper, corrected"),
])
@pytest.mark.second_tier
def test_bad_strategy_input_is_one_line_naming_the_key(overrides, expected, tmp_path, capsys,
                                                       monkeypatch):
    line = config_error_line([*TABLE_2_SSLA, *overrides], tmp_path, capsys, monkeypatch)
    assert expected in line
