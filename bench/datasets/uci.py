"""SSLA Tables 3-4: the eight UCI regression data sets, split and standardised (notes §7).

Split (both protocols, as the authors' ``UCIMLRepoDataModule``): sklearn ``train_test_split``
80/20 into train+val / test, the train+val part 80/20 into train / val, and val 60/40 into
val / calibration (the calibration rows are held out and unused, as in the authors' runs; their
count is ``info["n_cal"]``), all with ``random_state=seed``. The medium data sets (concrete,
wine, bike, airfoil) then cut the test set to 50 points with
``torch.randperm(n_test, generator=torch.Generator().manual_seed(seed))[:50]``, which equals
the authors' first torch draw after ``torch.manual_seed(42)`` without touching global state.

``protocol="paper"`` repeats the authors' preprocessing to the bit, float32 casts included:
their targets (wine -> alcohol, bike -> temp, liver -> alkphos), their column choices and
drop-first one-hot encodings, and their scalers (fit on all rows before the split, except
bike, fit on the train+val part). ``protocol="corrected"`` keeps the targets and the split
but fits every scaler (features and target) on the train part only, standardises liver's
``drinks``, and gives bike back the columns the authors' ColumnTransformer silently dropped:
``yr``, ``holiday``, ``workingday`` and the same-hour rental counts ``casual``,
``registered``, ``cnt`` (covariates, not functions of the target ``temp``; ``cnt`` is exactly
``casual + registered``, redundant but harmless), all standardised. One-hot levels are the
levels found in all rows (a schema fact, not a fitted statistic); for bike under the paper
protocol the authors' encoder saw only the train+val rows, which gives the same columns
whenever every level occurs there (true for seed 42, not for seed 47, where their code fails).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from bench.datasets.regression_splits import RegressionSplits
from bench.datasets.uci_raw import UCI_SOURCES, load_uci_frame, uci_source
from bench.harness.errors import ConfigError, require_choice

PROTOCOLS = ("paper", "corrected")
MEDIUM_TEST_SIZE = 50
TEST_FRACTION = 0.2
VAL_FRACTION = 0.2
CAL_FRACTION = 0.4


@dataclass(frozen=True)
class UciRecipe:
    """How one data set becomes (x, y); column lists are in the authors' feature order.

    ``standardise`` and ``passthrough`` (appended unscaled) are the paper's columns;
    ``corrected_extra`` are standardised in addition under the corrected protocol, which
    also standardises ``passthrough``. ``one_hot`` columns get drop-first indicators, placed
    after the numeric block, or before it when ``one_hot_first``. ``scaled_before_split``:
    the paper fits scalers on all rows (else on the train+val part). ``x32``/``y32``: the
    authors rounded features/target to float32 before scaling (sklearn then scales the
    tensor in float64); repeated under the paper protocol for bit-exactness.
    """

    target: str
    standardise: tuple[str, ...]
    one_hot: tuple[str, ...] = ()
    passthrough: tuple[str, ...] = ()
    corrected_extra: tuple[str, ...] = ()
    one_hot_first: bool = False
    dropna: bool = False
    medium: bool = False
    scaled_before_split: bool = True
    x32: bool = False
    y32: bool = False


RECIPES: dict[str, UciRecipe] = {
    "auto_mpg": UciRecipe(
        "mpg", ("cylinders", "displacement", "horsepower", "weight", "acceleration",
                "model_year"), one_hot=("origin",), dropna=True, y32=True),
    "liver": UciRecipe(
        "alkphos", ("mcv", "sgpt", "sgot", "gammagt"), passthrough=("drinks",),
        x32=True, y32=True),
    "concrete": UciRecipe(
        "Concrete compressive strength",
        ("Cement", "Blast Furnace Slag", "Fly Ash", "Water", "Superplasticizer",
         "Coarse Aggregate", "Fine Aggregate", "Age"), medium=True, x32=True, y32=True),
    "wine": UciRecipe(
        "alcohol", ("fixed_acidity", "volatile_acidity", "citric_acid", "residual_sugar",
                    "chlorides", "free_sulfur_dioxide", "total_sulfur_dioxide", "density", "pH",
                    "sulphates"), one_hot=("quality", "color"), medium=True, y32=True),
    "bike": UciRecipe(
        "temp", ("windspeed", "hum", "atemp"),
        one_hot=("season", "mnth", "hr", "weekday", "weathersit"),
        corrected_extra=("yr", "holiday", "workingday", "casual", "registered", "cnt"),
        medium=True, scaled_before_split=False),
    "airfoil": UciRecipe(
        "scaled-sound-pressure", ("frequency", "attack-angle", "chord-length",
                                  "free-stream-velocity", "suction-side-displacement-thickness"),
        medium=True, x32=True, y32=True),
    "daily_demand": UciRecipe(
        "Total orders", ("Non-urgent order", "Urgent order", "Order type A", "Order type B",
                         "Order type C", "Fiscal sector orders",
                         "Orders from the traffic controller sector", "Banking orders (1)",
                         "Banking orders (2)", "Banking orders (3)"),
        one_hot=("Week of the month", "Day of the week"), one_hot_first=True),
    "real_estate": UciRecipe(
        "Y house price of unit area", ("X1 transaction date", "X2 house age",
                                       "X3 distance to the nearest MRT station",
                                       "X4 number of convenience stores", "X5 latitude",
                                       "X6 longitude"), x32=True, y32=True),
}


@dataclass(frozen=True)
class SplitIndices:
    """Row indices (into the cleaned frame) of each part, in the authors' order."""

    train_val: np.ndarray
    train: np.ndarray
    val: np.ndarray
    cal: np.ndarray
    test: np.ndarray
    n_test_full: int


