"""One data root for the smoke runs of every implemented artifact.

Each data set (and each split of an image set) is linked from a source root when the source
holds its files (the real data: ``$BENCH_DATA_DIR`` or the shared data), and otherwise written
as generated files in the real format by the writers the other tests use
(``tests/unit/datasets/image_fixtures.py``, ``tests/wilds_fixtures.py``, the UCI writer of
``tests/unit/datasets/test_uci.py``). Links point at the source files, which are never written
to; generated files live beside the root. ``origins`` says which data set came from where.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.datasets.vision import find_image_files

# The in-distribution test sets of the Laplace Redux tasks are split 2k / 8k (random_split),
# which needs more than 2,000 images; every generated MNIST-like test set has the real size.
TEST_IMAGES = 10_000
# Training images of the generated sets the smoke networks train on (the smoke recipes take
# at most a few hundred), and of those only read as OOD sets.
TRAIN_IMAGES = 600
OOD_TRAIN_IMAGES = 64
# CIFAR-shaped sets: the sizes the Table 4 and CIFAR-10-C integration tests run the smoke
# scale on (CIFAR: per batch file, so 60 training and 12 test images).
CIFAR_PER_FILE = 12
SVHN_IMAGES = 12
LSUN_IMAGES = 6
CIFAR10_C_PER_SEVERITY = 12

# Image data sets (names of bench.datasets.vision.IMAGE_SOURCES) and the splits the smoke
# runs read. EMNIST-digits is an optional OOD set: generated, its columns are exercised too.
IMAGE_NEEDS: dict[str, tuple[str, ...]] = {
    "mnist": ("train", "test"),
    "fashion_mnist": ("train", "test"),
    "kmnist": ("train", "test"),
    "emnist_digits_torchvision": ("test",),
    "cifar10": ("train", "test"),
    "cifar100": ("train", "test"),
    "svhn": ("train", "test"),
    "lsun": ("test",),
}
LINKED, GENERATED = "linked from {}", "generated"


def _rng(name: str) -> np.random.Generator:
    """A generator of its own per data set, so one set's files do not depend on the others'."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def _image_writers() -> dict[str, Callable[[Path], object]]:
    from tests.unit.datasets import image_fixtures as images

    return {
        "mnist": lambda root: images.write_mnist_like(
            root / "mnist", _rng("mnist"), sizes=(TRAIN_IMAGES, TEST_IMAGES)),
        "fashion_mnist": lambda root: images.write_mnist_like(
            root / "fashion_mnist", _rng("fashion_mnist"), sizes=(TRAIN_IMAGES, TEST_IMAGES)),
        "kmnist": lambda root: images.write_kmnist_npz(
            root / "kmnist", _rng("kmnist"), sizes=(OOD_TRAIN_IMAGES, TEST_IMAGES)),
        "emnist_digits_torchvision": lambda root: images.write_mnist_like(
            root / "emnist", _rng("emnist"), prefixes=("emnist-digits-train", "emnist-digits-test"),
            sizes=(OOD_TRAIN_IMAGES, TEST_IMAGES)),
        "cifar10": lambda root: images.write_cifar(
            root / "cifar10" / "cifar-10-batches-py", _rng("cifar10"), per_file=CIFAR_PER_FILE),
        "cifar100": lambda root: images.write_cifar(
            root / "cifar100" / "cifar-100-python", _rng("cifar100"), hundred=True,
            per_file=CIFAR_PER_FILE),
        "svhn": lambda root: images.write_svhn(root / "svhn", _rng("svhn"), n=SVHN_IMAGES),
        "lsun": lambda root: images.write_lsun_folder(
            root / "lsun" / "classroom_val", _rng("lsun"), n=LSUN_IMAGES),
    }


@dataclass(frozen=True)
class DataRoot:
    """A built data root: where the data and the WILDS checkpoints are, and each data set's
    origin (``linked from <source>`` or ``generated``)."""

    data_dir: Path
    wilds_checkpoints: Path
    origins: dict[str, str] = field(default_factory=dict)

    def environment(self) -> dict[str, str]:
        """The variables that point a ``bench.reproduce`` process at this root."""
        return {"BENCH_DATA_DIR": str(self.data_dir),
                "BENCH_WILDS_CHECKPOINTS": str(self.wilds_checkpoints)}


def _link(path: Path, source_root: Path, target_root: Path) -> None:
    """Link ``path`` (under ``source_root``) at the same relative place under ``target_root``."""
    target = target_root / path.relative_to(source_root)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_symlink() and not target.exists():
        target.symlink_to(path.resolve())


def _link_image_split(name: str, split: str, source: Path | None, generated: Path,
                      data: Path, write: Callable[[Path], object], **request) -> str:
    """Link one split of an image set from ``source`` if it holds it, else from ``generated``
    (written by ``write`` on first need); returns the split's origin."""
    if source is not None:
        found = find_image_files(name, split, source, **request)
        if found is not None:
            for path in found:
                _link(path, source, data)
            return LINKED.format(source)
    found = find_image_files(name, split, generated, **request)
    if found is None:
        write(generated)
        found = find_image_files(name, split, generated, **request)
    if found is None:
        raise RuntimeError(f"the writer of {name!r} left no {split} split in {generated}")
    for path in found:
        _link(path, generated, data)
    return GENERATED


