"""The one loop over a job's fitted variants (:mod:`bench.harness.fitted_variants`): every
variant or the one the experiment names, merged settings, the capability check, the base
network only for methods that fit on one (copied where asked), the fit timed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import pytest
from omegaconf import OmegaConf

from bench.harness.errors import ConfigError
from bench.harness.fitted_variants import built_variants, fitted_variants, job_variants

TARGET = f"{__name__}.Recorder"


@dataclass
class Recorder:
    """A method that records what its fit was given."""

    name: str = "recorder"
    scale: float = 1.0
    given: Any = None
    fitted_on: Any = None

    fits_on_base: ClassVar[bool] = False

    def fit(self, data, seed, base=None):
        self.given, self.fitted_on = base, (data, seed)
        return {"scale": self.scale} if self.scale != 0 else None


@dataclass
class OnBase(Recorder):
    fits_on_base: ClassVar[bool] = True


@runtime_checkable
class Scaled(Protocol):
    scale: float


@runtime_checkable
class Sampler(Protocol):
    def draws(self) -> None: ...


def node(**variants):
    return OmegaConf.create({"_target_": TARGET, "name": "recorder", "scale": 1.0,
                             "variants": variants or None})


def test_every_variant_in_order_with_its_settings_merged_and_its_fit_timed():
    variants = list(fitted_variants(node(a={"scale": 2.0}, b={"scale": 0.0},
                                         c={"_target_": f"{__name__}.OnBase"}),
                                    "data", 7, base="net"))
    assert [v.row for v in variants] == ["a", "b", "c"]
    assert [v.method.scale for v in variants] == [2.0, 0.0, 1.0]
    assert [v.diagnostics for v in variants] == [{"scale": 2.0}, {}, {"scale": 1.0}]
    assert all(v.method.fitted_on == ("data", 7) and v.fit_s >= 0 for v in variants)
    assert [v.method.given for v in variants] == [None, None, "net"]


def test_a_node_without_variants_is_one_row_named_after_the_method():
    (variant,) = fitted_variants(node(), "data", 0)
    assert variant.row == "recorder"


def test_the_experiments_posterior_narrows_the_job_to_that_variant():
    assert list(job_variants(node(a={}, b={"scale": 3.0}), "b")) == ["b"]
    ((row, method),) = built_variants(node(a={}, b={"scale": 3.0}), "b")
    assert (row, method.scale) == ("b", 3.0)
    with pytest.raises(ConfigError, match="posterior='z'.*a, b"):
        job_variants(node(a={}, b={}), "z")


def test_the_base_is_copied_for_each_method_where_asked_and_prepare_runs_first():
    base = ["net"]
    variants = list(fitted_variants(node(a={"_target_": f"{__name__}.OnBase"},
                                         b={"_target_": f"{__name__}.OnBase"}),
                                    "data", 0, base=base, base_copy=list,
                                    prepare=lambda m: OnBase(scale=m.scale + 1)))
    assert [v.method.given for v in variants] == [base, base]
    assert all(v.method.given is not base for v in variants)
    assert [v.method.scale for v in variants] == [2.0, 2.0]


def test_the_capability_is_checked_before_any_fit():
    assert [row for row, _ in built_variants(node(a={}), protocol=Scaled)] == ["a"]
    with pytest.raises(ConfigError, match="Sampler"):
        list(fitted_variants(node(a={}), "data", 0, protocol=Sampler))
