"""WILDS on-disk layouts read without the wilds package, split roles with the authors'
fallbacks, the dataset node's checks and its inputs (generated files, tests/wilds_fixtures)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from PIL import Image

from bench.datasets.wilds import (
    CheckpointMissingError,
    WildsData,
    WildsDataMissingError,
    resolve_roles,
)
from bench.datasets.wilds_inputs import IMAGENET_MEAN, IMAGENET_STD, HashingTokenizer
from bench.datasets.wilds_layout import (
    FMOW_CATEGORIES,
    POVERTY_FOLDS,
    SPLITS,
    missing_files,
    poverty_split,
    read_table,
)
from bench.harness.errors import ConfigError
from tests.helpers import compose_config
from tests.wilds_fixtures import (
    write_amazon,
    write_camelyon17,
    write_checkpoints,
    write_civilcomments,
    write_fmow,
    write_poverty,
)

ROLES_OF_THE_AUTHORS = {"train": ["train"], "validation": ["id_val", "train"],
                        "id_test": ["id_test", "validation"], "ood_test": ["test"]}


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_camelyon17_splits_by_hospital_and_patch_paths(tmp_path, rng):
    frame = write_camelyon17(tmp_path, rng)
    table = read_table(tmp_path, "camelyon17", "1.0")
    expected = np.select([frame["center"] == 1, frame["center"] == 2, frame["split"] == 1],
                         ["val", "test", "id_val"], "train")
    assert list(table.split) == list(expected)
    assert {s: int((table.split == s).sum()) for s in SPLITS["camelyon17"]} == {
        "train": 24, "id_val": 8, "test": 8, "val": 6}
    assert torch.equal(table.targets, torch.tensor(frame["tumor"].to_numpy()))
    assert table.inputs[0] == "patches/patient_000_node_0/patch_patient_000_node_0_x_100_y_200.png"
    assert all((table.folder / path).is_file() for path in table.inputs)


def test_fmow_time_split_drops_sequestered_rows_and_keeps_image_numbers(tmp_path, rng):
    frame = write_fmow(tmp_path, rng)
    table = read_table(tmp_path, "fmow", "1.1")
    assert len(table.split) == len(frame) - 1  # the sequestered row
    counts = {s: int((table.split == s).sum()) for s in ("train", "id_val", "id_test", "val",
                                                          "test", "")}
    # 2010 train, 2011 val, 2012 test in distribution; 2014 val and 2017 test OOD; the two
    # training rows of 2015 (an OOD validation year) belong to no split.
    assert counts == {"train": 24, "id_val": 8, "id_test": 8, "val": 6, "test": 8, "": 2}
    seq_row = int(np.flatnonzero(frame["split"] == "seq")[0])
    assert table.inputs[seq_row] == f"images/rgb_img_{seq_row + 1}.png"
    assert table.targets[1] == FMOW_CATEGORIES.index("barn")


def test_fmow_categories_are_the_62_sorted_names():
    assert len(FMOW_CATEGORIES) == 62 == len(set(FMOW_CATEGORIES))
    assert list(FMOW_CATEGORIES) == sorted(FMOW_CATEGORIES)


def test_civilcomments_and_amazon_labels_and_splits(tmp_path, rng):
    comments = write_civilcomments(tmp_path, rng)
    table = read_table(tmp_path, "civilcomments", "1.0")
    assert torch.equal(table.targets, torch.tensor((comments["toxicity"] >= 0.5).to_numpy(),
                                                   dtype=torch.long))
    assert list(table.split[:25]) == ["train"] * 24 + ["val"]
    assert table.inputs[3] == comments["comment_text"][3]
    reviews = write_amazon(tmp_path, rng)
    table = read_table(tmp_path, "amazon", "2.0")
    assert torch.equal(table.targets, torch.tensor(reviews["overall"].to_numpy() - 1,
                                                   dtype=torch.long))
    assert {s: int((table.split == s).sum()) for s in (*SPLITS["amazon"], "")} == {
        "train": 24, "val": 6, "id_val": 8, "test": 8, "id_test": 8, "": 2}


def test_poverty_fold_split_by_country_and_seeded_shuffle():
    countries = np.array(["angola"] * 3 + ["benin"] * 2 + ["kenya"] * 2100)
    split = poverty_split(countries, "A")
    assert set(split[:3]) == {"test"} and set(split[3:5]) == {"val"}
    in_dist = np.arange(5, len(countries))
    # WILDS: a copy of the in-distribution rows shuffled by default_rng(ord(fold) + 541433);
    # the first 1000 are id_val, the next 1000 id_test, the rest train.
    order = np.random.default_rng(ord("A") + 541433).permutation(in_dist)
    assert list(np.flatnonzero(split == "id_val")) == sorted(order[:1000])
    assert list(np.flatnonzero(split == "id_test")) == sorted(order[1000:2000])
    assert list(np.flatnonzero(split == "train")) == sorted(order[2000:])
    # Fold E swaps roles: angola is OOD validation there.
    assert set(poverty_split(countries, "E")[:3]) == {"val"}
    assert set(POVERTY_FOLDS) == set("ABCDE")
    with pytest.raises(ConfigError, match="dataset.fold='F'"):
        poverty_split(countries, "F")


def test_poverty_reader_targets_and_arrays(tmp_path, rng):
    frame = write_poverty(tmp_path, rng, n_in_distribution=2010)
    table = read_table(tmp_path, "poverty", "1.1", "A")
    assert table.targets.dtype == torch.float32
    assert torch.allclose(table.targets, torch.tensor(frame["wealthpooled"].to_numpy(),
                                                      dtype=torch.float32))
    assert int((table.split == "train").sum()) == 10
    assert table.inputs[4] == "images/landsat_poverty_img_4.npz"


def test_split_roles_follow_the_authors_fallbacks():
    camelyon = resolve_roles(SPLITS["camelyon17"], ROLES_OF_THE_AUTHORS, "camelyon17")
    assert camelyon == {"train": "train", "validation": "id_val", "id_test": "id_val",
                        "ood_test": "test"}
    civil = resolve_roles(SPLITS["civilcomments"], ROLES_OF_THE_AUTHORS, "civilcomments")
    assert civil == {"train": "train", "validation": "train", "id_test": "train",
                     "ood_test": "test"}
    for name in ("fmow", "amazon", "poverty"):
        roles = resolve_roles(SPLITS[name], ROLES_OF_THE_AUTHORS, name)
        assert roles["validation"] == "id_val" and roles["id_test"] == "id_test"


def test_a_split_that_no_chain_entry_names_is_one_line_with_the_choices():
    chains = {**ROLES_OF_THE_AUTHORS, "ood_test": ["ood_test_2"]}
    with pytest.raises(ConfigError, match=r"^dataset.splits.ood_test=\['ood_test_2'\] names no "
                       r"split of camelyon17; choose from: train, id_val, test, val$"):
        resolve_roles(SPLITS["camelyon17"], chains, "camelyon17")


def node(tmp_path, name: str = "wilds_camelyon17", *overrides: str) -> WildsData:
    cfg = compose_config(["experiment=laplace_redux/figure-10", f"dataset={name}",
                          f"dataset.root={tmp_path}", f"dataset.checkpoint_dir={tmp_path}/c",
                          "dataset.use_stand_in=true", "seed=0", *overrides])
    from hydra.utils import instantiate

    return instantiate(cfg.dataset)


def test_missing_files_stop_the_node_with_the_files_named(tmp_path):
    assert missing_files(tmp_path, "poverty", "1.1") == [
        "poverty_v1.1/RELEASE_v1.1.txt", "poverty_v1.1/dhs_metadata.csv", "poverty_v1.1/images/"]
    with pytest.raises(Exception) as raised:
        node(tmp_path, "wilds_poverty")
    cause = raised.value
    while not isinstance(cause, WildsDataMissingError):
        cause = cause.__cause__
    assert isinstance(cause, ConfigError) and isinstance(cause, FileNotFoundError)
    assert str(cause).startswith("WILDS data set 'poverty' v1.1 not found: put "
                                 "poverty_v1.1/RELEASE_v1.1.txt, poverty_v1.1/dhs_metadata.csv")


@pytest.mark.parametrize("override, message", [
    ("dataset.wilds_name=camelyon", "dataset.wilds_name='camelyon' is not valid; choose one "
     "of: amazon, camelyon17, civilcomments, fmow, poverty"),
    ("dataset.laplace_prior_precision=0", "dataset.laplace_prior_precision=0 is not valid; it "
     "must be a positive number"),
    ("dataset.reader=hub", "dataset.reader='hub' is not valid; choose one of: auto, wilds"),
])
def test_bad_node_values_are_one_line_naming_the_key(tmp_path, override, message):
    with pytest.raises(Exception) as raised:
        node(tmp_path, "wilds_camelyon17", override)
    assert message in str(raised.value)


@pytest.mark.second_tier
def test_job_loads_inputs_as_wilds_eval_transforms_make_them(tmp_path, rng):
    write_camelyon17(tmp_path, rng)
    write_checkpoints(tmp_path / "c", "camelyon17")
    job = node(tmp_path).for_seed(0)
    assert job.reader == "files" and job.roles["id_test"] == "id_val"
    x, y = job.split_dataset("ood_test")[0]
    table = read_table(tmp_path, "camelyon17", "1.0")
    row = int(table.rows("test")[0])
    pixels = np.asarray(Image.open(table.folder / table.inputs[row]), dtype=np.float64) / 255
    expected = (pixels[3, 5, 1] - IMAGENET_MEAN[1]) / IMAGENET_STD[1]
    assert x.shape == (3, 96, 96) and float(x[1, 3, 5]) == pytest.approx(expected, abs=1e-6)
    assert int(y) == int(table.targets[row])
    assert torch.equal(job.targets("validation"), table.targets[table.rows("id_val")])
    provenance = job.provenance(["ERM"])
    assert provenance["split_sizes"] == {"train": 24, "validation": 8, "id_test": 8,
                                         "ood_test": 8}
    assert len(provenance["checkpoints"]["ERM"]["sha256"]) == 64
    with pytest.raises(ConfigError, match="seed=10 is not valid for wilds_camelyon17"):
        node(tmp_path).for_seed(10)
    with pytest.raises(Exception, match="seed=10 is not valid for wilds_camelyon17"):
        node(tmp_path, "wilds_camelyon17", "seed=10")


def test_missing_checkpoint_names_the_file_and_the_variable(tmp_path, rng):
    write_camelyon17(tmp_path, rng)
    job = node(tmp_path).for_seed(3)
    with pytest.raises(CheckpointMissingError, match=r"put camelyon17/camelyon17_erm_"
                       r"densenet121_seed3.pth in \$BENCH_WILDS_CHECKPOINTS/"):
        job.require_checkpoints(["ERM"])


@pytest.mark.second_tier
def test_text_and_multispectral_inputs(tmp_path, rng):
    write_amazon(tmp_path, rng)
    job = node(tmp_path, "wilds_amazon").for_seed(1)
    tokens, label = job.split_dataset("train")[0]
    assert tokens.shape == (32, 2) and tokens.dtype == torch.long
    assert 0 <= int(label) <= 4
    assert torch.equal(tokens, HashingTokenizer(1000, 32)(read_table(
        tmp_path, "amazon", "2.0").inputs[0]))
    write_poverty(tmp_path, rng, n_in_distribution=2004)
    job = node(tmp_path, "wilds_poverty").for_seed(4)
    assert job.fold == "E" and job.roles["id_test"] == "id_test"
    x, y = job.split_dataset("ood_test")[0]
    row = int(read_table(tmp_path, "poverty", "1.1", "E").rows("test")[0])
    stored = np.load(tmp_path / "poverty_v1.1" / f"images/landsat_poverty_img_{row}.npz")["x"]
    assert torch.equal(x, torch.from_numpy(stored)) and y.dtype == torch.float32


@pytest.mark.skipif(importlib.util.find_spec("wilds") is not None,
                    reason="the wilds package is installed here")
def test_reader_wilds_without_the_package_is_one_line(tmp_path, rng):
    write_civilcomments(tmp_path, rng)
    job = node(tmp_path, "wilds_civilcomments", "dataset.reader=wilds").for_seed(0)
    with pytest.raises(ConfigError, match="dataset.reader='wilds' needs the wilds package"):
        job.roles  # noqa: B018 - reading the roles opens the data
