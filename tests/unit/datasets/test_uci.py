"""UCI loaders (SSLA Tables 3-4): raw-file readers, the fallback chain, splits and scaling.

Three layers: tiny generated raw files in the real layouts (always run), the offline copies in
``../shared/data/uci`` (skipped when absent), including a bit-for-bit comparison with the
authors' own preprocessing, and the missing-data error (ucimlrepo patched, no network).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import ucimlrepo
from hydra.utils import instantiate
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from bench.datasets.data_root import data_root
from bench.datasets.uci import RECIPES, uci_overview, uci_split_indices, uci_splits
from bench.datasets.uci_raw import (
    FOLDER_CHECKSUMS,
    UciDataCorruptError,
    UciDataMissingError,
    load_uci_frame,
)
from bench.harness.errors import ConfigError
from bench.harness.hashing import file_sha256
from tests.helpers import SHARED_DATA, compose_config

SHARED = SHARED_DATA
needs_shared = pytest.mark.skipif(not (SHARED / "uci").is_dir(),
                                  reason="../shared/data/uci (offline UCI copies) not present")
NAMES = list(RECIPES)
PROTOCOLS = ["paper", "corrected"]
WINE = ["fixed_acidity", "volatile_acidity", "citric_acid", "residual_sugar", "chlorides",
        "free_sulfur_dioxide", "total_sulfur_dioxide", "density", "pH", "sulphates", "alcohol",
        "quality"]
HOUR = ["instant", "dteday", "season", "yr", "mnth", "hr", "holiday", "weekday", "workingday",
        "weathersit", "temp", "atemp", "hum", "windspeed", "casual", "registered", "cnt"]
ORDERS = ["Non-urgent order", "Urgent order", "Order type A", "Order type B", "Order type C",
          "Fiscal sector orders", "Orders from the traffic controller sector",
          "Banking orders (1)", "Banking orders (2)", "Banking orders (3)"]
REAL_ESTATE = ["No", "X1 transaction date", "X2 house age",
               "X3 distance to the nearest MRT station", "X4 number of convenience stores",
               "X5 latitude", "X6 longitude", "Y house price of unit area"]
COLUMNS = {
    "auto_mpg": ["mpg", "cylinders", "displacement", "horsepower", "weight", "acceleration",
                 "model_year", "origin", "car_name"],
    "liver": ["mcv", "alkphos", "sgpt", "sgot", "gammagt", "drinks", "selector"],
    "concrete": ["Cement", "Blast Furnace Slag", "Fly Ash", "Water", "Superplasticizer",
                 "Coarse Aggregate", "Fine Aggregate", "Age", "Concrete compressive strength"],
    "wine": [*WINE, "color"],
    "bike": HOUR,
    "airfoil": ["frequency", "attack-angle", "chord-length", "free-stream-velocity",
                "suction-side-displacement-thickness", "scaled-sound-pressure"],
    "daily_demand": ["Week of the month", "Day of the week", *ORDERS, "Total orders"],
    "real_estate": REAL_ESTATE,
}
# name: rows loaded, rows used, test before cut, test, train (notes §7), features paper/corrected
PAPER_TABLE = {
    "auto_mpg": (398, 392, 79, 79, 250, 8, 8),
    "liver": (345, 345, 69, 69, 220, 5, 5),
    "concrete": (1030, 1030, 206, 50, 659, 8, 8),
    "wine": (6497, 6497, 1300, 50, 4157, 17, 17),
    "bike": (17379, 17379, 3476, 50, 11122, 49, 55),
    "airfoil": (1503, 1503, 301, 50, 961, 5, 5),
    "daily_demand": (60, 60, 12, 12, 38, 18, 18),
    "real_estate": (414, 414, 83, 83, 264, 6, 6),
}
N_FIXTURE = 40


# --- tiny raw files in the real layouts ----------------------------------------------------

def _write_fixtures(root: Path) -> None:
    """Generated rows written as the UCI files are (separators, quotes, CRLF, xlsx)."""
    rng = np.random.default_rng(0)
    n = N_FIXTURE
    uci = root / "uci"
    for folder in ("auto_mpg", "liver_disorders", "wine_quality", "bike_sharing", "airfoil",
                   "daily_demand", "real_estate"):
        (uci / folder).mkdir(parents=True)
    lines = []
    for i in range(n):
        hp = "?" if i in (3, 17) else f"{rng.integers(50, 200)}.0"
        lines.append(f"{rng.uniform(10, 40):.1f}   {rng.choice([4, 6, 8])}   "
                     f"{rng.uniform(70, 400):.1f}      {hp:<11}{rng.integers(1600, 5000)}.      "
                     f"{rng.uniform(8, 25):.1f}   {rng.integers(70, 83)}  {1 + i % 3}\t"
                     f'"car {i} model"\n')
    (uci / "auto_mpg" / "auto-mpg.data").write_text("".join(lines))
    liver = [f"{rng.integers(65, 100)},{rng.integers(20, 140)},{rng.integers(4, 150)},"
             f"{rng.integers(5, 80)},{rng.integers(5, 300)},{rng.choice([0.0, 0.5, 2.0, 6.0])},"
             f"{1 + i % 2}\n" for i in range(n)]
    (uci / "liver_disorders" / "bupa.data").write_text("".join(liver))
    for color, rows in (("red", n // 2), ("white", n - n // 2)):
        header = ";".join(f'"{c.replace("_", " ")}"' for c in WINE)
        body = [";".join([*(f"{v:.3f}" for v in rng.uniform(0.1, 15, 10)),
                          f"{rng.uniform(8, 15):.1f}", str(3 + i % 7)]) for i in range(rows)]
        (uci / "wine_quality" / f"winequality-{color}.csv").write_text(
            "\n".join([header, *body]) + "\n")
    hour = [",".join(HOUR)]
    for i in range(n):
        casual, registered = rng.integers(0, 50), rng.integers(0, 300)
        hour.append(",".join(map(str, [
            i + 1, f"2011-01-{1 + i // 24:02d}", 1 + i % 4, i % 2, 1 + i % 12, i % 24, i % 7 == 0,
            i % 7, int(i % 7 not in (0, 6)), 1 + i % 3, round(rng.uniform(0, 1), 2),
            round(rng.uniform(0, 1), 4), round(rng.uniform(0, 1), 2),
            round(rng.uniform(0, 0.8), 4), casual, registered, casual + registered])))
    (uci / "bike_sharing" / "hour.csv").write_bytes(
        ("\r\n".join(hour).replace("True", "1").replace("False", "0") + "\r\n").encode())
    airfoil = [f"{rng.choice([800, 1000, 1250])}\t{rng.uniform(0, 22):.1f}\t"
               f"{rng.choice([0.0254, 0.1524, 0.3048])}\t{rng.choice([31.7, 39.6, 71.3])}\t"
               f"{rng.uniform(0.0004, 0.06):.8f}\t{rng.uniform(105, 140):.3f}" for _ in range(n)]
    (uci / "airfoil" / "airfoil_self_noise.dat").write_bytes(
        ("\r\n".join(airfoil) + "\r\n").encode())
    header = ["Week of the month (first week, second, third, fourth or fifth week)",
              "Day of the week (Monday to Friday)", *ORDERS, "Target (Total orders)"]
    demand = [";".join(header)]
    for i in range(n):
        demand.append(";".join([str(1 + i // 10 % 5), str(2 + i % 5),
                                *(f"{v:.3f}" for v in rng.uniform(0, 400, 7)),
                                *(str(v) for v in rng.integers(0, 200000, 3)),
                                f"{rng.uniform(100, 600):.3f}"]))
    (uci / "daily_demand" / "Daily_Demand_Forecasting_Orders.csv").write_bytes(
        ("\r\n".join(demand) + "\r\n").encode())
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "工作表1"
    sheet.append(REAL_ESTATE)
    for i in range(n):
        sheet.append([i + 1, 2012.667 + (i % 8) / 12, float(rng.uniform(0, 43)),
                      float(rng.uniform(20, 6500)), int(rng.integers(0, 11)),
                      float(rng.uniform(24.93, 25.02)), float(rng.uniform(121.47, 121.57)),
                      float(rng.uniform(7, 118))])
    book.save(uci / "real_estate" / "Real estate valuation data set.xlsx")
    concrete = SHARED / "uci" / "concrete" / "Concrete_Data.xls"
    if concrete.is_file():  # writing .xls needs xlwt, which is not a dependency
        (uci / "concrete").mkdir()
        shutil.copy(concrete, uci / "concrete" / concrete.name)
    for folder in uci.iterdir():  # generated copies declare their checksums
        sums = [f"{file_sha256(path)}  {path.name}" for path in sorted(folder.iterdir())]
        (folder / FOLDER_CHECKSUMS).write_text("\n".join(sums) + "\n")


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("uci_fixtures")
    _write_fixtures(root)
    return root


def _skip_without(root: Path, name: str) -> None:
    if name == "concrete" and not (root / "uci" / "concrete").is_dir():
        pytest.skip("concrete fixture is the shared .xls (no xls writer installed)")


@pytest.mark.parametrize("name", NAMES)
def test_fixture_frames_have_the_ucimlrepo_columns(fixture_root, name):
    _skip_without(fixture_root, name)
    frame = load_uci_frame(name, root=fixture_root)
    assert list(frame.columns) == COLUMNS[name]
    assert frame.attrs["source"].startswith("raw files:")
    if name != "concrete":
        assert len(frame) == N_FIXTURE
    if name == "auto_mpg":
        assert frame["horsepower"].isna().sum() == 2
        assert frame["car_name"].iloc[0] == "car 0 model"
    if name == "wine":
        assert frame["color"].tolist() == ["red"] * 20 + ["white"] * 20


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", NAMES)
def test_fixture_splits_are_finite_float32_and_deterministic(fixture_root, name, protocol):
    _skip_without(fixture_root, name)
    splits = uci_splits(name, protocol=protocol, seed=3, root=fixture_root)
    again = uci_splits(name, protocol=protocol, seed=3, root=fixture_root)
    other = uci_splits(name, protocol=protocol, seed=4, root=fixture_root)
    info = splits.info
    for part in ("train", "val", "test"):
        x, y = getattr(splits, f"x_{part}"), getattr(splits, f"y_{part}")
        assert x.dtype == y.dtype == torch.float32
        assert x.shape == (info[f"n_{part}"], info["n_features"]) and y.shape == (len(x), 1)
        assert torch.isfinite(x).all() and torch.isfinite(y).all()
        assert torch.equal(x, getattr(again, f"x_{part}"))
        assert torch.equal(y, getattr(again, f"y_{part}"))
    assert not torch.equal(splits.y_train, other.y_train[: len(splits.y_train)])
    assert len(info["feature_names"]) == info["n_features"]
    assert info["protocol"] == protocol and info["target"] == RECIPES[name].target
    assert splits.y_scale == info["y_scale"] > 0


@pytest.mark.parametrize("name", ["airfoil", "liver", "bike"])
def test_scalers_are_fit_where_the_protocol_says(fixture_root, name):
    frame = load_uci_frame(name, root=fixture_root)
    target = frame[RECIPES[name].target].to_numpy(np.float64)
    paper = uci_splits(name, protocol="paper", root=fixture_root)
    corrected = uci_splits(name, protocol="corrected", root=fixture_root)
    idx = uci_split_indices(len(frame), 42, 0)
    paper_rows = idx.train_val if name == "bike" else slice(None)
    assert paper.info["y_mean"] == pytest.approx(target[paper_rows].mean(), rel=1e-6)
    assert paper.info["y_scale"] == pytest.approx(target[paper_rows].std(), rel=1e-6)
    assert corrected.info["y_mean"] == pytest.approx(target[idx.train].mean(), rel=1e-9)
    assert corrected.info["y_scale"] == pytest.approx(target[idx.train].std(), rel=1e-9)
    n_std = len(corrected.info["standardised"])
    x = corrected.x_train[:, :n_std].double()
    assert torch.allclose(x.mean(0), torch.zeros(n_std, dtype=x.dtype), atol=1e-6)
    assert torch.allclose(x.std(0, correction=0), torch.ones(n_std, dtype=x.dtype), atol=1e-6)


def test_liver_drinks_is_unscaled_in_the_paper_protocol_only(fixture_root):
    drinks = set(load_uci_frame("liver", root=fixture_root)["drinks"].tolist())
    paper = uci_splits("liver", protocol="paper", root=fixture_root)
    corrected = uci_splits("liver", protocol="corrected", root=fixture_root)
    assert paper.info["feature_names"][-1] == "drinks" and paper.info["unscaled"] == ["drinks"]
    assert set(paper.x_train[:, -1].tolist()) <= drinks
    assert "drinks" in corrected.info["standardised"] and not corrected.info["unscaled"]
    assert not set(corrected.x_train[:, -1].tolist()) <= drinks


def test_test_subsample_cuts_with_an_explicit_generator(fixture_root):
    full = uci_splits("airfoil", root=fixture_root, test_subsample=0)
    cut = uci_splits("airfoil", root=fixture_root, test_subsample=3)
    keep = torch.randperm(len(full.x_test), generator=torch.Generator().manual_seed(42))[:3]
    assert torch.equal(cut.x_test, full.x_test[keep])
    assert cut.info["subsampled"] and cut.info["n_test_before_subsample"] == len(full.x_test)


def test_explicit_generator_matches_the_authors_global_seeding():
    with torch.random.fork_rng():
        torch.manual_seed(42)
        global_draw = torch.randperm(206)
    explicit = torch.randperm(206, generator=torch.Generator().manual_seed(42))
    assert torch.equal(global_draw, explicit)


@pytest.mark.parametrize("name", NAMES)
def test_split_sizes_reproduce_table_3(name):
    _, n_used, n_test_full, n_test, n_train, _, _ = PAPER_TABLE[name]
    idx = uci_split_indices(n_used, 42, 50 if RECIPES[name].medium else 0)
    assert (idx.n_test_full, len(idx.test), len(idx.train)) == (n_test_full, n_test, n_train)
    assert len(idx.train) + len(idx.val) + len(idx.cal) + idx.n_test_full == n_used


def test_bad_arguments_raise_one_line_config_errors(fixture_root):
    with pytest.raises(ConfigError, match="protocol.name='fancy'.*paper, corrected"):
        uci_splits("airfoil", protocol="fancy", root=fixture_root)
    with pytest.raises(ConfigError, match="dataset.uci_name='boston'.*airfoil"):
        uci_splits("boston", root=fixture_root)
    with pytest.raises(ConfigError, match="test_subsample=-1"):
        uci_splits("airfoil", test_subsample=-1, root=fixture_root)


def test_data_root_reads_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path))
    assert data_root() == tmp_path
    monkeypatch.delenv("BENCH_DATA_DIR")
    assert data_root() == Path("data")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.second_tier
def test_dataset_configs_build_the_data_set(name, fixture_root):
    _skip_without(fixture_root, name)
    cfg = compose_config([f"dataset=uci_{name}", "protocol=corrected"])
    splits = instantiate(cfg.dataset, root=str(fixture_root)).splits(seed=7)
    assert cfg.dataset.name == f"uci_{name}"
    assert (splits.info["dataset"], splits.info["protocol"], splits.info["seed"]) == (
        name, "corrected", 7)


# --- the missing-data error and the ucimlrepo fallback -----------------------------------

def _no_network(*args, **kwargs):
    raise ConnectionError("network disabled in tests")


def test_missing_files_raise_one_line_error_naming_files_and_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(ucimlrepo, "fetch_ucirepo", _no_network)
    with pytest.raises(UciDataMissingError) as err:
        load_uci_frame("wine", root=tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert "'winequality-red.csv', 'winequality-white.csv'" in message
    assert str(tmp_path / "uci" / "wine_quality") in message
    assert "BENCH_DATA_DIR" in message and "ConnectionError" in message
    assert isinstance(err.value, FileNotFoundError)


def test_ucimlrepo_download_is_cached_and_read_back(monkeypatch, tmp_path, fixture_root):
    original = load_uci_frame("daily_demand", root=fixture_root)
    fetched = SimpleNamespace(data=SimpleNamespace(original=original.copy()))
    monkeypatch.setattr(ucimlrepo, "fetch_ucirepo", lambda id: fetched if id == 409 else None)
    first = load_uci_frame("daily_demand", root=tmp_path)
    assert first.attrs["source"].startswith("ucimlrepo download")
    assert (tmp_path / "uci" / "daily_demand" / "ucimlrepo_original.csv").is_file()
    monkeypatch.setattr(ucimlrepo, "fetch_ucirepo", _no_network)
    cached = load_uci_frame("daily_demand", root=tmp_path)
    assert cached.attrs["source"].startswith("ucimlrepo cache")
    pd.testing.assert_frame_equal(cached, original, check_dtype=False)
    from_cache = uci_splits("daily_demand", root=tmp_path)
    from_raw = uci_splits("daily_demand", root=fixture_root)
    assert torch.equal(from_cache.x_train, from_raw.x_train)


# --- the offline copies in ../shared/data/uci ----------------------------------------------

@needs_shared
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.second_tier
def test_shared_data_loads_with_the_paper_sizes(name, protocol):
    n_rows, n_used, n_test_full, n_test, n_train, d_paper, d_corrected = PAPER_TABLE[name]
    splits = uci_splits(name, protocol=protocol, root=SHARED)
    info = splits.info
    assert list(load_uci_frame(name, root=SHARED).columns) == COLUMNS[name]
    assert (info["n_rows"], info["n_rows_used"]) == (n_rows, n_used)
    assert (info["n_test_before_subsample"], info["n_test"], info["n_train"]) == (
        n_test_full, n_test, n_train)
    assert info["n_features"] == (d_paper if protocol == "paper" else d_corrected)
    assert info["subsampled"] == RECIPES[name].medium
    for tensor in (splits.x_train, splits.y_train, splits.x_val, splits.y_val, splits.x_test,
                   splits.y_test):
        assert tensor.dtype == torch.float32 and torch.isfinite(tensor).all()


@needs_shared
def test_overview_lists_every_data_set():
    rows = uci_overview(root=SHARED)
    assert [r["dataset"] for r in rows] == NAMES
    assert {r["dataset"]: r["n_test"] for r in rows}["real_estate"] == 83


def _authors_preprocessing(name: str, original: pd.DataFrame):
    """The authors' ``setup_nonshifted_dataset`` per data set, restated with sklearn."""
    target = RECIPES[name].target
    split = {"test_size": 0.2, "random_state": 42}

    def f32(a):
        return torch.tensor(np.asarray(a)).float()

    if name in ("concrete", "airfoil", "real_estate"):
        features = original.drop(columns=[target, "No"] if name == "real_estate" else [target])
        x = f32(StandardScaler().fit_transform(f32(features.values)))
        y = f32(StandardScaler().fit_transform(f32(original[[target]].values)))
        return train_test_split(x, y, **split)
    if name in ("wine", "auto_mpg"):
        frame = original.copy()
        if name == "wine":
            frame["color"] = [0 if c == "red" else 1 for c in frame["color"]]
        else:
            frame = frame.dropna().drop(columns=["car_name"])
        cat = ["quality", "color"] if name == "wine" else ["origin"]
        features = frame.drop(columns=[target])
        encoded = OneHotEncoder(drop="first").fit_transform(features[cat]).toarray()
        cont = StandardScaler().fit_transform(features.drop(columns=cat))
        x = torch.cat([f32(cont), f32(encoded)], dim=1)
        y = f32(StandardScaler().fit_transform(f32(frame[[target]].values.reshape(-1, 1))))
        return train_test_split(x, y, **split)
    if name == "liver":
        features = original.drop(columns=["selector", target])
        cont = f32(features.drop(columns=["drinks"]).values)
        x = torch.cat([f32(StandardScaler().fit_transform(cont)),
                       f32(features["drinks"].values).reshape(-1, 1)], dim=1)
        y = f32(StandardScaler().fit_transform(f32(original[[target]].values)))
        return train_test_split(x, y, **split)
    if name == "daily_demand":
        columns = ColumnTransformer([
            ("cat", OneHotEncoder(drop="first"), ["Week of the month", "Day of the week"]),
            ("cont", StandardScaler(), ORDERS)])
        x = f32(columns.fit_transform(original.drop(columns=[target])))
        y = f32(StandardScaler().fit_transform(original[[target]].values))
        return train_test_split(x, y, **split)
    features = original.drop(columns=["dteday", "instant", target])
    x_tr, x_te, y_tr, y_te = train_test_split(features, original[target], **split)
    columns = ColumnTransformer([
        ("num", StandardScaler(), ["windspeed", "hum", "atemp"]),
        ("cat", OneHotEncoder(drop="first"), ["season", "mnth", "hr", "weekday", "weathersit"])])
    y_scaler = StandardScaler().fit(y_tr.values.reshape(-1, 1))
    return (f32(columns.fit_transform(x_tr).toarray()), f32(columns.transform(x_te).toarray()),
            f32(y_scaler.transform(y_tr.values.reshape(-1, 1))),
            f32(y_scaler.transform(y_te.values.reshape(-1, 1))))


