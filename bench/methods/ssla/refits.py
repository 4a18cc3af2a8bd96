"""The refit strategies of network SSLA by name: what the config's ``method.refit`` node builds.

``sgd``: the authors' 10-epoch Adam refit (:mod:`bench.methods.ssla.refit_sgd`);
``gauss_newton``: ``steps`` undamped Gauss-Newton steps from theta-hat
(:mod:`bench.methods.ssla.refit_gauss_newton`); ``newton``: damped Newton to the MAP of
D + (x, y) from the MAP of D (:mod:`bench.methods.ssla.refit_newton`). The protocol names the
default (``protocol.ssla_refit``).
"""

from __future__ import annotations

from typing import Any

from bench.harness.errors import require_choice
from bench.methods.ssla.refit_base import Refit
from bench.methods.ssla.refit_gauss_newton import GaussNewtonRefit
from bench.methods.ssla.refit_newton import NewtonRefit
from bench.methods.ssla.refit_sgd import SGDRefit

REFITS: dict[str, type[Refit]] = {"sgd": SGDRefit, "newton": NewtonRefit,
                                  "gauss_newton": GaussNewtonRefit}


def refit_for(name: str, sgd: dict[str, Any] | None = None,
              gauss_newton: dict[str, Any] | None = None,
              newton: dict[str, Any] | None = None) -> Refit:
    """The refit called ``name`` with its own settings (the argument of the same name; the
    others belong to the refits not chosen)."""
    settings = {"sgd": sgd, "gauss_newton": gauss_newton, "newton": newton}
    chosen = require_choice("method.refit.name", name, REFITS)
    return REFITS[chosen](**(settings[chosen] or {}))
