"""Tuned hyperparameters as config values: ``${tuned:<source>,<problem>/<space>}``.

The resolver reads ``conf/tuned/<source>/<problem>/<space>.yaml``. Scales pick the source
(``scale.tuned_source``): ``paper`` holds the SSLA authors' tuned values (smoke and cpu
scales), ``retuned`` what ``make tune-<artifact> SCALE=paper`` found with the paper's
trial counts. The resolved values land in every record's config.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from bench.harness.errors import ConfigError

RESOLVER = "tuned"


def load_tuned(source: str, name: str, conf_dir: Path | None = None) -> DictConfig:
    """The values of ``conf/tuned/<source>/<name>.yaml``; a missing file is a one-line error."""
    if conf_dir is None:
        from bench.harness.overrides import CONF_DIR

        conf_dir = CONF_DIR
    path = conf_dir / "tuned" / source / f"{name}.yaml"
    if not path.is_file():
        sources = sorted(p.name for p in (conf_dir / "tuned").iterdir() if p.is_dir())
        problem = name.split("/")[0]
        raise ConfigError(
            f"scale.tuned_source={source!r}: {path} is missing (sources with files: "
            f"{', '.join(sources)}); create it with `make tune-{problem} SCALE=paper` or run "
            f"with scale.tuned_source=paper")
    return OmegaConf.load(path)


def register_tuned_resolver() -> None:
    """Make ``${tuned:<source>,<name>}`` available to every config composed afterwards."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, load_tuned)