@needs_shared
@pytest.mark.parametrize("name", NAMES)
def test_paper_protocol_equals_the_authors_datamodule_bit_for_bit(name):
    x_tr, x_te, y_tr, y_te = _authors_preprocessing(name, load_uci_frame(name, root=SHARED))
    x_tr, x_val, y_tr, y_val = train_test_split(x_tr, y_tr, test_size=0.2, random_state=42)
    x_val, _, y_val, _ = train_test_split(x_val, y_val, test_size=0.4, random_state=42)
    if RECIPES[name].medium:
        with torch.random.fork_rng():
            torch.manual_seed(42)
            keep = torch.randperm(len(x_te))[:50]
        x_te, y_te = x_te[keep], y_te[keep]
    ours = uci_splits(name, protocol="paper", root=SHARED)
    for theirs, mine in ((x_tr, ours.x_train), (y_tr, ours.y_train), (x_val, ours.x_val),
                         (y_val, ours.y_val), (x_te, ours.x_test), (y_te, ours.y_test)):
        assert torch.equal(theirs, mine)


def _copy_source(tmp_path: Path, folder: str) -> Path:
    source = SHARED / "uci" / folder
    if not source.is_dir():
        pytest.skip("needs the shared UCI files")
    target = tmp_path / "uci" / folder
    shutil.copytree(source, target)
    return target


