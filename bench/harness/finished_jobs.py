"""Finished jobs are dropped from a multirun before its launcher sees them.

A job's record folder follows from its composed config alone (:func:`job_identity`), so the
submitting process can tell a finished job from an unfinished one without running it. On a
cluster this saves one allocation and a few seconds per finished job; the job itself still
checks again (:func:`bench.harness.job_execution.run_job`), so two submissions racing stay correct.
The sweeper that applies it is ``hydra_plugins.bench_sweeper`` (``conf/hydra/sweeper/bench``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from bench.harness.logs import logger
from bench.harness.overrides import CONF_DIR, group_options
from bench.harness.records import config_hash, read_record, record_dir


@dataclass(frozen=True)
class JobIdentity:
    """What names a job's record: its config after the scale's overrides, resolved without
    the ``hydra`` node, its hash and its record folder."""

    cfg: DictConfig
    resolved: dict
    config_hash: str
    folder: Path


def apply_scale_overrides(cfg: DictConfig, cli_overrides: Sequence[str]) -> DictConfig:
    """Merge the experiment's overrides for the chosen scale, then re-apply the command line.

    Precedence, lowest first: composed config, ``scale_overrides[<scale>]``, command line.
    """
    per_scale = cfg.get("scale_overrides") or {}
    extra = per_scale.get(cfg.scale.name)
    if not extra:
        return cfg
    merged = OmegaConf.merge(cfg, extra)
    groups = group_options(CONF_DIR)
    for override in OverridesParser.create().parse_overrides(list(cli_overrides)):
        key = override.key_or_group.lstrip("+~")
        if key in groups or key.startswith("hydra") or override.is_delete():
            continue
        OmegaConf.update(merged, key, override.value(), merge=False, force_add=True)
    return merged


def job_identity(cfg: DictConfig, cli_overrides: Sequence[str]) -> JobIdentity:
    """The identity of the job that ``cfg`` (composed with ``cli_overrides``) runs."""
    cfg = apply_scale_overrides(cfg, cli_overrides)
    # Without the hydra node: its sweep folder needs the job number, which a job composed
    # outside a launcher (the sweeper's check) does not have yet.
    resolved = OmegaConf.to_container(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]),
                                      resolve=True)
    chash = config_hash(resolved)
    folder = record_dir(Path(cfg.results_dir), cfg.name, cfg.scale.name, chash)
    return JobIdentity(cfg, resolved, chash, folder)


def finished_status(cfg: DictConfig, cli_overrides: Sequence[str]) -> tuple[str, Path] | None:
    """``(status, folder)`` when the job already has a record that a run would keep (an ok one,
    or a failed one unless ``rerun_failed``), else None. Anything unreadable (a damaged record,
    a config that does not resolve) counts as unfinished: the job itself reports it."""
    try:
        identity = job_identity(cfg, cli_overrides)
        record = read_record(identity.folder)
    except Exception:  # noqa: BLE001 - a damaged record, a bad interpolation: the job names it
        return None
    if record is None:
        return None
    if record.get("status") == "failed" and identity.cfg.get("rerun_failed"):
        return None
    return str(record.get("status")), identity.folder


def split_finished(master: DictConfig, load_job_config: Any,
                   batch: Sequence[Sequence[str]]) -> tuple[list[Sequence[str]], list[tuple]]:
    """Split a batch of job overrides into ``(to_run, finished)``; ``finished`` holds
    ``(overrides, status, folder)``. ``load_job_config(master, overrides)`` composes one job's
    config as the launcher would (Hydra's ``ConfigLoader.load_sweep_config``)."""
    to_run, finished = [], []
    for overrides in batch:
        try:
            cfg = load_job_config(master, list(overrides))
        except Exception:  # noqa: BLE001 - Hydra validated the batch; leave errors to the job
            to_run.append(overrides)
            continue
        found = finished_status(cfg, overrides)
        if found is None:
            to_run.append(overrides)
            continue
        status, folder = found
        hint = " (rerun_failed=true runs it again)" if status == "failed" else ""
        logger.info("skip %s [%s] %s%s", cfg.name, status, folder, hint)
        finished.append((overrides, status, folder))
    return to_run, finished
