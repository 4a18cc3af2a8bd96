"""Every artifact of the five papers, its title and its make target.

This is the data behind ``reports/README.md``. Whether an artifact is implemented is not
recorded here: :mod:`bench.reporting.registry` derives it from the experiment configs and the
report specs, so implementing an artifact never means editing this file.
"""

from __future__ import annotations

from dataclasses import dataclass

PAPERS: dict[str, str] = {
    "ssla": "Rodemann et al., Self-Supervised Laplace Approximation for Bayesian Uncertainty "
            "Quantification (TMLR)",
    "laplace_redux": "Daxberger et al., Laplace Redux: Effortless Bayesian Deep Learning "
                     "(appendix)",
    "ggn_thesis": "Thesis: Disentangling the Generalized Gauss-Newton and Approximate Inference "
                  "for Bayesian Deep Learning",
    "subnet": "Raha, Khare, Patra: Computationally Efficient Laplace Approximations for "
              "Neural Networks",
    "generalized_laplace": "Chen, Yu, Li, Lim: Generalized Laplace Approximation",
}
SHORT_FORM_PAPER = "ssla"


@dataclass(frozen=True)
class CatalogEntry:
    """One artifact of one paper."""

    paper: str
    artifact: str
    title: str

    @property
    def key(self) -> str:
        """``<paper>/<artifact>``, the name used by the CLI and the spec registry."""
        return f"{self.paper}/{self.artifact}"

    @property
    def implemented(self) -> bool:
        """Whether the registry has a spec and an experiment config for this artifact."""
        from bench.reporting.registry import implemented_artifacts  # the registry imports us

        return self.key in implemented_artifacts()

    @property
    def make_target(self) -> str:
        """The make target that runs the artifact's experiments and renders its report."""
        return make_target(self.paper, self.artifact)


def make_target(paper: str, artifact: str) -> str:
    """``reproduce-<paper>-<artifact>``, or the SSLA short form ``reproduce-table-N``."""
    if paper == SHORT_FORM_PAPER and artifact.startswith(("table-", "figure-")):
        return f"reproduce-{artifact}"
    return f"reproduce-{paper}-{artifact}"