def test_a_file_cut_on_a_line_boundary_is_named(tmp_path):
    folder = _copy_source(tmp_path, "daily_demand")
    path = folder / "Daily_Demand_Forecasting_Orders.csv"
    lines = path.read_bytes().split(b"\r\n")
    path.write_bytes(b"\r\n".join(lines[:30]) + b"\r\n")
    with pytest.raises(UciDataCorruptError, match=r"Daily_Demand_Forecasting_Orders.csv: sha256"):
        load_uci_frame("daily_demand", root=tmp_path)
    accepted = (file_sha256(path),)  # accepted on purpose, a copy must still be complete
    with pytest.raises(UciDataCorruptError, match=r"29 data rows where UCI 'daily_demand' has 60"):
        load_uci_frame("daily_demand", root=tmp_path, accept_sha256=accepted)


@pytest.mark.parametrize("content", [b"", b"\x00\xff garbage \x89PNG" * 50])
def test_an_unreadable_file_is_named(tmp_path, content):
    folder = _copy_source(tmp_path, "real_estate")
    path = folder / "Real estate valuation data set.xlsx"
    path.write_bytes(content)
    with pytest.raises(UciDataCorruptError, match="cannot read .*Real estate valuation"):
        load_uci_frame("real_estate", root=tmp_path, accept_sha256=(file_sha256(path),))


