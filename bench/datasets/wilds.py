"""A WILDS benchmark as Laplace Redux Figure 10 uses it: data splits and official checkpoints.

A dataset node (``conf/dataset/wilds_<name>.yaml``) names one WILDS data set, its network,
the checkpoints of each training algorithm, the split roles with the authors' fallbacks and
the Laplace settings of the authors' configs. :meth:`WildsData.for_seed` binds it to one model
seed (PovertyMap: fold A-E for seeds 0-4) and gives :class:`WildsJob`, what the methods read.

Data come from the ``wilds`` package (``get_dataset(..., root_dir=<data root>)``) when it is
installed, else from the files themselves (:mod:`bench.datasets.wilds_layout`), both from
``<data root>/<name>_v<version>/`` (``dataset.reader``: auto | wilds | files). Split roles
(``dataset.splits``: role -> names tried in turn; a name that is a role means that role's
split) follow the authors' code (reproduction notes section 6):

* ``train``: ``train`` (the last-layer Hessian);
* ``validation``: ``id_val``, else ``train`` (temperature, noise scale);
* ``id_test``: ``id_test``, else the validation split;
* ``ood_test``: ``test``.

Checkpoints are files under ``dataset.checkpoint_dir`` (``$BENCH_WILDS_CHECKPOINTS``), named
by patterns with ``{seed}`` and ``{fold}``, e.g. ``camelyon17/camelyon17_erm_densenet121_seed
{seed}.pth``: the authors' layout ``<models root>/<data set>/<model name>.pth``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from bench.datasets.data_root import data_root
from bench.datasets.wilds_inputs import input_transform, read_input
from bench.datasets.wilds_layout import (
    INPUT_KINDS,
    SPLITS,
    WildsTable,
    data_folder,
    missing_files,
    read_table,
)
from bench.harness.errors import ConfigError, require_choice, require_positive
from bench.harness.hashing import file_sha256
from bench.models.wilds_networks import FeatureNetwork, load_checkpoint

WILDS_NAMES = tuple(sorted(SPLITS))
READERS = ("auto", "wilds", "files")
TASKS = ("classification", "regression")
ROLES = ("train", "validation", "id_test", "ood_test")
POVERTY_FOLDS = "ABCDE"
CHECKPOINT_ENV = "BENCH_WILDS_CHECKPOINTS"
SHOWN_DATA_ROOT = "$BENCH_DATA_DIR"


class WildsDataMissingError(ConfigError, FileNotFoundError):
    """The data set's files are not under the data root: exit code 2, no record."""


class CheckpointMissingError(ConfigError, FileNotFoundError):
    """A checkpoint file the job needs is absent: exit code 2, no record."""


def resolve_roles(available: tuple[str, ...] | list[str], chains: dict[str, list[str]],
                  name: str) -> dict[str, str]:
    """Role -> split name: the first name of each role's chain that the data set has (a name
    that is an earlier role stands for that role's split). ConfigError naming the key and the
    data set's splits when none is there."""
    resolved: dict[str, str] = {}
    for role in ROLES:
        chain = chains.get(role)
        if not chain:
            raise ConfigError(f"dataset.splits.{role} is missing; give the split names to try, "
                              f"e.g. [{available[0]}]")
        for candidate in chain:
            split = resolved.get(str(candidate), str(candidate))
            if split in available:
                resolved[role] = split
                break
        else:
            raise ConfigError(f"dataset.splits.{role}={list(chain)} names no split of {name}; "
                              f"choose from: {', '.join(available)}")
    return resolved


class TableSplit(Dataset):
    """One split of a :class:`WildsTable`: ``(input tensor, target)`` per row."""

    def __init__(self, table: WildsTable, split: str, transform) -> None:
        self.table, self.rows, self.transform = table, table.rows(split), transform

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        row = int(self.rows[index])
        stored = read_input(self.table.folder, self.table.input_kind, self.table.inputs[row])
        return self.transform(stored), self.table.targets[row]


class PackageSplit(Dataset):
    """A ``wilds`` subset without its metadata: ``(input tensor, target)``."""

    def __init__(self, subset: Any) -> None:
        self.subset = subset

    def __len__(self) -> int:
        return len(self.subset)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        x, y, _ = self.subset[index]
        return x, torch.as_tensor(y).reshape(())


