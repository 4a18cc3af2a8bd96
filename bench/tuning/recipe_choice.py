"""Choosing a training recipe without looking at the paper's results.

The rule, in order (issue 41, "No choice made on the target"):

1. ``text``: the recipe the paper's text states, when it states a complete one;
2. ``code``: else the recipe of the authors' training script for this network and data;
3. ``validation``: else the candidate with the lowest validation NLL on a held-out part of the
   training set.

A source recipe (1 or 2) is taken only when its fit is healthy; a candidate enters 3 only when
healthy. Healthy means a finite validation NLL below the constant predictor's (the training
part's class frequencies scored on the same held-out part) and a validation accuracy above the
constant predictor's (the held-out share of the fit part's most frequent class). A network
whose output no longer depends on its input learns exactly those class frequencies through
its last bias: its NLL can fall a few 1e-6 below the constant's by rounding, but its accuracy
is the share of the one class it predicts, never above the constant's. The chooser sees
validation scores and the two source names only: no paper value and no test-set number
reaches it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.harness.errors import ConfigError

TIERS = ("text", "code", "validation")


@dataclass(frozen=True)
class RecipeScore:
    """One candidate recipe's fit on the held-out part of the training set: its ``val_nll``
    (nats per point) and ``val_acc``, and the constant predictor's ``constant_nll`` and
    ``constant_acc`` on the same part."""

    name: str
    val_nll: float
    constant_nll: float
    val_acc: float
    constant_acc: float

    @property
    def healthy(self) -> bool:
        """A finite validation NLL below the constant predictor's and an accuracy above its."""
        return not self.why_unhealthy()

    def why_unhealthy(self) -> str:
        """One line saying why the fit is not healthy ("" when it is)."""
        if not math.isfinite(self.val_nll):
            return f"{self.name}: validation NLL {self.val_nll} is not finite"
        if self.val_nll >= self.constant_nll:
            return (f"{self.name}: validation NLL {self.val_nll:.6f} is not below the constant "
                    f"predictor's {self.constant_nll:.6f}")
        if not self.val_acc > self.constant_acc:
            return (f"{self.name}: validation accuracy {self.val_acc:.4f} is not above the "
                    f"constant predictor's {self.constant_acc:.4f}")
        return ""


@dataclass(frozen=True)
class RecipeChoice:
    """The chosen recipe, the rule tier that chose it and one line per tier saying why it did
    or did not decide."""

    chosen: str
    tier: str
    reasons: tuple[str, ...]

    def to_dict(self) -> dict:
        """Plain JSON values for a record."""
        return {"chosen": self.chosen, "tier": self.tier, "reasons": list(self.reasons)}


def choose_recipe(scores: Sequence[RecipeScore], *, text: str | None, code: str | None,
                  key: str = "selection") -> RecipeChoice:
    """The recipe the rule (module docstring) takes among ``scores``.

    ``text`` / ``code``: the candidate the paper's text / the authors' script states in full,
    or None when it states none. A named source that is not among the candidates is a
    one-line ConfigError naming ``<key>.text`` / ``<key>.code``; so is a rule that finds no
    healthy candidate at all.
    """
    by_name = {score.name: score for score in scores}
    if len(by_name) != len(scores):
        raise ConfigError(f"{key}.candidates names a recipe twice: {[s.name for s in scores]}")
    reasons = []
    for tier, name in (("text", text), ("code", code)):
        if name is None:
            reasons.append(f"{tier}: states no complete recipe")
            continue
        if name not in by_name:
            raise ConfigError(f"{key}.{tier}={name!r} is not a candidate; candidates: "
                              f"{', '.join(by_name)}")
        score = by_name[name]
        if score.healthy:
            return RecipeChoice(name, tier, (*reasons, f"{tier}: {name}, fit healthy"))
        reasons.append(f"{tier}: {name} not taken, fit unhealthy ({score.why_unhealthy()})")
    healthy = [score for score in scores if score.healthy]
    if not healthy:
        raise ConfigError(f"{key}: no candidate recipe has a healthy fit: "
                          + "; ".join(score.why_unhealthy() for score in scores))
    best = min(healthy, key=lambda score: (score.val_nll, score.name))
    reasons.append(f"validation: {best.name} has the lowest validation NLL "
                   f"({best.val_nll:.4f}) of {len(healthy)} healthy candidates")
    return RecipeChoice(best.name, "validation", tuple(reasons))


SCORE_COLUMNS = ("val_nll", "constant_nll", "val_acc", "constant_acc")


def scores_from_cells(cells: Mapping[tuple[str, str], float]) -> list[RecipeScore]:
    """The candidates' scores from the cells ``(recipe, column)`` of ``SCORE_COLUMNS`` (a
    selection record's, :mod:`bench.tasks.recipe_selection`)."""
    names = sorted({row for row, column in cells if column == "val_nll"})
    return [RecipeScore(name, *(float(cells[(name, column)]) for column in SCORE_COLUMNS))
            for name in names]