def test_a_truncated_spreadsheet_is_named(tmp_path):
    folder = _copy_source(tmp_path, "concrete")
    path = folder / "Concrete_Data.xls"
    path.write_bytes(path.read_bytes()[:20000])
    with pytest.raises(UciDataCorruptError, match="Concrete_Data.xls"):
        load_uci_frame("concrete", root=tmp_path)


def test_a_declared_checksum_that_does_not_match_is_named(tmp_path):
    folder = _copy_source(tmp_path, "liver_disorders")
    (folder / FOLDER_CHECKSUMS).write_text(f"{'0' * 64}  bupa.data\n")
    with pytest.raises(UciDataCorruptError, match=f"bupa.data: sha256 .* is not the expected "
                                                  f"{'0' * 64} .*SHA256SUMS"):
        load_uci_frame("liver", root=tmp_path)


def test_one_changed_value_with_the_row_count_kept_stops_the_load(tmp_path):
    """The issue's case: airfoil with one value 1000 -> 123456 was accepted silently."""
    folder = _copy_source(tmp_path, "airfoil")
    path = folder / "airfoil_self_noise.dat"
    text = path.read_text()
    assert text.startswith("800\t")
    path.write_text("123456" + text[3:])
    changed = file_sha256(path)
    with pytest.raises(UciDataCorruptError) as caught:
        load_uci_frame("airfoil", root=tmp_path)
    message = str(caught.value)
    assert "\n" not in message and changed in message
    assert "74c75fd71783f1e6b71f8a622b993dc592897a97cd689c5090a07147a1b097b3" in message
    assert f"dataset.accept_sha256=[{changed}]" in message
    frame = load_uci_frame("airfoil", root=tmp_path, accept_sha256=(changed,))
    assert frame.iloc[0, 0] == 123456


