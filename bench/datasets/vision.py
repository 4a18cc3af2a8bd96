"""Image classification data sets by name, read offline first: :func:`load_images`.

Images come back as ``uint8 [N, C, H, W]`` (C = 1 for the MNIST family, 3 for CIFAR / SVHN)
and labels as ``int64 [N]``, cached per process (treat them as read-only; convert with
:func:`bench.datasets.image_transforms.to_float`). Order of preference:

1. files under the data root ``<root>`` (``$BENCH_DATA_DIR``, default ``./data``), in our
   folder or in torchvision's (so existing torchvision downloads are read as they are);
2. torchvision's downloader, which writes into ``<root>`` in its own layout;
3. else :class:`ImageDataMissingError`: one line naming the missing files and their folder.

Where the files go (IDX files may be ``.gz`` or unpacked):

=============== ======================================== ==================================
name            our folder: files                        torchvision's folder
=============== ======================================== ==================================
mnist           ``mnist/``: ``{train,t10k}-images-idx3-  ``MNIST/raw/``
                ubyte.gz``, ``{train,t10k}-labels-idx1-
                ubyte.gz``
fashion_mnist   ``fashion_mnist/``: as mnist             ``FashionMNIST/raw/``
kmnist          ``kmnist/``: ``kmnist-{train,test}-      ``KMNIST/raw/`` (IDX names)
                {imgs,labels}.npz`` or the IDX names
emnist_digits   ``emnist/``: ``emnist-digits-{train,     ``EMNIST/raw/``
                test}-{images-idx3,labels-idx1}-ubyte``
cifar10         ``cifar10/cifar-10-batches-py/``:        ``cifar-10-batches-py/``
                ``data_batch_1..5``, ``test_batch``
cifar100        ``cifar100/cifar-100-python/``:          ``cifar-100-python/``
                ``train``, ``test``
svhn            ``svhn/``: ``{train,test}_32x32.mat``    ``<root>`` itself
cifar10_c       ``cifar10_c/``: ``<corruption>.npy``,    ``CIFAR-10-C/`` (the tar's folder;
                ``labels.npy``                           no downloader)
lsun            ``lsun/classroom_val/``: the 300 images  none (torchvision reads the LMDB
                of LSUN's ``classroom_val`` LMDB         ``classroom_val_lmdb/``, which
                exported as files (``.webp``, ``.jpg``,  needs the ``lmdb`` package; not a
                ``.png``; any depth), test split only    dependency here)
=============== ======================================== ==================================

The shared offline copies (``shared/data``) follow the first three rows. EMNIST is stored
transposed relative to MNIST and torchvision returns it so (Laplace Redux used it that way):
``emnist_digits`` is upright like MNIST, ``emnist_digits_torchvision`` is torchvision's
orientation. ``cifar10_c`` severity 0 is the clean CIFAR-10 test set. ``lsun`` is Laplace
Redux's LSUN OOD set: LSUN's classroom validation images, resized to 32 x 32 as its loader
does (:func:`bench.datasets.image_files.read_image_folder`); the LMDB that LSUN distributes is
exported to files first with LSUN's own tools (``python data.py export classroom_val_lmdb
--out_dir <root>/lsun/classroom_val --flat``), since reading LMDB needs a package (``lmdb``)
this project does not depend on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from bench.datasets import image_files
from bench.datasets.data_files import note_read
from bench.datasets.data_root import DATA_DIR_ENV, data_root
from bench.datasets.image_transforms import permute_pixels, pixel_permutation, rotate_images
from bench.harness.errors import ConfigError, require_choice

SPLITS = ("train", "test")
# Hendrycks & Dietterich's CIFAR-10-C: 15 benchmark corruptions plus 4 extra ones.
CIFAR10_C_CORRUPTIONS = (
    "brightness", "contrast", "defocus_blur", "elastic_transform", "fog", "frost",
    "gaussian_blur", "gaussian_noise", "glass_blur", "impulse_noise", "jpeg_compression",
    "motion_blur", "pixelate", "saturate", "shot_noise", "snow", "spatter", "speckle_noise",
    "zoom_blur",
)
CIFAR10_C_SEVERITIES = tuple(range(6))


class ImageDataMissingError(ConfigError, FileNotFoundError):
    """No local files and no successful download: the harness exits with code 2, no record."""


@dataclass(frozen=True)
class ImageSet:
    """One split of an image data set: ``images uint8 [N, C, H, W]``, ``labels int64 [N]``."""

    images: Tensor
    labels: Tensor
    name: str
    split: str
    num_classes: int
    source: str = ""

    def __len__(self) -> int:
        return int(self.labels.shape[0])


Reader = Callable[[list[Path]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ImageSource:
    """Where one data set's files live and how they are read.

    ``files[split]`` lists the required files, each as a tuple of accepted names (first = the
    name the error shows); ``folders`` are tried in order (ours first, then torchvision's);
    ``shape`` is one image's ``(C, H, W)``; ``download(root, split)`` runs torchvision's
    downloader, None where there is none; ``folder_entries``: the required entries are folders
    (of image files), not files; ``hint`` is added to the missing-files message.
    """

    name: str
    folders: tuple[str, ...]
    files: dict[str, tuple[tuple[str, ...], ...]]
    read: Reader
    sizes: dict[str, int]
    num_classes: int
    shape: tuple[int, int, int]
    download: Callable[[Path, str], None] | None = field(default=None, compare=False)
    folder_entries: bool = False
    hint: str = ""

    def holds(self, path: Path) -> bool:
        """Whether ``path`` is a present entry of this source (a file, or a folder)."""
        return path.is_dir() if self.folder_entries else path.is_file()


def _idx(stem: str) -> tuple[str, ...]:
    return (f"{stem}.gz", stem)


def _mnist_files(train: str = "train", test: str = "t10k") -> dict:
    return {split: (_idx(f"{prefix}-images-idx3-ubyte"), _idx(f"{prefix}-labels-idx1-ubyte"))
            for split, prefix in (("train", train), ("test", test))}


def _kmnist_files() -> dict:
    idx = _mnist_files()
    return {split: ((f"kmnist-{split}-imgs.npz", *idx[split][0]),
                    (f"kmnist-{split}-labels.npz", *idx[split][1])) for split in SPLITS}


def _read_pair(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    return image_files.read_image_label_pair(paths[0], paths[1])


def _read_pair_upright(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    return image_files.read_image_label_pair(paths[0], paths[1], transposed=True)


def _read_cifar10(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    return image_files.read_cifar_batches(paths, "labels")


def _read_cifar100(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    return image_files.read_cifar_batches(paths, "fine_labels")


def _read_svhn(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    return image_files.read_svhn_mat(paths[0])


def _read_lsun(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    return image_files.read_image_folder(paths[0], COLOUR[1:])


def _torchvision(class_name: str, **fixed) -> Callable[[Path, str], None]:
    """A downloader running ``torchvision.datasets.<class_name>(root, download=True)``."""

    def download(root: Path, split: str) -> None:
        import torchvision.datasets

        dataset_class = getattr(torchvision.datasets, class_name)
        where = {"split": split} if class_name == "SVHN" else {"train": split == "train"}
        dataset_class(str(root), download=True, **fixed, **where)

    return download


GREY, COLOUR = (1, 28, 28), (3, 32, 32)
LSUN_EXPORT_HINT = ("the folder holds LSUN's classroom_val images as files, exported from "
                    "classroom_val_lmdb with LSUN's tools (python data.py export "
                    "classroom_val_lmdb --out_dir <folder> --flat); the lmdb package is not a "
                    "dependency")
_EMNIST = dict(folders=("emnist", "EMNIST/raw"),
               files=_mnist_files("emnist-digits-train", "emnist-digits-test"),
               sizes={"train": 240_000, "test": 40_000}, num_classes=10, shape=GREY,
               download=_torchvision("EMNIST", split="digits"))

IMAGE_SOURCES: dict[str, ImageSource] = {
    source.name: source
    for source in (
        ImageSource("mnist", ("mnist", "MNIST/raw"), _mnist_files(), _read_pair,
                    {"train": 60_000, "test": 10_000}, 10, GREY, _torchvision("MNIST")),
        ImageSource("fashion_mnist", ("fashion_mnist", "FashionMNIST/raw"), _mnist_files(),
                    _read_pair, {"train": 60_000, "test": 10_000}, 10, GREY,
                    _torchvision("FashionMNIST")),
        ImageSource("kmnist", ("kmnist", "KMNIST/raw"), _kmnist_files(), _read_pair,
                    {"train": 60_000, "test": 10_000}, 10, GREY, _torchvision("KMNIST")),
        ImageSource("emnist_digits", read=_read_pair_upright, **_EMNIST),
        ImageSource("emnist_digits_torchvision", read=_read_pair, **_EMNIST),
        ImageSource("cifar10", ("cifar10/cifar-10-batches-py", "cifar-10-batches-py"),
                    {"train": tuple((f"data_batch_{i}",) for i in range(1, 6)),
                     "test": (("test_batch",),)},
                    _read_cifar10, {"train": 50_000, "test": 10_000}, 10, COLOUR,
                    _torchvision("CIFAR10")),
        ImageSource("cifar100", ("cifar100/cifar-100-python", "cifar-100-python"),
                    {"train": (("train",),), "test": (("test",),)}, _read_cifar100,
                    {"train": 50_000, "test": 10_000}, 100, COLOUR, _torchvision("CIFAR100")),
        ImageSource("svhn", ("svhn", "."),
                    {split: ((f"{split}_32x32.mat",),) for split in SPLITS}, _read_svhn,
                    {"train": 73_257, "test": 26_032}, 10, COLOUR, _torchvision("SVHN")),
        ImageSource("cifar10_c", ("cifar10_c", "CIFAR-10-C"), {"test": ()}, _read_cifar10,
                    {"test": 10_000}, 10, COLOUR),
        ImageSource("lsun", ("lsun",), {"test": (("classroom_val",),)}, _read_lsun,
                    {"test": 300}, 1, COLOUR, folder_entries=True, hint=LSUN_EXPORT_HINT),
    )
}


def image_source(name: str, key: str = "dataset.images") -> ImageSource:
    """The registry entry for ``name``; a one-line ConfigError naming ``key`` otherwise."""
    return IMAGE_SOURCES[require_choice(key, name, IMAGE_SOURCES)]


def _required_files(source: ImageSource, split: str, corruption: str | None
                    ) -> tuple[tuple[str, ...], ...]:
    if source.name == "cifar10_c":
        return ((f"{corruption}.npy",), ("labels.npy",))
    return source.files[split]


def _check_request(name: str, split: str, corruption: str | None, severity: int
                   ) -> ImageSource:
    """Validated registry entry; for cifar10_c also the corruption and severity."""
    source = image_source(name, "name")
    require_choice(f"{name} split", split, source.files)
    if name == "cifar10_c":
        require_choice("corruption", corruption, CIFAR10_C_CORRUPTIONS)
        require_choice("severity", severity, CIFAR10_C_SEVERITIES)
    return source


def find_image_files(name: str, split: str, root: str | Path | None = None, *,
                     corruption: str | None = None, severity: int = 0) -> list[Path] | None:
    """The files :func:`load_images` would read (first folder holding all of them), or None.

    Cheap (no reading); ``cifar10_c`` at severity 0 looks for the CIFAR-10 test batch.
    """
    _check_request(name, split, corruption, severity)
    if name == "cifar10_c" and severity == 0:
        return find_image_files("cifar10", "test", root)
    source, root = IMAGE_SOURCES[name], data_root() if root is None else Path(root)
    required = _required_files(source, split, corruption)
    for folder in source.folders:
        found = [next((root / folder / n for n in names if source.holds(root / folder / n)),
                      None) for names in required]
        if all(path is not None for path in found):
            return found
    return None


ROOT_HINT = f"data root from ${DATA_DIR_ENV}, default ./data"


def missing_files_message(name: str, splits: str | Sequence[str],
                          root: str | Path | None = None, *, corruption: str | None = None,
                          severity: int = 0, root_hint: bool = True) -> str:
    """One line: which files of ``name`` (its ``splits``) are missing and the folder they go
    in; ``root_hint`` adds where the data root comes from."""
    splits = [splits] if isinstance(splits, str) else list(splits)
    if name == "cifar10_c" and severity == 0:
        return missing_files_message("cifar10", "test", root, root_hint=root_hint)
    source, root = IMAGE_SOURCES[name], data_root() if root is None else Path(root)
    folder = root / source.folders[0]
    missing = [names[0] + ("/" if source.folder_entries else "") for split in splits
               for names in _required_files(source, split, corruption)
               if not any(source.holds(folder / n) for n in names)]
    shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
    hint = f"{ROOT_HINT}; " if root_hint else ""
    where = ([f"torchvision's folder {root / source.folders[1]}/ is read too"]
             if len(source.folders) > 1 else [])
    notes = "; ".join(part for part in (hint.rstrip("; "), *where, source.hint) if part)
    which = " and ".join(splits) + (" splits" if len(splits) > 1 else " split")
    return (f"image data set {name!r} ({which}) not found: put {shown} in "
            f"{folder}/ ({notes})")


def image_files_obtainable(name: str, splits: Sequence[str], root: str | Path | None,
                           download: bool) -> bool:
    """Whether the files of ``name``'s ``splits`` are under ``root``, or may be downloaded
    (``download`` and torchvision has a downloader for the set)."""
    if download and IMAGE_SOURCES[name].download is not None:
        return True
    return all(find_image_files(name, split, root) is not None for split in splits)


def require_image_files(needed: dict[str, Sequence[str]], root: str | Path | None,
                        download: bool) -> None:
    """One-line :class:`ImageDataMissingError` naming, per set of ``needed`` (set -> splits)
    that is not :func:`image_files_obtainable`, its absent files and their folder."""
    parts = []
    for name, splits in needed.items():
        if not image_files_obtainable(name, splits, root, download):
            absent = [split for split in splits if find_image_files(name, split, root) is None]
            parts.append(missing_files_message(name, absent, root, root_hint=False))
    if parts:
        hint = "" if download else "; or set dataset.download=true to let torchvision fetch them"
        raise ImageDataMissingError("; ".join(parts) + f" ({ROOT_HINT}){hint}")


def load_images(name: str, split: str, root: str | Path | None = None, *,
                corruption: str | None = None, severity: int = 0,
                download: bool = True) -> ImageSet:
    """Split ``split`` (``train`` or ``test``) of image data set ``name``, offline first.

    ``name`` is a key of :data:`IMAGE_SOURCES`; ``cifar10_c`` takes ``corruption`` (one of
    :data:`CIFAR10_C_CORRUPTIONS`) and ``severity`` 0..5 (0 = clean CIFAR-10 test). Local files
    first, then (``download=True``) torchvision's downloader into ``root``, else
    :class:`ImageDataMissingError`.
    """
    source = _check_request(name, split, corruption, severity)
    if name == "cifar10_c" and severity == 0:
        clean = load_images("cifar10", "test", root, download=download)
        return ImageSet(clean.images, clean.labels, name, split, 10, clean.source)
    root = data_root() if root is None else Path(root)
    paths = find_image_files(name, split, root, corruption=corruption, severity=severity)
    if paths is None:
        message = missing_files_message(name, split, root, corruption=corruption,
                                        severity=severity)
        paths = _try_download(source, split, root, message, download)
    for path in paths:
        note_read(path)
    images, labels = _read_cached(name, tuple(_file_stamp(p) for p in paths), severity)
    source_text = ", ".join(str(p) for p in paths)
    return ImageSet(images, labels, name, split, source.num_classes, source_text)


def _try_download(source: ImageSource, split: str, root: Path, message: str,
                  download: bool) -> list[Path]:
    """Run torchvision's downloader and find the files, or raise the one-line error."""
    if not download:
        raise ImageDataMissingError(f"{message}; download is off")
    if source.download is None:
        raise ImageDataMissingError(f"{message}; torchvision has no downloader for it")
    try:
        source.download(root, split)
    except Exception as err:  # no network, moved mirrors, bad checksum: all mean "no data"
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        raise ImageDataMissingError(f"{message}; the torchvision download failed too "
                                    f"({reason})") from err
    paths = find_image_files(source.name, split, root)
    if paths is None:
        raise ImageDataMissingError(f"{message}; torchvision's download left no such files")
    return paths


def _file_stamp(path: Path) -> tuple[str, int, int]:
    """(path, size, mtime) so that a replaced file is read again."""
    stat = path.stat()
    return str(path), stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=16)
