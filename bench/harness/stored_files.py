"""Files of the trained-network and trained-state stores: atomic writes, an exclusive lock,
reading a finished folder's files and publishing a finished folder.

Writers put a file beside its final name and ``os.replace`` it, so a reader sees either the old
file or the complete new one; one process at a time trains a given (recipe, seed) under an
``fcntl.flock`` on a lock file beside its folder.

Damaged files: a file of a finished folder that cannot be read, or lacks what the store wrote
in it, is a one-line :class:`DamagedStoreFile` (a ConfigError, so the job stops without a
failed record) naming the file and the folder to delete; a damaged result is never used, nor
trained again behind the user's back. An interrupted run's ``checkpoint.pt`` that cannot be
read is deleted with a warning and training starts from the first epoch
(:func:`load_checkpoint`): a checkpoint only saves time, the stored result does not depend on it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch

from bench.harness.errors import ConfigError

logger = logging.getLogger("bench.training")

REASON_CHARS = 200
# A finished store folder holds its result file (the store's own name), these two JSON files
# and, while it is still ``<folder>.partial``, the last epoch's checkpoint.
RECIPE_NAME = "recipe.json"
HISTORY_NAME = "history.json"
CHECKPOINT_NAME = "checkpoint.pt"

Stored = TypeVar("Stored")


class DamagedStoreFile(ConfigError):
    """A file of a finished store folder that cannot be read or lacks what the store wrote."""

    def __init__(self, path: Path, reason: str) -> None:
        path = Path(path)
        super().__init__(f"damaged stored file {path}: {reason}; delete the folder "
                         f"{path.parent} to train it again")
        self.path, self.reason = path, reason


def error_reason(err: BaseException) -> str:
    """``err`` as one short line: its type and the first sentence of its message (an
    OSError's ``strerror`` only)."""
    text = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
    text = " ".join(text.split()).split(". ", 1)[0][:REASON_CHARS]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def read_stored_json(path: Path, required: tuple[str, ...] = ()) -> dict:
    """The JSON object in ``path``, a file of a finished store folder, with the ``required``
    keys; :class:`DamagedStoreFile` if it is missing, unreadable or not such an object."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DamagedStoreFile(path, f"unreadable ({error_reason(err)})") from None
    try:
        values = json.loads(text)
    except json.JSONDecodeError as err:
        raise DamagedStoreFile(path, f"invalid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(values, dict):
        raise DamagedStoreFile(path, f"a JSON {type(values).__name__}, not an object")
    missing = [key for key in required if key not in values]
    if missing:
        raise DamagedStoreFile(path, f"missing field(s) {', '.join(missing)}")
    return values


def load_stored_tensors(path: Path) -> dict:
    """The dict ``torch.save`` wrote to ``path`` (tensors on the CPU, ``weights_only``);
    :class:`DamagedStoreFile` if it is missing, unreadable or not a dict."""
    try:
        values = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch.load raises many types for a damaged file
        raise DamagedStoreFile(path, f"unreadable by torch.load ({error_reason(err)})") from None
    if not isinstance(values, dict):
        raise DamagedStoreFile(path, f"a {type(values).__name__}, not a dict")
    return values


def discard_checkpoint(path: Path, reason: str) -> None:
    """Delete the damaged checkpoint ``path`` and say so in a warning."""
    logger.warning("discarding the damaged checkpoint %s (%s); training starts again from the "
                   "first epoch", path, reason)
    Path(path).unlink(missing_ok=True)


def load_checkpoint(path: Path) -> dict | None:
    """The checkpoint dict in ``path`` (tensors on the CPU), or None when there is none. A
    checkpoint that cannot be read is deleted with a warning and None returned, so training
    starts from the first epoch."""
    if not Path(path).exists():
        return None
    try:
        return load_stored_tensors(path)
    except DamagedStoreFile as err:
        discard_checkpoint(path, err.reason)
        return None


def publish_folder(partial: Path, final: Path) -> None:
    """Rename the finished folder ``partial`` to ``final``. Something already at ``final`` (an
    incomplete folder, e.g. one whose weights were deleted to train again) is renamed aside
    first and removed once ``partial`` has taken its place. Callers hold the folder's lock, and
    readers take it when the finished file is missing, so none sees the gap between renames."""
    if not (final.exists() or final.is_symlink()):
        os.rename(partial, final)
        return
    aside = final.with_name(f"{final.name}.replaced-{os.getpid()}")
    os.rename(final, aside)
    os.rename(partial, final)
    logger.warning("replaced the incomplete folder %s by the one just trained", final)
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink(missing_ok=True)


def publish_stored(partial: Path, final: Path, result_name: str, tensors: dict, recipe: dict,
                   history: dict) -> None:
    """Finish a store folder: save ``tensors`` as ``result_name``, ``recipe`` and ``history``
    as JSON in ``partial``, drop its epoch checkpoint and publish it as ``final``."""
    save_atomically(partial / result_name, lambda f: torch.save(tensors, f))
    write_json(partial / RECIPE_NAME, recipe)
    write_json(partial / HISTORY_NAME, history)
    (partial / CHECKPOINT_NAME).unlink(missing_ok=True)
    publish_folder(partial, final)


def save_atomically(path: Path, write: Callable[[Any], None]) -> None:
    """``write(file)`` into a temporary file beside ``path``, flushed, then ``os.replace``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, values: dict) -> None:
    """``values`` as indented JSON with sorted keys, written atomically."""
    text = json.dumps(values, indent=1, sort_keys=True)
    save_atomically(path, lambda f: f.write(text.encode("utf-8")))


@contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if absent), waiting for it if another
    process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process training %s", path.with_suffix(""))
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def stored_or_built(final: Path, result_name: str, load: Callable[[Path], Stored],
                    build: Callable[[Path], Stored]) -> Stored:
    """``load(final)`` when the finished folder ``final`` holds its ``result_name`` file; else,
    under the exclusive lock ``<final>.lock``, ``build(partial)`` with the folder
    ``<final>.partial`` (created if absent), which trains, saves and publishes it. A process
    that waited for the lock while another built the folder loads it instead."""
    if (final / result_name).exists():
        return load(final)
    with exclusive_lock(final.with_name(f"{final.name}.lock")):
        if (final / result_name).exists():
            return load(final)
        partial = final.with_name(f"{final.name}.partial")
        partial.mkdir(parents=True, exist_ok=True)
        return build(partial)
