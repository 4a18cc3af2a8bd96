"""Memory of a method's state: the bytes of the tensors it keeps, in the paper's unit.

Laplace Redux Table 5 gives the memory of each method's state in decimal megabytes (10^6
bytes): the WRN-16-4's 2,748,890 float32 parameters are 10.996 MB, printed as 11 (in MiB they
would be 10.49). :func:`stored_bytes` counts what a method really holds
(``method.stored_tensors()``): every storage once, so a view, a detached copy of a parameter or
the same tensor reached under two names is not counted twice. :func:`held_tensors` finds the
tensors an object holds by walking its attributes (used for laplace-torch's fitted objects, so
that whatever a later version keeps is counted too).

A method's headline bytes are what it needs to predict. A method whose objects also keep
tensors alive that its predictions never read (laplace-torch's last-layer Laplace holds the
parameters of the network it was handed, the harness's deep copy, beside its own copy) says so
through ``unread_tensors()`` (:class:`bench.contracts.capabilities.HoldsUnreadTensors`);
Table 5 shows that measurement as a row of its own, named by :func:`as_held_row`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from bench.harness.errors import ConfigError

if TYPE_CHECKING:
    from torch import Tensor

BYTES_PER_MEGABYTE = 1_000_000
# Terms of Laplace Redux's memory complexities: M parameters, H^2 and K^2 (last-layer width and
# number of classes, squared).
ANALYTIC_TERMS = ("M", "H2", "K2")
# The row of a method's memory as its objects hold it, unread tensors included.
AS_HELD_ROW = "{row} (as held, incl. the harness's copy)"


def storage_key(tensor: Tensor) -> tuple[str, int]:
    """The device and address of the storage behind ``tensor`` (equal for views and
    detached copies of one tensor)."""
    return str(tensor.device), tensor.untyped_storage().data_ptr()


def as_held_row(row: str) -> str:
    """The name of ``row``'s as-held row: its stored tensors plus the tensors its objects keep
    alive without reading them (e.g. ``"LA (as held, incl. the harness's copy)"``)."""
    return AS_HELD_ROW.format(row=row)


def stored_bytes(tensors: Mapping[str, Tensor]) -> int:
    """Bytes of the storages behind ``tensors``, each storage counted once.

    For a tensor that owns its storage this is ``numel * element_size``; tensors sharing a
    storage (views, ``detach()``, a state_dict entry and its parameter) count it once, and a
    view of part of a storage counts the whole storage, which is what stays in memory.
    """
    sizes = {storage_key(t): t.untyped_storage().nbytes() for t in tensors.values()}
    return sum(sizes.values())


def megabytes(n_bytes: int) -> float:
    """``n_bytes`` in decimal megabytes (10^6 bytes), the unit of Laplace Redux Table 5."""
    return n_bytes / BYTES_PER_MEGABYTE


def analytic_count(coefficients: Mapping[str, float], n_parameters: int, hidden: int,
                   classes: int) -> float:
    """Values counted by a complexity ``c_M M + c_H2 H^2 + c_K2 K^2`` given as ``{term: c}``
    (e.g. LA's ``{"M": 1, "H2": 1, "K2": 1}``), with ``M = n_parameters``, ``H = hidden``,
    ``K = classes``; an unknown term is a one-line ConfigError."""
    for term in coefficients:
        if term not in ANALYTIC_TERMS:
            raise ConfigError(f"memory.analytic term {term!r} is not valid; choose one of: "
                              f"{', '.join(ANALYTIC_TERMS)}")
    terms = {"M": n_parameters, "H2": hidden ** 2, "K2": classes ** 2}
    return sum(float(c) * terms[term] for term, c in coefficients.items())


def held_tensors(root: Any, prefix: str = "", packages: Collection[str] = (),
                 skip: Collection[str] = ()) -> dict[str, Tensor]:
    """Every tensor reachable from ``root``, named by its attribute path from ``prefix``.

    The walk enters tensors, ``nn.Module`` (its ``state_dict``: parameters and buffers),
    mappings, lists and tuples, and the attributes of objects whose class is defined in one of
    ``packages`` (e.g. ``("laplace",)``: the Laplace object, its Kronecker factors and their
    eigendecompositions); attributes named in ``skip`` are not entered. A tensor reached twice
    (the same storage, offset, shape, stride and dtype) is listed once, under its first path.
    """
    from torch import Tensor, nn

    found: dict[str, Tensor] = {}
    seen_tensors: set[tuple] = set()
    seen_objects: dict[int, Any] = {}  # id -> object, kept alive so no id is reused

    def visit(value: Any, path: str) -> None:
        if isinstance(value, Tensor):
            key = (*storage_key(value), value.storage_offset(), tuple(value.shape),
                   value.stride(), value.dtype)
            if key not in seen_tensors:
                seen_tensors.add(key)
                found[path] = value
            return
        if id(value) in seen_objects:
            return
        seen_objects[id(value)] = value
        if isinstance(value, nn.Module):
            children = value.state_dict().items()
        elif isinstance(value, Mapping):
            children = value.items()
        elif isinstance(value, list | tuple):
            children = enumerate(value)
        elif type(value).__module__.split(".")[0] in packages and hasattr(value, "__dict__"):
            children = ((name, v) for name, v in vars(value).items() if name not in skip)
        else:
            return
        for name, child in children:
            visit(child, f"{path}.{name}" if path else str(name))

    visit(root, prefix)
    return found
