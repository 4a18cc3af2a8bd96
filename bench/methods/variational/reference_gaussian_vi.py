"""The reference Gaussian VI as a GGN posterior method: the oracle of GGN thesis Figures 5.4 and
5.5, fitted in the same job shape as VOGGN, LGVA, OGGN and L-GGN so that its q gets the same
cells (NN and GLM predictive, ELBO, fit health) beside theirs.

``fit(data, seed)`` runs :func:`~bench.methods.variational.reference_vi.reference_vi_for`
(pyro's reparameterisation-gradient SVI, one fit per guide and start: the seed's shared
initialisation and the MAP that pyro finds from it) and keeps the fit with the highest ELBO
estimate. Its q is in covariance form; the GLM predictive linearises the network at q's mean,
as for the variational posteriors.

The fit does not depend on the experiment's protocol, so it is stored once per recipe and seed
(:func:`bench.harness.state_store.stored_state`, kind ``reference_vi``: the settings, the
network, the model and the training data's identity and SHA-256) and loaded by every other
job that asks for the same one; the record says which (``state_reused``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench.datasets.training_set import TrainingSet
from bench.harness.state_store import Checkpoints, stored_state
from bench.methods.laplace.ggn_laplace import GGNPredictive
from bench.methods.laplace.ggn_methods import GGNPosteriorMethod
from bench.methods.settings import settings_node
from bench.methods.variational.covariance_gaussian import CovarianceGaussian
from bench.methods.variational.reference_vi import (
    ReferenceVIResult,
    ReferenceVISettings,
    reference_vi_for,
)


def fits_summary(result: ReferenceVIResult) -> list[dict[str, Any]]:
    """Every fit of ``result`` (best first) as a record row: start, guide, ELBO with its
    Monte Carlo standard error, pyro's final mean loss and the seconds it took."""
    return [{"start": fit.start, "guide": fit.guide, "elbo": fit.elbo.elbo,
             "elbo_standard_error": fit.elbo.standard_error, "final_loss": fit.final_loss,
             "seconds": fit.seconds} for fit in result.fits]


@dataclass
class ReferenceGaussianVI(GGNPosteriorMethod):
    """The best of the reference VI's fits (module docstring). ``reference_vi``: the
    settings of :class:`~bench.methods.variational.reference_vi.ReferenceVISettings` by name
    (its defaults for those not given; validated there, one-line errors naming
    ``reference_vi.<key>``)."""

    name: str = "reference-VI"
    reference_vi: dict[str, Any] | None = None
    settings: ReferenceVISettings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.settings = settings_node(ReferenceVISettings, self.reference_vi)

    def recipe(self, data: TrainingSet) -> dict[str, Any]:
        """What decides the stored fit besides the seed."""
        network = self.network(int(data.train_inputs.shape[1]))
        return {"settings": asdict(self.settings), "widths": list(network.widths),
                "activation": network.activation, "likelihood": self.likelihood,
                "noise_variance": float(self.noise_variance),
                "prior_precision": float(self.prior_precision),
                "data": {**data.identity(), "sha256": data.content_sha256()}}

    def fit(self, data: TrainingSet, seed: int, base: Any = None) -> dict[str, Any]:
        """Fit every guide from every start and keep the best (or load the stored fit);
        diagnostics: the best fit's start and guide, every fit's row (:func:`fits_summary`),
        the SVI steps per fit and whether the fit was loaded."""
        x, y = data.train_inputs, data.train_labels

        def train(checkpoints: Checkpoints) -> tuple[dict[str, Any], list[dict]]:
            result = reference_vi_for(self, x, y, seed, settings=self.settings)
            best = result.best
            return {"mean": best.q.mean, "factor": best.q.factor,
                    "diagonal": best.q.diagonal, "best_start": best.start,
                    "best_guide": best.guide, "fits": fits_summary(result)}, []

        stored = stored_state("reference_vi", data.name, self.recipe(data), seed, train,
                              data.results_dir)
        state = stored.state
        q = CovarianceGaussian(state["mean"], state["factor"], state["diagonal"])
        network = self.network(int(x.shape[1]))
        self._finish(GGNPredictive(network, q, q.mean, self.likelihood_model()), seed)
        return {"best_start": state["best_start"], "best_guide": state["best_guide"],
                "reference_fits": state["fits"], "svi_steps": int(self.settings.steps),
                "state_reused": stored.reused, "recipe_hash": stored.recipe_hash,
                "n_params": network.n_params}
