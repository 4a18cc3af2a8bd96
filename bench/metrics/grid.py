"""Metrics between an approximate and a reference predictive on the same grid."""

from __future__ import annotations

import torch

from bench.harness.errors import require_choice
from bench.predictive.densities import GridDensity


def grid_kl(approx: GridDensity, reference: GridDensity) -> float:
    """KL(approx || reference) of the two grid vectors normalised to sum one.

    This is the SSLA paper's "entropy" score (scipy.stats.entropy(p_method, p_analytic)).
    KL is non-negative; a sum that rounds to about -1e-16 for identical vectors is clamped
    to 0.
    """
    log_p, log_q = approx.log_weights(), reference.log_weights()
    return max(float((log_p.exp() * (log_p - log_q)).sum()), 0.0)


def max_abs_log_error(approx: GridDensity, reference: GridDensity) -> float:
    """Largest |log approx - log reference| over the grid, on the unnormalised values."""
    diff = approx.log_values.double() - reference.log_values.double()
    return float(diff.abs().max())


def frac_nonfinite(approx: GridDensity, reference: GridDensity) -> float:
    """Fraction of grid points where the approximation is NaN or infinite."""
    return float((~torch.isfinite(approx.log_values)).double().mean())


GRID_METRICS = {
    "kl": grid_kl,
    "max_abs_log_err": max_abs_log_error,
    "frac_nonfinite": frac_nonfinite,
}


def compute_grid_metrics(
    names: list[str], approx: GridDensity, reference: GridDensity
) -> dict[str, float]:
    """The named metrics (keys of GRID_METRICS) of ``approx`` against ``reference``."""
    out = {}
    for name in names:
        require_choice("metrics.compute", name, GRID_METRICS)
        out[name] = GRID_METRICS[name](approx, reference)
    return out
