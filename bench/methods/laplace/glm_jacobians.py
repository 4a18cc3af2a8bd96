"""laplace-torch's GLM predictive with per-input Jacobians.

laplace-torch 0.3 forms the Jacobians of its GLM predictive (``la(x, pred_type="glm")`` and
the GLM samples) with ``torch.func.jacrev`` of the whole batch's logits
(``CurvatureInterface.jacobians``, which the ASDL backends and ours call as
``functorch_jacobians``): each of the ``n * C`` backward rows runs through all ``n`` inputs.
:func:`per_input_jacobians` lets such a backend take them one input at a time
(:func:`bench.curvature.jacobians.logit_jacobians`), the same numbers for ``1 / n`` of the
work, while a prediction runs. Backends with Jacobians of their own (BackPack's per-output
batch gradients) and a network in train mode (where BatchNorm couples the inputs) keep the
library's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from torch import Tensor

from bench.curvature.jacobians import logit_jacobians

BATCH_JACOBIAN_NAMES = ("jacobians", "functorch_jacobians")


def batch_jacobian_names(backend: Any) -> list[str]:
    """The Jacobian methods of ``backend`` that are laplace-torch's whole-batch ``jacrev``."""
    from laplace.curvature.curvature import CurvatureInterface  # imported where used

    return [name for name in BATCH_JACOBIAN_NAMES
            if getattr(type(backend), name, None) is CurvatureInterface.jacobians]


def _per_input(backend: Any, library: Any):
    def jacobians(x: Any, enable_backprop: bool = False) -> tuple[Tensor, Tensor]:
        if not isinstance(x, Tensor) or backend.model.training:
            return library(x, enable_backprop=enable_backprop)
        jacobian, f = logit_jacobians(backend.model, backend.params_dict, backend.buffers_dict, x)
        if backend.subnetwork_indices is not None:
            jacobian = jacobian[:, :, backend.subnetwork_indices]
        return (jacobian, f) if enable_backprop else (jacobian.detach(), f.detach())
    return jacobians


@contextmanager
def per_input_jacobians(la: Any) -> Iterator[None]:
    """While inside, the GLM predictive of the fitted laplace-torch object ``la`` forms its
    Jacobians one input at a time (module docstring); afterwards its backend is as before."""
    backend = getattr(la, "backend", None)
    names = batch_jacobian_names(backend) if backend is not None else []
    for name in names:
        setattr(backend, name, _per_input(backend, getattr(backend, name)))
    try:
        yield
    finally:
        for name in names:
            backend.__dict__.pop(name, None)