@dataclass
class WildsData:
    """Dataset node of one WILDS benchmark (module docstring); checks its files when built."""

    name: str
    wilds_name: str
    version: str
    task: str
    n_outputs: int
    n_seeds: int
    splits: dict[str, list[str]]
    network: dict[str, Any]
    checkpoints: dict[str, str]
    laplace_prior_precision: float
    laplace_hessian_structure: str
    checkpoint_dir: str | None = None
    text: dict[str, Any] | None = None
    stand_in: dict[str, Any] | None = None
    use_stand_in: bool = False
    seed: int | None = None
    reader: str = "auto"
    root: str | None = None
    batch_size: int = 64
    num_workers: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        require_choice("dataset.wilds_name", self.wilds_name, WILDS_NAMES)
        require_choice("dataset.task", self.task, TASKS)
        require_choice("dataset.reader", self.reader, READERS)
        require_choice("dataset.laplace_hessian_structure", self.laplace_hessian_structure,
                       ("full", "kron", "diag"))
        require_positive("dataset.laplace_prior_precision", self.laplace_prior_precision)
        for key in ("n_outputs", "n_seeds", "batch_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"dataset.{key}={value!r} is not valid; it must be a "
                                  "positive integer")
        if not self.checkpoints or "ERM" not in self.checkpoints:
            raise ConfigError("dataset.checkpoints must name the ERM checkpoint (the MAP "
                              "network) and the ensemble members")
        if self.use_stand_in and not (self.stand_in or {}).get("network"):
            raise ConfigError("dataset.use_stand_in=true needs dataset.stand_in.network")
        resolve_roles(SPLITS[self.wilds_name], self.splits, self.wilds_name)
        missing = missing_files(self.data_root, self.wilds_name, self.version)
        if missing:
            raise WildsDataMissingError(self.missing_message(missing))
        if self.seed is not None:
            self.check_seed(int(self.seed))

    @property
    def network_spec(self) -> dict[str, Any]:
        """``{architecture, options}`` of the network the checkpoints hold: the benchmark's
        own, or the stand-in's when ``use_stand_in`` (tests on generated checkpoints)."""
        return dict(self.stand_in["network"]) if self.use_stand_in else dict(self.network)

    @property
    def text_spec(self) -> dict[str, Any] | None:
        """The tokenizer settings (the stand-in's when ``use_stand_in`` and it names one)."""
        if self.use_stand_in and (self.stand_in or {}).get("text"):
            return dict(self.stand_in["text"])
        return None if self.text is None else dict(self.text)

    @property
    def data_root(self) -> Path:
        """``dataset.root`` or the harness data root (``$BENCH_DATA_DIR``)."""
        return Path(self.root) if self.root else data_root()

    @property
    def folder(self) -> Path:
        """``<data root>/<name>_v<version>``."""
        return data_folder(self.data_root, self.wilds_name, self.version)

    def missing_message(self, missing: list[str]) -> str:
        """One line naming the absent files under ``$BENCH_DATA_DIR``."""
        return (f"WILDS data set '{self.wilds_name}' v{self.version} not found: put "
                f"{', '.join(missing)} in {SHOWN_DATA_ROOT}/ (data root from "
                f"{SHOWN_DATA_ROOT}, default ./data; `python -m wilds.download_datasets "
                f"--root_dir <data root> --datasets {self.wilds_name}` downloads it)")

    def fold(self, seed: int) -> str:
        """PovertyMap's country fold of a model seed (A-E for 0-4); "" for the others."""
        return POVERTY_FOLDS[seed] if self.wilds_name == "poverty" else ""

    def check_seed(self, seed: int) -> None:
        """ConfigError unless ``seed`` is one of the benchmark's model seeds 0..n_seeds-1."""
        if not 0 <= seed < self.n_seeds:
            raise ConfigError(f"seed={seed} is not valid for {self.name}; choose one of: "
                              f"{', '.join(str(s) for s in range(self.n_seeds))} (the released "
                              "checkpoints' seeds)")

    def checkpoint_file(self, key: str, seed: int) -> str:
        """The checkpoint of ``key`` for ``seed``, relative to the checkpoint folder."""
        pattern = require_choice("dataset.checkpoints", key, list(self.checkpoints))
        return str(self.checkpoints[pattern]).format(seed=seed, fold=self.fold(seed))

    def for_seed(self, seed: int) -> WildsJob:
        """The data and checkpoints of one model seed."""
        seed = int(seed)
        self.check_seed(seed)
        return WildsJob(self, seed)