def test_a_job_record_holds_the_sha256_of_every_data_file_it_read(tmp_path):
    from bench.datasets.data_files import files_read, forget_reads

    _copy_source(tmp_path, "airfoil")
    forget_reads()
    load_uci_frame("airfoil", root=tmp_path)
    path = tmp_path / "uci" / "airfoil" / "airfoil_self_noise.dat"
    assert files_read() == {str(path): file_sha256(path)}
    forget_reads()
    assert files_read() == {}


@pytest.mark.parametrize("value", ["4a40", ["xyz" * 22]])
def test_an_accepted_checksum_must_be_a_sha256_digest(value):
    from bench.datasets.uci import accepted_checksums

    with pytest.raises(ConfigError, match="dataset.accept_sha256"):
        accepted_checksums(value)


def test_a_data_folder_is_noted_file_by_file(tmp_path):
    from bench.datasets.data_files import files_read, forget_reads, note_read

    folder = tmp_path / "lsun" / "classroom_val"
    folder.mkdir(parents=True)
    (folder / "data.mdb").write_bytes(b"pages")
    (folder / "lock.mdb").write_bytes(b"")
    forget_reads()
    assert note_read(folder) == ""
    assert sorted(files_read()) == [str(folder / "data.mdb"), str(folder / "lock.mdb")]
    forget_reads()