def uci_split_indices(n_rows: int, seed: int, test_subsample: int) -> SplitIndices:
    """sklearn 80/20, 80/20 and 60/40 splits with ``random_state=seed``, then the test cut.

    ``test_subsample`` > 0 keeps ``randperm(n_test)[:test_subsample]`` of the test rows.
    """
    rows = np.arange(n_rows)
    train_val, test = train_test_split(rows, test_size=TEST_FRACTION, random_state=seed)
    train, val = train_test_split(train_val, test_size=VAL_FRACTION, random_state=seed)
    val, cal = train_test_split(val, test_size=CAL_FRACTION, random_state=seed)
    n_test_full = len(test)
    if test_subsample:
        keep = torch.randperm(n_test_full, generator=torch.Generator().manual_seed(seed))
        test = test[keep[:test_subsample].numpy()]
    return SplitIndices(train_val, train, val, cal, test, n_test_full)


@dataclass
class UCIRegressionData:
    """One UCI data set of Tables 3-4 under a protocol; :meth:`splits` loads one seed's split.

    ``name`` is the config's name (``uci_bike``), ``uci_name`` the data set's key in
    :data:`RECIPES` (``bike``), ``title`` its row label in the tables and ``tuned`` the name of
    its tuned-values file; ``test_subsample`` and ``root`` as :func:`uci_splits`.
    """

    name: str
    uci_name: str
    title: str
    tuned: str
    protocol: str = "paper"
    test_subsample: int | None = None
    root: str | None = None
    accept_sha256: tuple[str, ...] = ()

    def splits(self, seed: int) -> RegressionSplits:
        """The standardised splits of ``seed`` (split and test subsample; 42 is the paper's)."""
        return uci_splits(self.uci_name, self.protocol, seed, self.test_subsample, self.root,
                          self.accept_sha256)


def accepted_checksums(values: Collection[str] | None) -> tuple[str, ...]:
    """``dataset.accept_sha256`` as a tuple of lowercase hex digests; a one-line ConfigError
    for anything that is not a list of 64-digit hex strings."""
    values = () if values is None else values
    if isinstance(values, str) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"dataset.accept_sha256={values!r} is not valid; use a list of "
                          "sha256 hex digests, e.g. [4a40...05e] (64 hex digits each)")
    digests = tuple(v.lower() for v in values)
    bad = [v for v in digests if len(v) != 64 or any(c not in "0123456789abcdef" for c in v)]
    if bad:
        raise ConfigError(f"dataset.accept_sha256 holds {bad[0]!r}, not a sha256 hex digest "
                          "(64 hex digits)")
    return digests


