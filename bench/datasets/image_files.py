"""Readers for image data sets in the formats their publishers distribute.

Every reader returns numpy arrays: images ``uint8 [N, C, H, W]`` and labels ``int64 [N]``.
Formats: IDX (MNIST, Fashion-MNIST, KMNIST, EMNIST; ``.gz`` or unpacked), KMNIST's ``.npz``
files (key ``arr_0``), the CIFAR-10 / CIFAR-100 python pickles, SVHN's ``.mat`` files, the
CIFAR-10-C ``.npy`` arrays and folders of encoded images (LSUN exported from its LMDB). A
file that is not what its name says raises :class:`ImageDataCorruptError` naming the file.
"""

from __future__ import annotations

import gzip
import pickle
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.harness.errors import ConfigError

IDX_UBYTE = 0x08
IMAGE_SUFFIXES = (".webp", ".jpg", ".jpeg", ".png")
GZIP_MAGIC = b"\x1f\x8b"
CIFAR_SIDE = 32
SVHN_ZERO_LABEL = 10
CIFAR10_C_SEVERITIES = 5


class ImageDataCorruptError(ConfigError):
    """A data file exists but is not a readable copy of what its name says."""


def _open_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic; a file that cannot be
    read or a gzip stream that is cut short or garbled raises :class:`ImageDataCorruptError`
    naming the file."""
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise ImageDataCorruptError(f"{path}: unreadable ({type(err).__name__}: "
                                    f"{err.strerror or err}); replace the file") from None
    if raw[:2] != GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as err:
        raise ImageDataCorruptError(f"{path}: not a complete gzip file ({err}); "
                                    "replace the file") from None


def read_idx(path: str | Path, ndim: int | None = None) -> np.ndarray:
    """The uint8 array in an IDX file (``.gz`` or unpacked), shape from its header.

    Checks the magic number (``0x0000 08 <ndim>``), the expected number of dimensions when
    ``ndim`` is given, and that the data length equals the product of the header's counts.
    """
    path = Path(path)
    data = _open_bytes(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != IDX_UBYTE:
        raise ImageDataCorruptError(f"{path}: not an IDX file of unsigned bytes "
                                    f"(magic {data[:4].hex() or 'missing'}); replace the file")
    dims = data[3]
    if ndim is not None and dims != ndim:
        raise ImageDataCorruptError(f"{path}: IDX file with {dims} dimensions where {ndim} "
                                    "were expected (images 3, labels 1)")
    header = 4 + 4 * dims
    shape = tuple(int(n) for n in np.frombuffer(data[4:header], dtype=">u4"))
    expected = int(np.prod(shape)) if shape else 0
    if len(shape) != dims or len(data) - header != expected:
        raise ImageDataCorruptError(f"{path}: header says {shape} ({expected} bytes) but "
                                    f"{len(data) - header} bytes follow; the file is cut short")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def read_npz_array(path: str | Path, key: str = "arr_0") -> np.ndarray:
    """Array ``key`` of an ``.npz`` file (KMNIST's files hold one array, ``arr_0``); a file
    that is not such an archive (cut short, garbled, empty, without ``key``) raises
    :class:`ImageDataCorruptError` naming the file."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            return archive[key]
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error) as err:
        raise ImageDataCorruptError(f"{path}: not a readable .npz archive with array {key!r} "
                                    f"({type(err).__name__}: {err}); replace the file") from None


def read_grey_images(path: str | Path) -> np.ndarray:
    """``uint8 [N, 1, H, W]`` from an IDX image file or a KMNIST-style ``.npz``."""
    path = Path(path)
    images = read_npz_array(path) if path.suffix == ".npz" else read_idx(path, ndim=3)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ImageDataCorruptError(f"{path}: expected uint8 images [N, H, W], found "
                                    f"{images.dtype} {list(images.shape)}")
    return images[:, None, :, :]


def read_labels(path: str | Path) -> np.ndarray:
    """``int64 [N]`` from an IDX label file or a KMNIST-style ``.npz``."""
    path = Path(path)
    labels = read_npz_array(path) if path.suffix == ".npz" else read_idx(path, ndim=1)
    if labels.ndim != 1:
        raise ImageDataCorruptError(f"{path}: expected labels [N], found {list(labels.shape)}")
    return labels.astype(np.int64)