def _read_cached(name: str, stamps: tuple[tuple[str, int, int], ...], severity: int
                 ) -> tuple[Tensor, Tensor]:
    paths = [Path(stamp[0]) for stamp in stamps]
    if name == "cifar10_c":
        images, labels = image_files.read_cifar10_c(paths[0], paths[1], severity)
    else:
        images, labels = IMAGE_SOURCES[name].read(paths)
    images = np.require(images, dtype=np.uint8, requirements=["C", "W"])
    return torch.from_numpy(images), torch.from_numpy(np.require(labels, np.int64, ["W"]))


def load_rotated(name: str, split: str, angle: float, root: str | Path | None = None,
                 **options) -> ImageSet:
    """``load_images`` with every image rotated ``angle`` degrees counter-clockwise (PIL,
    nearest, zero fill): R-MNIST at ``name="mnist", split="test"``."""
    base = load_images(name, split, root, **options)
    return ImageSet(rotate_images(base.images, angle), base.labels, f"{name}_rotated_{angle:g}",
                    split, base.num_classes, base.source)


def load_permuted(name: str, split: str, task: int, root: str | Path | None = None,
                  **options) -> ImageSet:
    """``load_images`` with the pixels of permuted-MNIST task ``task`` (0-based; task 0 is
    unpermuted, see :func:`bench.datasets.image_transforms.pixel_permutation`)."""
    base = load_images(name, split, root, **options)
    permutation = pixel_permutation(task, int(np.prod(base.images.shape[1:])))
    return ImageSet(permute_pixels(base.images, permutation), base.labels,
                    f"{name}_permuted_{task}", split, base.num_classes, base.source)
