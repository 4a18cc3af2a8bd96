"""Which float arithmetic this machine does: a short name for the way it rounds.

The same float program gives bit-different results on CPUs whose vector units (or whose
BLAS and convolution kernels, chosen at run time from the CPU's instruction sets) sum in
another order. Most goldens agree across such machines to their tolerance; a job that trains
for many stochastic steps amplifies the last-digit difference into a visibly different network,
so its golden holds per machine arithmetic (``tests/golden/<scale>/arithmetic/<name>/``).

:func:`arithmetic_name` runs the kinds of kernels the trainings run (matrix products, a
convolution (LeNet's second layer) forward and backward, elementwise transcendental
functions, long sums; in float32, and matrix products and sums in float64) on fixed inputs in
one thread and names their exact bits: two machines with one name round
these the same way.
"""

from __future__ import annotations

import functools
import hashlib

import torch
import torch.nn.functional as F


def _probe_results() -> list[torch.Tensor]:
    """The probe computations' outputs (fixed inputs; float32 as the trainings, float64 as the
    corrected protocols)."""
    generator = torch.Generator().manual_seed(20261128)

    def normal(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=dtype)

    left, right = normal(67, 129), normal(129, 33)
    image = normal(32, 6, 12, 12).requires_grad_(True)
    kernel = normal(16, 6, 5, 5).requires_grad_(True)
    weight = normal(10, 16 * 8 * 8).requires_grad_(True)
    features = F.relu(F.conv2d(image, kernel)).flatten(1)
    loss = F.cross_entropy(features @ weight.T, torch.arange(32) % 10)
    grads = torch.autograd.grad(loss, (image, kernel, weight))
    vector = normal(10007)
    doubles = normal(53, 97, dtype=torch.float64)
    return [left @ right, features, loss, *grads, vector.exp(), vector.tanh(),
            vector.abs().log1p(), vector.sum(), vector.square().cumsum(0),
            doubles @ doubles.T, doubles.sum(0), doubles.exp().log1p()]


@functools.cache
def arithmetic_name() -> str:
    """A short name of this machine's float arithmetic (``"cpu-"`` and 10 hex digits of a
    digest of the probe results' bits, computed in one thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results = _probe_results()
    finally:
        torch.set_num_threads(threads)
    digest = hashlib.sha256()
    for tensor in results:
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return "cpu-" + digest.hexdigest()[:10]
