"""Small image data files written in the publishers' real formats, for the vision tests."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np


def idx_bytes(array: np.ndarray) -> bytes:
    """An uint8 array as IDX: magic ``00 00 08 <ndim>``, big-endian counts, then the data."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def write_idx(path: Path, array: np.ndarray, compress: bool = True) -> Path:
    """Write ``array`` as an IDX file, gzipped when ``compress``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = idx_bytes(array)
    path.write_bytes(gzip.compress(data, compresslevel=1) if compress else data)
    return path


def images_and_labels(rng: np.random.Generator, n: int, shape: tuple[int, ...],
                      classes: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Random uint8 images of ``shape`` and labels cycling through ``classes``."""
    images = rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)
    return images, (np.arange(n) % classes).astype(np.uint8)


def write_mnist_like(folder: Path, rng: np.random.Generator, prefixes=("train", "t10k"),
                     sizes=(64, 40), compress: bool = True) -> dict[str, tuple]:
    """IDX image and label files for two splits; returns ``{split: (images [N,28,28], labels)}``."""
    written = {}
    for split, prefix, n in zip(("train", "test"), prefixes, sizes, strict=True):
        images, labels = images_and_labels(rng, n, (28, 28))
        suffix = ".gz" if compress else ""
        write_idx(folder / f"{prefix}-images-idx3-ubyte{suffix}", images, compress)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte{suffix}", labels, compress)
        written[split] = (images, labels)
    return written


def write_kmnist_npz(folder: Path, rng: np.random.Generator, sizes=(64, 40)) -> dict[str, tuple]:
    """KMNIST's npz files (one array, ``arr_0``) for both splits."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, n in zip(("train", "test"), sizes, strict=True):
        images, labels = images_and_labels(rng, n, (28, 28))
        np.savez_compressed(folder / f"kmnist-{split}-imgs.npz", images)
        np.savez_compressed(folder / f"kmnist-{split}-labels.npz", labels)
        written[split] = (images, labels)
    return written


def write_cifar(folder: Path, rng: np.random.Generator, hundred: bool = False,
                per_file: int = 6) -> dict[str, tuple]:
    """CIFAR python pickles: ``data [N, 3072]`` rows (R, G, B planes of 32x32) and labels.

    CIFAR-10: ``data_batch_1..5`` and ``test_batch`` with ``labels``; CIFAR-100: ``train`` and
    ``test`` with ``fine_labels`` (and ``coarse_labels``). Returns ``[N, 3, 32, 32]`` images.
    """
    folder.mkdir(parents=True, exist_ok=True)
    names = {"train": ["train"], "test": ["test"]} if hundred else \
        {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
    classes, key = (100, "fine_labels") if hundred else (10, "labels")
    written = {}
    for split, files in names.items():
        parts = []
        for name in files:
            images, labels = images_and_labels(rng, per_file, (3, 32, 32), classes)
            batch = {"data": images.reshape(per_file, -1), key: labels.astype(int).tolist(),
                     "batch_label": name}
            if hundred:
                batch["coarse_labels"] = (labels // 5).astype(int).tolist()
            with open(folder / name, "wb") as handle:
                pickle.dump(batch, handle)
            parts.append((images, labels))
        written[split] = tuple(np.concatenate(p) for p in zip(*parts, strict=True))
    return written


def write_svhn(folder: Path, rng: np.random.Generator, n: int = 7) -> dict[str, tuple]:
    """SVHN ``{train,test}_32x32.mat``: ``X [32, 32, 3, N]``, ``y [N, 1]`` with 10 for digit 0.

    Returns ``{split: (images [N, 3, 32, 32], digits)}``.
    """
    import scipy.io

    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for split in ("train", "test"):
        images, digits = images_and_labels(rng, n, (3, 32, 32))
        stored = np.where(digits == 0, 10, digits).astype(np.uint8).reshape(n, 1)
        scipy.io.savemat(folder / f"{split}_32x32.mat",
                         {"X": images.transpose(2, 3, 1, 0), "y": stored})
        written[split] = (images, digits)
    return written


def write_cifar10_c(folder: Path, corruption: str, per_severity: int = 20
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``<corruption>.npy [5 * per_severity, 32, 32, 3]`` whose pixels all equal 40 x severity
    (1..5) plus the row's index mod 40, and ``labels.npy`` (index mod 10)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = np.arange(5 * per_severity)
    value = (rows // per_severity + 1) * 40 + rows % 40
    images = np.broadcast_to(value[:, None, None, None].astype(np.uint8),
                             (len(rows), 32, 32, 3))
    labels = (rows % 10).astype(np.uint8)
    np.save(folder / f"{corruption}.npy", np.ascontiguousarray(images))
    np.save(folder / "labels.npy", labels)
    return images, labels


def write_lsun_folder(folder: Path, rng: np.random.Generator, n: int = 5,
                      nested: bool = False) -> list[Path]:
    """An LSUN export (``data.py export``): one ``<key>.webp`` per image, keys of 40 hex digits
    as LSUN's, images of differing sizes (LSUN's are about 256 on the short side); ``nested``
    puts each file under the key's first characters as the export without ``--flat`` does.
    Lossless WebP, so the decoded pixels are the ones written. Returns the files in key order."""
    from PIL import Image

    written = []
    for i in range(n):
        key = f"{int(rng.integers(0, 2**62)):040x}"
        height, width = 40 + 3 * i, 56 - 2 * i
        pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
        where = folder.joinpath(*key[:3]) if nested else folder
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{key}.webp"
        Image.fromarray(pixels).save(path, lossless=True)
        written.append(path)
    return sorted(written, key=lambda p: p.stem)


def write_cifar10_ood_sets(root: Path, rng: np.random.Generator, per_file: int = 12) -> None:
    """Generated CIFAR-10, SVHN, CIFAR-100 and LSUN files under ``root`` in the folders the
    loaders read (Laplace Redux Table 4)."""
    write_cifar(root / "cifar10" / "cifar-10-batches-py", rng, per_file=per_file)
    write_cifar(root / "cifar100" / "cifar-100-python", rng, hundred=True, per_file=per_file)
    write_svhn(root / "svhn", rng, n=per_file)
    write_lsun_folder(root / "lsun" / "classroom_val", rng, n=6)