@dataclass
class WildsJob:
    """One model seed of a :class:`WildsData`: split roles, loaders, targets, networks."""

    data: WildsData
    seed: int
    networks: dict[str, FeatureNetwork] = field(default_factory=dict)

    @property
    def fold(self) -> str:
        """PovertyMap's fold of this seed ("" elsewhere)."""
        return self.data.fold(self.seed)

    @cached_property
    def source(self) -> tuple[str, Any]:
        """``("wilds", dataset)`` or ``("files", WildsTable)``, as ``dataset.reader`` says."""
        reader = self.data.reader
        if reader in ("auto", "wilds"):
            try:
                package = importlib.import_module("wilds")
            except ImportError:
                if reader == "wilds":
                    raise ConfigError("dataset.reader='wilds' needs the wilds package (pip "
                                      "install -e '.[wilds]'); choose one of: auto, "
                                      "files") from None
            else:
                options = {"fold": self.fold} if self.data.wilds_name == "poverty" else {}
                dataset = package.get_dataset(dataset=self.data.wilds_name,
                                              version=self.data.version,
                                              root_dir=str(self.data.data_root),
                                              download=False, **options)
                return "wilds", dataset
        return "files", read_table(self.data.data_root, self.data.wilds_name,
                                   self.data.version, self.fold or "A")

    @property
    def reader(self) -> str:
        """Which reader supplied the data: ``wilds <version>`` or ``files``."""
        kind, dataset = self.source
        if kind == "files":
            return "files"
        return f"wilds {getattr(importlib.import_module('wilds'), '__version__', '?')}"

    @cached_property
    def available_splits(self) -> tuple[str, ...]:
        """The data set's split names (WILDS' ``split_dict``)."""
        kind, dataset = self.source
        return tuple(dataset.split_dict) if kind == "wilds" else SPLITS[self.data.wilds_name]

    @cached_property
    def roles(self) -> dict[str, str]:
        """Role -> split after the fallbacks (module docstring)."""
        return resolve_roles(self.available_splits, self.data.splits, self.data.wilds_name)

    @cached_property
    def transform(self):
        """Stored input -> network input tensor."""
        return input_transform(INPUT_KINDS[self.data.wilds_name], self.data.text_spec)

    def split_dataset(self, role: str) -> Dataset:
        """The split a role resolves to, as ``(input, target)`` pairs."""
        split = self.roles[require_choice("split role", role, ROLES)]
        kind, dataset = self.source
        if kind == "wilds":
            found: Dataset = PackageSplit(dataset.get_subset(split, transform=self.transform))
        else:
            found = TableSplit(dataset, split, self.transform)
        if len(found) == 0:
            raise ConfigError(f"dataset.splits.{role}: split {split!r} of {self.data.name} "
                              "has no rows")
        return found

    def loader(self, role: str) -> DataLoader:
        """An unshuffled loader over a role's split (``dataset.batch_size``)."""
        return DataLoader(self.split_dataset(role), batch_size=self.data.batch_size,
                          shuffle=False, num_workers=self.data.num_workers)

    def targets(self, role: str) -> Tensor:
        """The targets of a role's split, in loader order (``long`` or ``float32``)."""
        split = self.roles[require_choice("split role", role, ROLES)]
        kind, dataset = self.source
        if kind == "wilds":
            values = dataset.y_array[dataset.split_array == dataset.split_dict[split]]
            values = values.reshape(-1)
        else:
            values = dataset.targets[torch.as_tensor(dataset.rows(split))]
        return values.float() if self.data.task == "regression" else values.long()

    def checkpoint_path(self, key: str) -> Path:
        """The file of checkpoint ``key`` for this seed; CheckpointMissingError when absent."""
        relative = self.data.checkpoint_file(key, self.seed)
        folder = self.data.checkpoint_dir
        if not folder:
            raise CheckpointMissingError(
                f"dataset.checkpoint_dir is not set: put the WILDS checkpoint {relative} under "
                f"a folder named by ${CHECKPOINT_ENV} (or dataset.checkpoint_dir=<path>)")
        path = Path(folder) / relative
        if not path.is_file():
            raise CheckpointMissingError(f"WILDS checkpoint {key} of seed {self.seed} not "
                                         f"found: put {relative} in ${CHECKPOINT_ENV}/ "
                                         f"(dataset.checkpoint_dir={folder})")
        return path

    def require_checkpoints(self, keys: list[str]) -> None:
        """Stop before any work when one of ``keys``' checkpoint files is absent."""
        for key in keys:
            self.checkpoint_path(key)

    def network(self, key: str) -> FeatureNetwork:
        """The network of checkpoint ``key`` (loaded once per job), eval mode, on the CPU."""
        if key not in self.networks:
            spec = self.data.network_spec
            self.networks[key] = load_checkpoint(self.checkpoint_path(key),
                                                 str(spec["architecture"]), self.data.n_outputs,
                                                 dict(spec.get("options") or {}))
        return self.networks[key]

    def provenance(self, keys: list[str]) -> dict[str, Any]:
        """What the record keeps about the data and checkpoints of a job."""
        return {"reader": self.reader, "splits": dict(self.roles), "fold": self.fold,
                "network": self.data.network_spec["architecture"],
                "stand_in": bool(self.data.use_stand_in),
                "split_sizes": {role: len(self.split_dataset(role)) for role in ROLES},
                "checkpoints": {key: {"file": self.data.checkpoint_file(key, self.seed),
                                      "sha256": file_sha256(self.checkpoint_path(key))}
                                for key in keys}}
