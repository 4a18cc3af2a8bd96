"""The on-disk layout of five WILDS data sets, read without the ``wilds`` package.

``<root>/<name>_v<version>/`` is the folder WILDS 2.0 downloads a data set into (its
``RELEASE_v<version>.txt`` marks a finished download). This module reads the subset of each
layout that Laplace Redux Figure 10 needs, for every row: its split (named as WILDS 2.0's
``split_dict``), its target and where its input is, and nothing else (no metadata groups, no
evaluation groupers, no unlabeled data):

==============  ============  ================================================================
data set        folder        files read (and how the split is decided)
==============  ============  ================================================================
camelyon17      v1.0          ``metadata.csv`` (``patient node x_coord y_coord tumor center
                              split``): split column 0 train, 1 id_val; hospital (``center``) 1
                              is ``val``, 2 is ``test``; patches ``patches/patient_<p>_node_<n>/
                              patch_patient_<p>_node_<n>_x_<x>_y_<y>.png`` (96 x 96 RGB)
fmow            v1.1          ``rgb_metadata.csv`` (``split category timestamp``), the
                              ``time_after_2016`` scheme: images from 2016 on are OOD ``test``
                              (of split ``test``), 2013-2015 OOD ``val`` (of split ``val``),
                              earlier ones ``train`` / ``id_val`` / ``id_test``; ``seq`` rows are
                              left out; ``images/rgb_img_<row>.png`` (row of the full file)
civilcomments   v1.0          ``all_data_with_identities.csv`` (``comment_text toxicity split``):
                              label toxicity >= 0.5; splits train / val / test
amazon          v2.0, v2.1    ``reviews.csv`` (``reviewText overall``, 1-5 stars -> 0-4) and
                              ``splits/user.csv`` (0 train, 1 val, 2 id_val, 3 test, 4 id_test,
                              -1 not in the data set)
poverty         v1.1          ``dhs_metadata.csv`` (``country wealthpooled``), the fold's test and
                              val countries are OOD ``test`` / ``val``; the other rows are
                              shuffled by numpy's ``default_rng(ord(fold) + 541433)`` and the
                              first 2000 give ``id_val`` (1000) and ``id_test`` (1000), the rest
                              ``train``; ``images/landsat_poverty_img_<row>.npz`` (``x``: 8 x
                              224 x 224, already normalised)
==============  ============  ================================================================

FMoW's split names are WILDS 2.0's (its default ``use_ood_val=True``): the in-distribution
validation split is ``id_val`` and ``val`` is the OOD one. WILDS 1.x (``use_ood_val=False``, the
release Laplace Redux used) called the same in-distribution images ``val``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    import pandas as pd

from bench.harness.errors import ConfigError

# Split names per data set, in the order of WILDS 2.0's split_dict.
SPLITS: dict[str, tuple[str, ...]] = {
    "camelyon17": ("train", "id_val", "test", "val"),
    "fmow": ("train", "id_val", "id_test", "val", "test"),
    "civilcomments": ("train", "val", "test"),
    "amazon": ("train", "val", "id_val", "test", "id_test"),
    "poverty": ("train", "id_val", "id_test", "val", "test"),
}
# The files each data set's folder must hold (besides RELEASE_v<version>.txt).
REQUIRED_FILES: dict[str, tuple[str, ...]] = {
    "camelyon17": ("metadata.csv", "patches/"),
    "fmow": ("rgb_metadata.csv", "country_code_mapping.csv", "images/"),
    "civilcomments": ("all_data_with_identities.csv",),
    "amazon": ("reviews.csv", "splits/user.csv"),
    "poverty": ("dhs_metadata.csv", "images/"),
}
INPUT_KINDS = {"camelyon17": "image", "fmow": "image", "civilcomments": "text",
               "amazon": "text", "poverty": "multispectral"}

# fMoW's 62 categories in sorted order; WILDS numbers the labels by this order.
FMOW_CATEGORIES = (
    "airport", "airport_hangar", "airport_terminal", "amusement_park", "aquaculture",
    "archaeological_site", "barn", "border_checkpoint", "burial_site", "car_dealership",
    "construction_site", "crop_field", "dam", "debris_or_rubble", "educational_institution",
    "electric_substation", "factory_or_powerplant", "fire_station", "flooded_road", "fountain",
    "gas_station", "golf_course", "ground_transportation_station", "helipad", "hospital",
    "impoverished_settlement", "interchange", "lake_or_pond", "lighthouse", "military_facility",
    "multi-unit_residential", "nuclear_powerplant", "office_building", "oil_or_gas_facility",
    "park", "parking_lot_or_garage", "place_of_worship", "police_station", "port", "prison",
    "race_track", "railway_bridge", "recreational_facility", "road_bridge", "runway",
    "shipyard", "shopping_mall", "single-unit_residential", "smokestack", "solar_farm",
    "space_facility", "stadium", "storage_tank", "surface_mine", "swimming_pool", "toll_booth",
    "tower", "tunnel_opening", "waste_disposal", "water_treatment_facility", "wind_farm", "zoo",
)
FMOW_OOD_TEST_FROM = "2016-01-01"
FMOW_OOD_VAL_FROM = "2013-01-01"

# PovertyMap folds (WILDS' 2009-17 A-E): the OOD test and OOD validation countries.
POVERTY_FOLDS: dict[str, dict[str, tuple[str, ...]]] = {
    "A": {"test": ("angola", "cote_d_ivoire", "ethiopia", "mali", "rwanda"),
          "val": ("benin", "burkina_faso", "guinea", "sierra_leone", "tanzania")},
    "B": {"test": ("benin", "burkina_faso", "guinea", "sierra_leone", "tanzania"),
          "val": ("cameroon", "ghana", "malawi", "zimbabwe")},
    "C": {"test": ("cameroon", "ghana", "malawi", "zimbabwe"),
          "val": ("democratic_republic_of_congo", "mozambique", "nigeria", "togo", "uganda")},
    "D": {"test": ("democratic_republic_of_congo", "mozambique", "nigeria", "togo", "uganda"),
          "val": ("kenya", "lesotho", "senegal", "zambia")},
    "E": {"test": ("kenya", "lesotho", "senegal", "zambia"),
          "val": ("angola", "cote_d_ivoire", "ethiopia", "mali", "rwanda")},
}
POVERTY_ID_EVAL_SIZE = 2000
POVERTY_SHUFFLE_OFFSET = 541433
AMAZON_SPLIT_CODES = {0: "train", 1: "val", 2: "id_val", 3: "test", 4: "id_test"}


@dataclass(frozen=True)
class WildsTable:
    """Every row of one data set: its split ("" for none), target and input.

    ``inputs`` holds a file path relative to ``folder`` for images and multispectral arrays,
    the text itself for text data sets; ``targets`` is ``long`` for classification and
    ``float32`` for PovertyMap's wealth index.
    """

    folder: Path
    split: np.ndarray
    targets: Tensor
    inputs: list[str]
    input_kind: str

    def rows(self, split: str) -> np.ndarray:
        """Row indices of ``split``, in file order."""
        return np.flatnonzero(self.split == split)


def data_folder(root: str | Path, name: str, version: str) -> Path:
    """``<root>/<name>_v<version>``, the folder WILDS downloads into."""
    return Path(root) / f"{name}_v{version}"


def missing_files(root: str | Path, name: str, version: str) -> list[str]:
    """The files of the layout absent under ``root`` (paths relative to the data root)."""
    folder = data_folder(root, name, version)
    wanted = (f"RELEASE_v{version}.txt", *REQUIRED_FILES[name])
    return [f"{folder.name}/{item}" for item in wanted
            if not (folder / item.rstrip("/")).exists()]


def _read_csv(path: Path, **options) -> pd.DataFrame:
    import pandas as pd  # slow import: on use

    try:
        return pd.read_csv(path, **options)
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise ConfigError(f"cannot read {path}: {err}") from None


def _columns(frame: pd.DataFrame, path: Path, names: Sequence[str]) -> None:
    absent = [name for name in names if name not in frame.columns]
    if absent:
        raise ConfigError(f"{path} lacks the column(s) {', '.join(absent)} of the WILDS layout")


def read_camelyon17(folder: Path) -> WildsTable:
    """Camelyon17-WILDS: patches, tumour label, split by hospital (module docstring)."""
    path = folder / "metadata.csv"
    frame = _read_csv(path, index_col=0, dtype={"patient": "str"})
    _columns(frame, path, ("patient", "node", "x_coord", "y_coord", "tumor", "center", "split"))
    split = np.where(frame["split"].to_numpy() == 0, "train", "id_val").astype(object)
    split[frame["center"].to_numpy() == 1] = "val"
    split[frame["center"].to_numpy() == 2] = "test"
    inputs = [f"patches/patient_{p}_node_{n}/patch_patient_{p}_node_{n}_x_{x}_y_{y}.png"
              for p, n, x, y in frame[["patient", "node", "x_coord", "y_coord"]]
              .itertuples(index=False, name=None)]
    targets = torch.tensor(frame["tumor"].to_numpy(), dtype=torch.long)
    return WildsTable(folder, split, targets, inputs, "image")


def read_fmow(folder: Path) -> WildsTable:
    """FMoW-WILDS, ``time_after_2016`` split, sequestered rows left out (module docstring)."""
    import pandas as pd  # slow import: on use

    path = folder / "rgb_metadata.csv"
    frame = _read_csv(path)
    _columns(frame, path, ("split", "category", "timestamp"))
    unknown = sorted(set(frame["category"]) - set(FMOW_CATEGORIES))
    if unknown:
        raise ConfigError(f"{path}: unknown fMoW categories {unknown[:3]}")
    stamps = pd.to_datetime(frame["timestamp"], utc=True)
    ood_test = (stamps >= pd.Timestamp(FMOW_OOD_TEST_FROM, tz="UTC")).to_numpy()
    ood_val = ((stamps >= pd.Timestamp(FMOW_OOD_VAL_FROM, tz="UTC")).to_numpy()) & ~ood_test
    source = frame["split"].to_numpy()
    split = np.full(len(frame), "", dtype=object)
    in_dist = ~(ood_test | ood_val)
    split[(source == "train") & in_dist] = "train"
    split[(source == "val") & in_dist] = "id_val"
    split[(source == "test") & in_dist] = "id_test"
    split[(source == "val") & ood_val] = "val"
    split[(source == "test") & ood_test] = "test"
    kept = source != "seq"
    index = {name: i for i, name in enumerate(FMOW_CATEGORIES)}
    targets = torch.as_tensor([index[c] for c in frame["category"][kept]], dtype=torch.long)
    inputs = [f"images/rgb_img_{row}.png" for row in np.flatnonzero(kept)]
    return WildsTable(folder, split[kept], targets, inputs, "image")


def read_civilcomments(folder: Path) -> WildsTable:
    """CivilComments-WILDS: comment text, toxicity >= 0.5, splits train / val / test."""
    path = folder / "all_data_with_identities.csv"
    frame = _read_csv(path, index_col=0)
    _columns(frame, path, ("comment_text", "toxicity", "split"))
    split = frame["split"].astype(str).to_numpy().astype(object)
    split[~np.isin(split, SPLITS["civilcomments"])] = ""
    targets = torch.tensor((frame["toxicity"].to_numpy() >= 0.5).astype(np.int64))
    return WildsTable(folder, split, targets, frame["comment_text"].astype(str).tolist(), "text")


def read_amazon(folder: Path) -> WildsTable:
    """Amazon-WILDS, ``user`` split: review text, star rating - 1 (module docstring)."""
    path = folder / "reviews.csv"
    frame = _read_csv(path, dtype={"reviewText": str}, keep_default_na=False, na_values=[],
                      quoting=csv.QUOTE_NONNUMERIC)
    _columns(frame, path, ("reviewText", "overall"))
    split_path = folder / "splits" / "user.csv"
    codes = _read_csv(split_path)
    _columns(codes, split_path, ("split",))
    if len(codes) != len(frame):
        raise ConfigError(f"{split_path} has {len(codes)} rows, {path} has {len(frame)}")
    split = np.array([AMAZON_SPLIT_CODES.get(int(c), "") for c in codes["split"]], dtype=object)
    stars = frame["overall"].to_numpy().astype(np.int64)
    if not np.isin(stars, np.arange(1, 6)).all():
        raise ConfigError(f"{path}: column overall must hold star ratings 1 to 5")
    return WildsTable(folder, split, torch.tensor(stars - 1),
                      frame["reviewText"].tolist(), "text")


def poverty_split(countries: np.ndarray, fold: str) -> np.ndarray:
    """Split name per row of PovertyMap's metadata for ``fold`` (module docstring)."""
    if fold not in POVERTY_FOLDS:
        raise ConfigError(f"dataset.fold={fold!r} is not valid; choose one of: "
                          f"{', '.join(POVERTY_FOLDS)}")
    split = np.full(len(countries), "", dtype=object)
    split[np.isin(countries, POVERTY_FOLDS[fold]["test"])] = "test"
    split[np.isin(countries, POVERTY_FOLDS[fold]["val"])] = "val"
    in_dist = np.flatnonzero(split == "")
    shuffled = in_dist.copy()
    np.random.default_rng(ord(fold) + POVERTY_SHUFFLE_OFFSET).shuffle(shuffled)
    evaluation = shuffled[:POVERTY_ID_EVAL_SIZE]
    half = POVERTY_ID_EVAL_SIZE // 2
    split[shuffled[POVERTY_ID_EVAL_SIZE:]] = "train"
    split[evaluation[:half]] = "id_val"
    split[evaluation[half:]] = "id_test"
    return split


def read_poverty(folder: Path, fold: str) -> WildsTable:
    """PovertyMap-WILDS, one country fold: asset wealth index (module docstring)."""
    path = folder / "dhs_metadata.csv"
    frame = _read_csv(path)
    _columns(frame, path, ("country", "wealthpooled"))
    split = poverty_split(frame["country"].astype(str).to_numpy(), fold)
    targets = torch.tensor(frame["wealthpooled"].to_numpy(), dtype=torch.float32)
    inputs = [f"images/landsat_poverty_img_{row}.npz" for row in range(len(frame))]
    return WildsTable(folder, split, targets, inputs, "multispectral")


READERS: dict[str, Callable[..., WildsTable]] = {
    "camelyon17": read_camelyon17, "fmow": read_fmow, "civilcomments": read_civilcomments,
    "amazon": read_amazon, "poverty": read_poverty,
}


def read_table(root: str | Path, name: str, version: str, fold: str = "A") -> WildsTable:
    """The rows of data set ``name`` (one of :data:`READERS`) under ``root``."""
    folder = data_folder(root, name, version)
    if name == "poverty":
        return read_poverty(folder, fold)
    return READERS[name](folder)