def uci_splits(
    name: str, protocol: str = "paper", seed: int = 42, test_subsample: int | None = None,
    root: str | Path | None = None, accept_sha256: Collection[str] = (),
) -> RegressionSplits:
    """Standardised float32 splits of UCI data set ``name`` under ``protocol``.

    ``protocol`` is ``"paper"`` or ``"corrected"`` (module docstring); experiment tasks pass
    ``protocol=cfg.protocol.name``. ``test_subsample``: None is the paper's rule (50 test
    points for concrete, wine, bike, airfoil; the full test set otherwise), 0 keeps the full
    test set, n > 0 keeps n random test points. ``root`` overrides the data root
    (``$BENCH_DATA_DIR``); ``accept_sha256``: checksums of raw-file copies used on purpose
    (:func:`bench.datasets.uci_raw.read_verified`). Targets are standardised; ``y_scale`` is
    the target std used.
    """
    require_choice("protocol.name", protocol, PROTOCOLS)
    source, recipe = uci_source(name), RECIPES[name]
    if test_subsample is None:
        test_subsample = MEDIUM_TEST_SIZE if recipe.medium else 0
    if isinstance(test_subsample, bool) or not isinstance(test_subsample, int) \
            or test_subsample < 0:
        raise ConfigError(f"dataset.test_subsample={test_subsample!r} is not valid; "
                          "it must be null, 0 (full test set) or a positive integer")
    raw = load_uci_frame(name, root, accepted_checksums(accept_sha256))
    paper = protocol == "paper"
    columns = _columns(recipe, paper)
    _require_columns(raw, [recipe.target, *columns["standardise"], *columns["passthrough"],
                           *recipe.one_hot], name)
    frame = raw.dropna().reset_index(drop=True) if recipe.dropna else raw
    idx = uci_split_indices(len(frame), seed, test_subsample)
    fit_rows = _scaler_rows(paper, recipe, idx, len(frame))
    x, feature_names = _features(frame, recipe, columns, fit_rows,
                                 round_to_float32=paper and recipe.x32)
    y_raw = _float64(frame[[recipe.target]], round_to_float32=paper and recipe.y32)
    y_scaler = StandardScaler().fit(y_raw[fit_rows])
    y = torch.as_tensor(y_scaler.transform(y_raw), dtype=torch.float32)
    parts = {k: (x[getattr(idx, k)], y[getattr(idx, k)]) for k in ("train", "val", "test")}
    _require_finite(parts, name)
    used = {recipe.target, *columns["standardise"], *columns["passthrough"], *recipe.one_hot}
    info: dict[str, Any] = {
        "dataset": name, "uci_id": source.uci_id, "protocol": protocol, "seed": seed,
        "source": raw.attrs.get("source", ""), "target": recipe.target,
        "n_rows": len(raw), "n_rows_used": len(frame), "n_features": len(feature_names),
        "feature_names": feature_names,
        "n_train": len(idx.train), "n_val": len(idx.val), "n_cal": len(idx.cal),
        "n_test": len(idx.test), "n_test_before_subsample": idx.n_test_full,
        "subsampled": len(idx.test) < idx.n_test_full,
        "dropped_columns": [c for c in raw.columns if c not in used],
        "standardised": list(columns["standardise"]), "unscaled": list(columns["passthrough"]),
        "one_hot_drop_first": list(recipe.one_hot),
        "scaler_policy": _scaler_policy(paper, recipe, len(fit_rows)),
        "y_mean": float(y_scaler.mean_[0]), "y_scale": float(y_scaler.scale_[0]),
    }
    return RegressionSplits(
        x_train=parts["train"][0], y_train=parts["train"][1], x_val=parts["val"][0],
        y_val=parts["val"][1], x_test=parts["test"][0], y_test=parts["test"][1],
        y_scale=info["y_scale"], info=info,
    )


def uci_overview(protocol: str = "paper", root: str | Path | None = None) -> list[dict]:
    """Table 3: one row per data set (rows, features after encoding, split sizes, subsampling).

    Rows are plain dicts (``pandas.DataFrame(uci_overview())`` makes the table).
    """
    keys = ("dataset", "uci_id", "target", "n_rows", "n_rows_used", "n_features", "n_train",
            "n_val", "n_cal", "n_test_before_subsample", "n_test", "subsampled")
    infos = (uci_splits(name, protocol=protocol, root=root).info for name in UCI_SOURCES)
    return [{k: info[k] for k in keys} for info in infos]


