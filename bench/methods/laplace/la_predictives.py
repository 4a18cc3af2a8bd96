"""The class-probability predictives of a fitted laplace-torch classifier by
``(method.pred_type, method.link_approx)``, looked up once per prediction
(:func:`laplace_predictive_rule`):

* ``glm`` with ``probit``, ``bridge`` or ``bridge_norm`` (:func:`closed_form_glm`):
  laplace-torch's closed-form link approximation;
* ``glm`` with ``mc`` (:func:`sampled_glm`): ``n_samples`` draws of the linearised logits per
  input chunk, all chunks from one generator of the seed;
* ``nn`` with ``mc`` (:func:`sampled_nn`): ``n_samples`` networks drawn per chunk without
  gradients, each chunk from a fresh generator of the seed (laplace-torch's NN sampling).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from bench.harness.errors import ConfigError
from bench.harness.rng import make_generator
from bench.methods.laplace.glm_jacobians import per_input_jacobians
from bench.predictive.categorical import Categorical

CLOSED_FORM_LINKS = ("probit", "bridge", "bridge_norm")
LINK_APPROXIMATIONS = ("probit", "mc", "bridge", "bridge_norm")
PRED_TYPES = ("glm", "nn")


def closed_form_glm(la: Any, chunks: Sequence[Tensor], link_approx: str, n_samples: int,
                    seed: int, device: torch.device) -> list[Tensor]:
    """laplace-torch's GLM predictive with the closed-form ``link_approx``, per chunk."""
    return [la(chunk, pred_type="glm", link_approx=link_approx) for chunk in chunks]


def sampled_glm(la: Any, chunks: Sequence[Tensor], link_approx: str, n_samples: int,
                seed: int, device: torch.device) -> list[Tensor]:
    """The mean softmax of ``n_samples`` linearised-logit draws per chunk, one generator."""
    generator = make_generator(seed, str(device))
    return [la.predictive_samples(chunk, pred_type="glm", n_samples=n_samples,
                                  generator=generator).mean(dim=0) for chunk in chunks]


def sampled_nn(la: Any, chunks: Sequence[Tensor], link_approx: str, n_samples: int,
               seed: int, device: torch.device) -> list[Tensor]:
    """The mean softmax of ``n_samples`` sampled networks per chunk (a fresh generator of
    ``seed`` per chunk), without gradients."""
    with torch.no_grad():
        return [la.predictive_samples(chunk, pred_type="nn", n_samples=n_samples,
                                      generator=make_generator(seed, str(device))).mean(dim=0)
                for chunk in chunks]


LaplacePredictive = Callable[[Any, Sequence[Tensor], str, int, int, torch.device], list[Tensor]]
LAPLACE_PREDICTIVES: dict[tuple[str, str], LaplacePredictive] = {
    **{("glm", link): closed_form_glm for link in CLOSED_FORM_LINKS},
    ("glm", "mc"): sampled_glm, ("nn", "mc"): sampled_nn}


def laplace_predictive_rule(pred_type: str, link_approx: str) -> LaplacePredictive:
    """The predictive of ``(pred_type, link_approx)`` (a one-line ConfigError naming both
    keys and the valid pairs for any other)."""
    rule = LAPLACE_PREDICTIVES.get((pred_type, link_approx))
    if rule is None:
        pairs = ", ".join(f"{kind}/{link}" for kind, link in LAPLACE_PREDICTIVES)
        raise ConfigError(f"method.pred_type={pred_type!r} with method.link_approx="
                          f"{link_approx!r} is not valid; choose one of: {pairs}")
    return rule


def laplace_predictive(la: Any, x: Tensor, pred_type: str, link_approx: str, n_samples: int,
                       seed: int, batch_size: int) -> Categorical:
    """The predictive class probabilities of a fitted laplace-torch object ``la`` at ``x``, in
    chunks of ``batch_size`` (module docstring; ``seed`` seeds the sampled predictives). The GLM
    predictives take their Jacobians one input at a time
    (:func:`bench.methods.laplace.glm_jacobians.per_input_jacobians`)."""
    rule = laplace_predictive_rule(pred_type, link_approx)
    reference = next(la.model.parameters())
    device = reference.device
    chunks = x.to(device=device, dtype=reference.dtype).split(batch_size)
    with per_input_jacobians(la):
        probs = rule(la, chunks, link_approx, n_samples, seed, device)
    return Categorical(torch.cat(probs).detach())
