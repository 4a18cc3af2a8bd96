"""The method contract: ``fit(data, seed, base=None) -> diagnostics``, ``predict(x)``.

Every method (conjugate SSLA/ASSLA, the network adapters, the subnetwork Laplace, the
baselines) implements :class:`Method`, and its config node (``conf/method/<name>.yaml``)
names the class in ``_target_``: :func:`instantiate_method` builds it in one hop. Metrics are
computed centrally by the task from the returned Predictive, never inside a method.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from bench.harness.errors import ConfigError
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian, GridDensity, QuadratureDensity

if TYPE_CHECKING:
    from torch import Tensor

Predictive = Gaussian | GridDensity | QuadratureDensity | Categorical

# Keys of a method node that are data for the task, not constructor arguments.
VARIANTS_KEY = "variants"


@runtime_checkable
class Method(Protocol):
    """``fit(data, seed, base=None) -> diagnostics`` then ``predict(x) -> Predictive``.

    ``data`` is what the experiment's dataset produced, in the form of the method's family:

    * conjugate SSLA / ASSLA: a :class:`bench.datasets.conjugate.ConjugateProblem`. The model
      travels with the data (the dataset defines the model of each panel, with its prior),
      and so does the candidate y-grid: it is part of the problem (Figure 1's grid is fixed,
      BLR's is centred on each prior's exact PPD, the sine tables' is one row per test
      input), so ``predict(x)`` evaluates the unnormalised log-PPD on ``data.y_grid``;
    * network regression: :class:`bench.datasets.regression.RegressionSplits`;
    * subnetwork Laplace: :class:`bench.datasets.synthetic_networks.SyntheticDataset`.

    ``seed`` is an integer and drives every random draw of the method (initialisation,
    minibatch order, Monte Carlo samples, refits): the same seed gives the same predictions on
    CPU. An integer rather than a ``torch.Generator`` because several methods hand it on to
    code that takes only integers (Lightning's ``seed_everything`` in the VI baselines and
    the authors' base MLP, pyro's global seed in HMC) or derive independent streams from it
    (ensemble members, one refit stream per curvature structure); a generator can be made
    from a seed, not a seed recovered from a used generator. Methods that draw nothing
    ignore it.

    ``base`` is the trained network a Laplace-family method approximates around; those
    classes set ``fits_on_base = True``, and the task trains the experiment's ``base`` network
    once per job and passes it to each of them (None for the others).

    ``fit`` returns diagnostics as plain JSON values (fitted hyperparameters, acceptance
    rates, epochs run, ...). ``predict(x)`` returns the predictive over y at the inputs ``x``
    (``None`` for models without inputs): a :mod:`bench.predictive` object. A method may also
    define ``prediction_diagnostics() -> dict[str, float]`` about its last prediction (how
    its refits converged, say); the regression tasks record them as metrics.
    """

    name: str
    fits_on_base: ClassVar[bool]

    def fit(self, data: Any, seed: int, base: Any = None) -> dict[str, Any]:
        """Condition on ``data`` (and ``base``); returns diagnostics."""

    def predict(self, x: Any) -> Predictive:
        """The predictive distribution of y at inputs ``x``."""


@runtime_checkable
class HoldsUnreadTensors(Protocol):
    """A fitted method whose objects keep tensors alive that its predictions never read.

    ``stored_tensors()`` is what the method needs to predict; ``unread_tensors()`` is the rest
    of what its objects hold, each storage not already among the stored ones (laplace-torch's
    last-layer Laplace: the parameters of the network it was handed, ``la.params``). The
    memory task (Laplace Redux Table 5) reports both.
    """

    def stored_tensors(self) -> dict[str, Tensor]:
        """The tensors the method reads to predict."""

    def unread_tensors(self) -> dict[str, Tensor]:
        """The tensors its objects hold beyond :meth:`stored_tensors`, never read."""


def method_class(node: DictConfig) -> type:
    """The class a method node names in ``_target_``."""
    if "_target_" not in node:
        raise ConfigError(f"method {node.get('name')!r} has no _target_; a method node names "
                          "its class in _target_")
    return get_class(node._target_)


def method_arguments(cls: type) -> list[str]:
    """Names the class's constructor accepts (its dataclass fields that are init arguments)."""
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls) if f.init]
    return [name for name in inspect.signature(cls).parameters if name != "self"]


def instantiate_method(node: DictConfig, **arguments: Any) -> Method:
    """The method ``node`` names, with ``arguments`` over the node's own values.

    ``variants`` (row name -> arguments) is data for the task, not passed on; a key the class
    does not take is a one-line ConfigError listing the keys it does take. Arguments may
    replace ``_target_`` (a variant that is another class of the same family).
    """
    values = OmegaConf.to_container(node, resolve=True)
    values.pop(VARIANTS_KEY, None)
    values.update(arguments)
    cls = get_class(values["_target_"]) if "_target_" in values else method_class(node)
    accepted = method_arguments(cls)
    unknown = sorted(key for key in values if not key.startswith("_") and key not in accepted)
    if unknown:
        raise ConfigError(f"method.{unknown[0]} is not an argument of {cls.__name__}; "
                          f"choose from: {', '.join(accepted)}")
    return instantiate(values, _convert_="all")


def method_variants(node: DictConfig) -> Mapping[str, dict[str, Any]]:
    """Row name -> constructor arguments of each variant (one row, the method's name, if the
    node has no variants)."""
    variants = node.get(VARIANTS_KEY)
    if not variants:
        return {str(node.name): {}}
    return OmegaConf.to_container(variants, resolve=True)


def merged_method_node(node: DictConfig, settings: Mapping[str, Any] | None) -> DictConfig:
    """``node`` with ``settings`` merged on (new keys and nested dicts included: the composed
    node is a struct config, so the merge goes into a plain copy of its resolved values)."""
    if not settings:
        return node
    return OmegaConf.merge(OmegaConf.create(OmegaConf.to_container(node, resolve=True)),
                           settings)