def read_image_label_pair(images_path: Path, labels_path: Path,
                          transposed: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Grey images and labels of one split, checked to have the same count.

    ``transposed=True`` swaps height and width (EMNIST stores its images transposed relative to
    MNIST; swapping makes the digits upright).
    """
    images, labels = read_grey_images(images_path), read_labels(labels_path)
    if len(images) != len(labels):
        raise ImageDataCorruptError(f"{images_path} holds {len(images)} images but "
                                    f"{labels_path} {len(labels)} labels")
    if transposed:
        images = images.transpose(0, 1, 3, 2)
    return np.ascontiguousarray(images), labels


def read_cifar_batches(paths: Sequence[Path], label_key: str = "labels"
                       ) -> tuple[np.ndarray, np.ndarray]:
    """CIFAR python pickles (``data [N, 3072]`` rows of R, G, B planes) concatenated in order.

    ``label_key`` is ``"labels"`` for CIFAR-10 and ``"fine_labels"`` for CIFAR-100's 100
    classes. The files are pickles, read as torchvision reads them: only open trusted copies.
    """
    images, labels = [], []
    for path in paths:
        try:
            with open(path, "rb") as handle:
                batch = pickle.load(handle, encoding="latin1")
            data = np.asarray(batch["data"], dtype=np.uint8)
            targets = np.asarray(batch[label_key], dtype=np.int64)
        except (OSError, EOFError, KeyError, TypeError, pickle.UnpicklingError) as err:
            raise ImageDataCorruptError(f"{path}: not a CIFAR python batch with 'data' and "
                                        f"{label_key!r} ({type(err).__name__}: {err})") from None
        if data.ndim != 2 or data.shape[1] != 3 * CIFAR_SIDE**2 or len(data) != len(targets):
            raise ImageDataCorruptError(f"{path}: 'data' {list(data.shape)} and {len(targets)} "
                                        "labels; expected [N, 3072] and N labels")
        images.append(data.reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE))
        labels.append(targets)
    return np.concatenate(images), np.concatenate(labels)


def read_svhn_mat(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """SVHN's cropped-digit ``.mat`` file: ``X [32, 32, 3, N]`` and ``y [N, 1]``, label 10 = 0."""
    import scipy.io

    try:
        contents = scipy.io.loadmat(path)
        x, y = contents["X"], contents["y"]
    except (OSError, ValueError, KeyError, NotImplementedError) as err:
        raise ImageDataCorruptError(f"{path}: not an SVHN .mat file with X and y "
                                    f"({type(err).__name__}: {err})") from None
    if x.ndim != 4 or x.shape[2] != 3 or x.shape[3] != y.size:
        raise ImageDataCorruptError(f"{path}: X {list(x.shape)} and {y.size} labels; expected "
                                    "X [32, 32, 3, N] and N labels")
    labels = y.reshape(-1).astype(np.int64)
    labels[labels == SVHN_ZERO_LABEL] = 0
    return np.ascontiguousarray(x.transpose(3, 2, 0, 1).astype(np.uint8)), labels


def read_cifar10_c(images_path: str | Path, labels_path: str | Path,
                   severity: int) -> tuple[np.ndarray, np.ndarray]:
    """One severity (1..5) of a CIFAR-10-C corruption, images as ``[n, 3, 32, 32]``.

    The ``.npy`` array is ``[5 n, 32, 32, 3]`` (n = 10000 in the published files), severities
    1..5 one after the other, and ``labels.npy`` has the same 5 n rows; rows
    ``(severity - 1) n .. severity n`` are returned, read through a memory map.
    """
    images, labels = _read_npy_map(images_path), _read_npy_map(labels_path)
    total = len(images)
    if images.shape[1:] != (CIFAR_SIDE, CIFAR_SIDE, 3) or total % CIFAR10_C_SEVERITIES \
            or labels.shape != (total,):
        raise ImageDataCorruptError(
            f"{images_path}: {list(images.shape)} with labels {list(labels.shape)}; expected "
            "[5 n, 32, 32, 3] (severities 1..5, n = 10000 each) and [5 n] labels")
    n = total // CIFAR10_C_SEVERITIES
    rows = slice((severity - 1) * n, severity * n)
    chosen = np.asarray(images[rows], dtype=np.uint8).transpose(0, 3, 1, 2)
    return np.ascontiguousarray(chosen), np.asarray(labels[rows]).astype(np.int64)


def _read_npy_map(path: str | Path) -> np.ndarray:
    """The ``.npy`` array in ``path`` as a read-only memory map, or ImageDataCorruptError."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, EOFError, ValueError) as err:
        raise ImageDataCorruptError(f"{path}: not a readable .npy array ({err}); "
                                    "replace the file") from None


def image_folder_files(folder: str | Path) -> list[Path]:
    """The image files under ``folder`` (any depth; :data:`IMAGE_SUFFIXES`), ordered by file
    name without its suffix: an LSUN export names each file by its LMDB key, so this is the
    order in which torchvision's ``LSUN`` dataset walks the LMDB."""
    files = [path for path in Path(folder).rglob("*")
             if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES]
    return sorted(files, key=lambda path: (path.stem, str(path)))


def read_image_folder(folder: str | Path, size: tuple[int, int] = (CIFAR_SIDE, CIFAR_SIDE)
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Every image under ``folder`` (:func:`image_folder_files`) as ``uint8 [N, 3, H, W]``:
    decoded by PIL, converted to RGB and resized to ``size = (H, W)`` with PIL's bilinear
    filter, which is what torchvision's ``Resize(size=(H, W))`` does to a PIL image (Laplace
    Redux's LSUN loader; ``ToTensor`` then divides by 255). Labels are all 0, as
    torchvision's ``LSUN`` with one class gives them."""
    from PIL import Image, UnidentifiedImageError

    files = image_folder_files(folder)
    if not files:
        raise ImageDataCorruptError(f"{folder}: no image files ({', '.join(IMAGE_SUFFIXES)})")
    height, width = size
    images = np.empty((len(files), 3, height, width), dtype=np.uint8)
    for i, path in enumerate(files):
        try:
            with Image.open(path) as picture:
                resized = picture.convert("RGB").resize((width, height),
                                                        Image.Resampling.BILINEAR)
        except (OSError, UnidentifiedImageError) as err:
            raise ImageDataCorruptError(f"{path}: not a readable image ({err})") from None
        images[i] = np.asarray(resized, dtype=np.uint8).transpose(2, 0, 1)
    return images, np.zeros(len(files), dtype=np.int64)