def _scaler_rows(paper: bool, recipe: UciRecipe, idx: SplitIndices, n_rows: int) -> np.ndarray:
    """Rows the scalers are fit on, in the authors' order (summation order decides the bits)."""
    if not paper:
        return idx.train
    return np.arange(n_rows) if recipe.scaled_before_split else idx.train_val


def _columns(recipe: UciRecipe, paper: bool) -> dict[str, tuple[str, ...]]:
    """Standardised and unscaled numeric columns under a protocol."""
    if paper:
        return {"standardise": recipe.standardise, "passthrough": recipe.passthrough}
    return {"standardise": recipe.standardise + recipe.passthrough + recipe.corrected_extra,
            "passthrough": ()}


def _features(
    frame: pd.DataFrame, recipe: UciRecipe, columns: dict[str, tuple[str, ...]],
    fit_rows: np.ndarray, round_to_float32: bool,
) -> tuple[torch.Tensor, list[str]]:
    """Float32 design matrix: standardised block, unscaled block, drop-first one-hot block."""
    numeric = _float64(frame[list(columns["standardise"])], round_to_float32)
    scaled = StandardScaler().fit(numeric[fit_rows]).transform(numeric)
    blocks = [torch.as_tensor(scaled, dtype=torch.float32)]
    names = list(columns["standardise"])
    if columns["passthrough"]:
        blocks.append(torch.tensor(
            frame[list(columns["passthrough"])].to_numpy(np.float64), dtype=torch.float32))
        names += list(columns["passthrough"])
    if recipe.one_hot:
        indicators, indicator_names = _one_hot_drop_first(frame, recipe.one_hot)
        if recipe.one_hot_first:
            blocks.insert(0, indicators)
            names = indicator_names + names
        else:
            blocks.append(indicators)
            names += indicator_names
    return torch.cat(blocks, dim=1), names


def _float64(frame: pd.DataFrame, round_to_float32: bool) -> np.ndarray:
    """Values as float64, first rounded to float32 when the authors' code did that."""
    values = frame.to_numpy(np.float64)
    return values.astype(np.float32).astype(np.float64) if round_to_float32 else values


def _one_hot_drop_first(
    frame: pd.DataFrame, columns: tuple[str, ...],
) -> tuple[torch.Tensor, list[str]]:
    """sklearn ``OneHotEncoder(drop="first")`` over sorted levels, column by column."""
    indicators, names = [], []
    for column in columns:
        values = frame[column].to_numpy()
        for level in sorted(pd.unique(values))[1:]:
            indicators.append(values == level)
            names.append(f"{column}_{level}")
    matrix = np.stack(indicators, axis=1) if indicators else np.zeros((len(frame), 0))
    return torch.as_tensor(matrix, dtype=torch.float32), names


def _scaler_policy(paper: bool, recipe: UciRecipe, n_fit: int) -> str:
    """One sentence saying which rows the feature and target scalers were fit on."""
    if paper and recipe.scaled_before_split:
        return f"features and target scalers fit on all {n_fit} rows before the split (paper)"
    if paper:
        return f"features and target scalers fit on the {n_fit} train+val rows (paper, bike)"
    return f"features and target scalers fit on the {n_fit} train rows only (corrected)"


def _require_columns(frame: pd.DataFrame, needed: list[str], name: str) -> None:
    """Fail in one line when a frame (e.g. a ucimlrepo download) lacks an expected column."""
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"UCI data set {name!r} lacks columns {missing}; it has "
                         f"{list(frame.columns)} (source: {frame.attrs.get('source', '?')})")


def _require_finite(parts: dict[str, tuple[torch.Tensor, torch.Tensor]], name: str) -> None:
    """No NaN or inf may reach a method."""
    for part, tensors in parts.items():
        if not all(bool(torch.isfinite(t).all()) for t in tensors):
            raise ValueError(f"UCI data set {name!r}: non-finite values in the {part} split")
