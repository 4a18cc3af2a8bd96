"""The method contract: ``fit(data, seed, base=None) -> diagnostics``, ``predict(x)``.

Every method (conjugate SSLA/ASSLA, the network adapters, the subnetwork Laplace, the
baselines) implements :class:`Method`, and its config node (``conf/method/<name>.yaml``)
names the class in ``_target_``: :func:`bench.harness.method_nodes.instantiate_method` builds
it in one hop. Metrics are computed centrally by the task from the returned Predictive, never
inside a method.

The data families below say which data a method's ``fit`` takes, by the annotation of its
``data`` parameter: a task that runs one family declares it with
:func:`bench.harness.task_inputs.takes` (``methods=(RegressionNetworkMethod,)``), so a new
baseline joins every task of its family by annotating its ``fit``, without editing a task.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

from bench.datasets.conjugate_problems import ConjugateProblem
from bench.datasets.regression_splits import RegressionSplits
from bench.datasets.synthetic_networks import SyntheticDataset
from bench.datasets.training_set import TrainingSet
from bench.datasets.wilds import WildsJob
from bench.predictive.categorical import Categorical
from bench.predictive.densities import Gaussian, GridDensity, QuadratureDensity

Predictive = Gaussian | GridDensity | QuadratureDensity | Categorical


@runtime_checkable
class Method(Protocol):
    """``fit(data, seed, base=None) -> diagnostics`` then ``predict(x) -> Predictive``.

    ``data`` is what the experiment's dataset produced, in the form of the method's family
    (the protocols below): a :class:`ConjugateProblem` (the model travels with the data, and
    so does the candidate y-grid: ``predict(x)`` evaluates the unnormalised log-PPD on
    ``data.y_grid``), :class:`RegressionSplits`, :class:`SyntheticDataset`, a
    :class:`WildsJob` or a :class:`bench.datasets.training_set.TrainingSet`.

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
    be :class:`~bench.contracts.capabilities.PredictionDiagnostics` (how its refits
    converged, say); the regression tasks record them as metrics.
    """

    name: str
    fits_on_base: ClassVar[bool]

    def fit(self, data: Any, seed: int, base: Any = None) -> dict[str, Any]:
        """Condition on ``data`` (and ``base``); returns diagnostics."""

    def predict(self, x: Any) -> Predictive:
        """The predictive distribution of y at inputs ``x``."""


@runtime_checkable
class ConjugateMethod(Method, Protocol):
    """Fits on one :class:`ConjugateProblem` (model, data and y-grid); ``predict`` gives the
    grid density; ``last`` is the last evaluated log-PPD, with the anchor quantities of the
    notes in ``last.parts`` (SSLA, ASSLA)."""

    last: Any

    def fit(self, data: ConjugateProblem, seed: int, base: Any = None) -> dict[str, Any]:
        """Keep the problem and fit its mode."""


@runtime_checkable
class RegressionNetworkMethod(Method, Protocol):
    """Fits on :class:`RegressionSplits` (a network's training data and the base network
    when ``fits_on_base``); ``predict`` gives a Gaussian over y (SSLA Table 2 / Figure 2 and
    Table 4: network SSLA / ASSLA, LA, plug-in, VI, HMC, deep ensemble)."""

    def fit(self, data: RegressionSplits, seed: int, base: Any = None) -> dict[str, Any]:
        """Fit on the training part (and the base network)."""


@runtime_checkable
class ClassifierMethod(Method, Protocol):
    """Fits on a :class:`TrainingSet` of images and class labels (and the task's trained MAP
    network when ``fits_on_base``); ``predict`` gives a Categorical (Laplace Redux Tables 3-5,
    Figure 9 and the MAP-recipe studies)."""

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict[str, Any]:
        """Fit on the training set (and the base network)."""


@runtime_checkable
class SyntheticNetworkMethod(Method, Protocol):
    """Fits on a :class:`SyntheticDataset` drawn from a data-generating network, around the
    trained working network (the subnetwork Laplace)."""

    def fit(self, data: SyntheticDataset, seed: int, base: Any = None) -> dict[str, Any]:
        """Fit around the working network ``base``."""


@runtime_checkable
class CheckpointMethod(Method, Protocol):
    """Fits on a :class:`WildsJob`'s released checkpoints: ``checkpoint_keys(job)`` names the
    files it reads (checked before any work), ``tasks`` the prediction tasks it applies to
    (``classification``, ``regression``); ``predict`` takes a loader of a split."""

    tasks: ClassVar[tuple[str, ...]]

    def checkpoint_keys(self, job: WildsJob) -> list[str]:
        """Checkpoint files of ``job`` the method reads."""

    def fit(self, data: WildsJob, seed: int, base: Any = None) -> dict[str, Any]:
        """Load and calibrate on the job's checkpoints."""