CATALOG: tuple[CatalogEntry, ...] = (
    CatalogEntry("ssla", "figure-1", "Normal-Normal conjugate model: SSLA/ASSLA vs analytic PPD "
                 "for n = 20 ... 1e6"),
    CatalogEntry("ssla", "figure-2", "Heteroscedastic toy: predictive mean and 95% band per "
                 "method"),
    CatalogEntry("ssla", "figure-3", "Poisson-Gamma conjugate model: SSLA/ASSLA vs analytic "
                 "negative binomial"),
    CatalogEntry("ssla", "table-1", "Normal-Normal model at large n: KL, max |log| error and "
                 "float32 failure fractions"),
    CatalogEntry("ssla", "table-2", "Heteroscedastic toy: empirical coverage of SSLA, ASSLA, LA, "
                 "VI, MFVI, HMC"),
    CatalogEntry("ssla", "table-3", "UCI dataset overview: rows, inputs, split sizes, "
                 "subsampling"),
    CatalogEntry("ssla", "table-4", "UCI regression: coverage, NLL and CRPS of SSLA/ASSLA/LA"),
    CatalogEntry("ssla", "table-5", "Lightning-UQ-Box sine, homoscedastic: RMSE, NLL, coverage"),
    CatalogEntry("ssla", "table-6", "Lightning-UQ-Box sine, heteroscedastic: RMSE, NLL, "
                 "coverage"),
    CatalogEntry("ssla", "table-7", "Prior modularity: log-PPD at the self-prediction"),
    CatalogEntry("ssla", "table-8", "Prior modularity: log-PPD one unit off the self-prediction"),
    CatalogEntry("ssla", "blr", "Bayesian linear regression (in the authors' repo, not in the "
                 "paper)"),
    CatalogEntry("laplace_redux", "table-2", "Hessian structures on FMNIST: log-lik, accuracy, "
                 "OOD AUROC, prediction time"),
    CatalogEntry("laplace_redux", "table-3", "MNIST OOD detection: confidence and AUROC"),
    CatalogEntry("laplace_redux", "table-4", "CIFAR-10 OOD detection: confidence and AUROC"),
    CatalogEntry("laplace_redux", "table-5", "Memory footprint of WRN-16-4 on CIFAR-10"),
    CatalogEntry("laplace_redux", "figure-8", "Laplace variants on CIFAR-10 OOD: accuracy vs "
                 "mean AUROC (subset, structure, tuning, link)"),
    CatalogEntry("laplace_redux", "figure-8-mnist", "Figure 8's variant grid on MNIST / FMNIST "
                 "(LeNet; not the paper's data)"),
    CatalogEntry("laplace_redux", "figure-9", "Dataset shift: Rotated-MNIST (Brier, "
                 "accuracy vs angle)"),
    CatalogEntry("laplace_redux", "figure-9-cifar10c", "Dataset shift: Corrupted-CIFAR-10 "
                 "(panel of Figure 9)"),
    CatalogEntry("laplace_redux", "figure-10", "WILDS benchmarks: in-distribution vs OOD"),
    CatalogEntry("laplace_redux", "continual-learning", "Continual learning on permuted MNIST"),
    CatalogEntry("laplace_redux", "map-recipe", "Table 3's MAP recipe: the text's and the "
                 "code's recipes measured (harness study)"),
    CatalogEntry("laplace_redux", "map-recipe-selection", "Table 3's MAP recipe chosen by a "
                 "rule that never reads the paper's numbers (validation NLL; harness study)"),
    CatalogEntry("ggn_thesis", "figure-5.1", "The toy data sets (Snelson with a gap, two "
                 "moons) against the notes' checksums"),
    CatalogEntry("ggn_thesis", "figure-5.2", "Snelson regression: Laplace-GGN marginal "
                 "likelihood over (delta, sigma^2)"),
    CatalogEntry("ggn_thesis", "figure-5.3", "Two moons: marginal likelihood vs prior "
                 "precision"),
    CatalogEntry("ggn_thesis", "figure-5.4", "Regression predictives of VOGGN, LGVA, OGGN, "
                 "L-GGN: NN vs GLM sampling"),
    CatalogEntry("ggn_thesis", "figure-5.5", "Two moons predictives: NN vs GLM sampling, BLR "
                 "uncertainty"),
    CatalogEntry("ggn_thesis", "figure-5.6", "GP view on MNIST 4 vs 9: training importances "
                 "and kernel neighbours"),
    CatalogEntry("subnet", "figure-1", "Subnetwork selection: Wasserstein distance to full LLA "
                 "vs k"),
    CatalogEntry("subnet", "figure-2", "Subnetwork selection: 95% coverage vs k, with Split "
                 "and Ensemble"),
    CatalogEntry("generalized_laplace", "figure-2", "Toy cubic regression with Diag, KFAC, "
                 "EKFAC, B-Diag Hessians"),
    CatalogEntry("generalized_laplace", "figure-3", "LeNet-5 on MNIST: accuracy and entropy vs "
                 "temperature"),
    CatalogEntry("generalized_laplace", "figure-4", "ResNet-18 on CIFAR-10: accuracy and "
                 "entropy vs temperature"),
    CatalogEntry("generalized_laplace", "figure-5", "OOD entropy vs temperature (KMNIST, "
                 "SVHN)"),
    CatalogEntry("generalized_laplace", "figure-5b", "ResNet-18 trained on CIFAR-10: SVHN "
                 "(OOD) entropy vs temperature"),
)


def catalog_entry(key: str) -> CatalogEntry | None:
    """The catalog entry of ``<paper>/<artifact>``, or None."""
    return next((entry for entry in CATALOG if entry.key == key), None)