def smoke_corruptions() -> list[str]:
    """The CIFAR-10-C corruptions the smoke scale of Figure 9's CIFAR-10-C panel reads."""
    from bench.harness.finished_jobs import apply_scale_overrides
    from tests.helpers import compose_config

    overrides = ["experiment=laplace_redux/figure-9-cifar10c", "scale=smoke"]
    cfg = apply_scale_overrides(compose_config(overrides), overrides)
    return [str(c) for c in cfg.shift.corruptions]


def smoke_wilds_seeds() -> list[int]:
    """The model seeds of Figure 10's smoke jobs (its ``seeds_for``), whose checkpoints exist."""
    from bench.cli.reproduce_command import sweep_overrides

    seeds = {int(seed) for command in sweep_overrides("laplace_redux/figure-10", "smoke", [])
             for item in command if item.startswith("seed=")
             for seed in item.split("=", 1)[1].split(",")}
    return sorted(seeds)


def _link_images(source: Path | None, generated: Path, data: Path) -> dict[str, str]:
    from tests.unit.datasets.image_fixtures import write_cifar10_c

    writers, origins = _image_writers(), {}
    for name, splits in IMAGE_NEEDS.items():
        for split in splits:
            origins[f"{name}/{split}"] = _link_image_split(name, split, source, generated, data,
                                                           writers[name])
    for corruption in smoke_corruptions():
        origins[f"cifar10_c/{corruption}"] = _link_image_split(
            "cifar10_c", "test", source, generated, data,
            lambda root, c=corruption: write_cifar10_c(root / "cifar10_c", c,
                                                       CIFAR10_C_PER_SEVERITY),
            corruption=corruption, severity=1)
    return origins


def _link_uci(source: Path | None, generated: Path, data: Path) -> dict[str, str]:
    """Every UCI data set's folder: the source's when it holds all its raw files, else the
    generated one (the Concrete .xls cannot be generated: it is absent then, and no smoke
    job reads it)."""
    from bench.datasets.uci_raw import UCI_SOURCES
    from tests.unit.datasets.test_uci import _write_fixtures

    origins = {}
    for name, uci in UCI_SOURCES.items():
        root = source
        if root is None or not all((uci.directory(root) / f).is_file() for f in uci.files):
            root = generated
            if not (generated / "uci").exists():
                _write_fixtures(generated)
            if not all((uci.directory(root) / f).is_file() for f in uci.files):
                origins[f"uci/{name}"] = "absent (no real copy, and it cannot be generated)"
                continue
        for path in sorted(uci.directory(root).iterdir()):
            if path.is_file():
                _link(path, root, data)
        origins[f"uci/{name}"] = GENERATED if root == generated else LINKED.format(root)
    return origins


def _link_wilds(source: Path | None, generated: Path, data: Path, checkpoints: Path
                ) -> dict[str, str]:
    """The five WILDS folders (linked entry by entry from the source when complete, else
    generated), and generated checkpoints of the stand-in networks for the smoke seeds: the
    smoke scale runs the stand-ins (``dataset.use_stand_in``), which the released checkpoints
    do not fit, so those are never linked."""
    from bench.datasets.wilds_layout import data_folder, missing_files
    from tests.wilds_fixtures import VERSIONS, WRITERS, write_checkpoints

    origins, seeds = {}, smoke_wilds_seeds()
    for name, write in WRITERS.items():
        version = VERSIONS[name]
        root = source
        if root is None or missing_files(root, name, version):
            root = generated
            if missing_files(root, name, version):
                write(generated, _rng(name))
        for path in sorted(data_folder(root, name, version).iterdir()):
            _link(path, root, data)
        origins[f"wilds/{name}"] = GENERATED if root == generated else LINKED.format(root)
        for seed in seeds:
            write_checkpoints(checkpoints, name, seed, "ABCDE"[seed])
    return origins


def build_data_root(folder: Path, source: Path | None) -> DataRoot:
    """Build the data root under ``folder`` (``data/`` of links, ``generated/``,
    ``wilds_checkpoints/``) from the real files under ``source`` (None: generate all), and
    write the origins to ``folder/origins.json``."""
    folder = Path(folder)
    data, generated = folder / "data", folder / "generated"
    checkpoints = folder / "wilds_checkpoints"
    for path in (data, generated, checkpoints):
        path.mkdir(parents=True, exist_ok=True)
    source = Path(source) if source is not None and Path(source).is_dir() else None
    origins = {**_link_images(source, generated, data), **_link_uci(source, generated, data),
               **_link_wilds(source, generated, data, checkpoints)}
    (folder / "origins.json").write_text(json.dumps(origins, indent=1, sort_keys=True) + "\n")
    return DataRoot(data, checkpoints, origins)
