"""Small WILDS data sets in the real on-disk layouts and WILDS-format checkpoints of the
stand-in networks, for the Figure 10 tests (nothing here is real data)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image

from bench.harness.rng import make_generator
from bench.models.wilds_networks import LAST_LAYER, build_network

WORDS = ("good", "bad", "great", "awful", "fine", "product", "comment", "toxic", "nice", "rude")
STAND_INS = {
    "camelyon17": ("tiny_cnn", 2, {"in_channels": 3, "width": 8}),
    "fmow": ("tiny_cnn", 62, {"in_channels": 3, "width": 8}),
    "civilcomments": ("bag_of_words", 2, {"vocab_size": 1000, "dim": 16}),
    "amazon": ("bag_of_words", 5, {"vocab_size": 1000, "dim": 16}),
    "poverty": ("tiny_cnn", 1, {"in_channels": 8, "width": 8}),
}
CHECKPOINTS = {
    "camelyon17": ("camelyon17_erm_densenet121_seed{s}", "camelyon17_irm_densenet121_seed{s}",
                   "camelyon17_deepCORAL_densenet121_seed{s}",
                   "camelyon17_groupDRO_densenet121_seed{s}", "camelyon17_erm_ID_seed{s}"),
    "fmow": ("fmow_erm_seed{s}", "fmow_irm_seed{s}", "fmow_deepcoral_seed{s}",
             "fmow_groupDRO_seed{s}", "fmow_erm_ID_seed{s}"),
    "civilcomments": ("civilcomments_distilbert_erm_seed{s}",
                      "civilcomments_distilbert_irm_seed{s}",
                      "civilcomments_distilbert_deepcoral_seed{s}",
                      "civilcomments_distilbert_groupDRO_groupby-black-y_seed{s}",
                      "civilcomments_distilbert_erm_groupby-black-y_seed{s}"),
    "amazon": ("amazonv2.0_erm_seed{s}", "amazonv2.0_irm_seed{s}", "amazonv2.0_deepcoral_seed{s}",
               "amazonv2.0_groupDRO_seed{s}", "amazonv2.0_reweighted_seed{s}"),
    "poverty": ("poverty_erm_fold{f}", "poverty_irm_fold{f}", "poverty_deepCORAL_fold{f}",
                "poverty_groupDRO_fold{f}", "poverty_erm_ID_fold{f}"),
}
VERSIONS = {"camelyon17": "1.0", "fmow": "1.1", "civilcomments": "1.0", "amazon": "2.0",
            "poverty": "1.1"}


def _folder(root: Path, name: str) -> Path:
    folder = root / f"{name}_v{VERSIONS[name]}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"RELEASE_v{VERSIONS[name]}.txt").write_text("generated for tests\n")
    return folder


def _png(path: Path, rng: np.random.Generator, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path)


def write_camelyon17(root: Path, rng: np.random.Generator) -> pd.DataFrame:
    """metadata.csv and 96 x 96 patches: hospital 0 train (split 0), hospital 3 id_val
    (split 1), hospital 1 OOD val, hospital 2 OOD test."""
    folder = _folder(root, "camelyon17")
    plan = [(0, 0, 24), (3, 1, 8), (1, 0, 6), (2, 0, 8)]
    rows = []
    for center, split, n in plan:
        for i in range(n):
            rows.append({"patient": f"{center:03d}", "node": i % 3, "x_coord": 100 + i,
                         "y_coord": 200 + center, "tumor": int(rng.integers(2)),
                         "slide": center * 10 + i % 3, "center": center, "split": split})
    frame = pd.DataFrame(rows)
    frame.to_csv(folder / "metadata.csv")
    for p, n, x, y in frame[["patient", "node", "x_coord", "y_coord"]].itertuples(index=False):
        _png(folder / f"patches/patient_{p}_node_{n}/patch_patient_{p}_node_{n}_x_{x}_y_{y}.png",
             rng, 96)
    return frame


def write_fmow(root: Path, rng: np.random.Generator) -> pd.DataFrame:
    """rgb_metadata.csv (with a sequestered row and a training row of an OOD year),
    country_code_mapping.csv and 32 x 32 images named by metadata row."""
    folder = _folder(root, "fmow")
    plan = [("train", "2010-05-01T10:00:00Z", 24), ("val", "2011-03-02T10:00:00Z", 8),
            ("test", "2012-07-03T10:00:00Z", 8), ("val", "2014-01-04T10:00:00Z", 6),
            ("test", "2017-02-05T10:00:00Z", 8), ("seq", "2017-02-05T10:00:00Z", 1),
            ("train", "2015-06-06T10:00:00Z", 2)]
    rows = []
    categories = ("airport", "barn", "dam", "zoo", "park")
    for split, stamp, n in plan:
        for i in range(n):
            rows.append({"split": split, "img_filename": f"img_{len(rows)}.jpg",
                         "category": categories[i % len(categories)], "timestamp": stamp,
                         "country_code": "USA"})
    frame = pd.DataFrame(rows)
    frame.to_csv(folder / "rgb_metadata.csv", index=False)
    pd.DataFrame({"alpha-3": ["USA"], "region": ["Americas"]}).to_csv(
        folder / "country_code_mapping.csv", index=False)
    for row in range(len(frame)):
        _png(folder / f"images/rgb_img_{row}.png", rng, 32)
    return frame


def _sentences(rng: np.random.Generator, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(n)]


def write_civilcomments(root: Path, rng: np.random.Generator) -> pd.DataFrame:
    """all_data_with_identities.csv with train / val / test rows."""
    folder = _folder(root, "civilcomments")
    split = ["train"] * 24 + ["val"] * 6 + ["test"] * 8
    frame = pd.DataFrame({"comment_text": _sentences(rng, len(split)),
                          "toxicity": rng.uniform(0, 1, len(split)).round(3), "split": split,
                          "black": rng.integers(0, 2, len(split))})
    frame.to_csv(folder / "all_data_with_identities.csv")
    return frame


def write_amazon(root: Path, rng: np.random.Generator) -> pd.DataFrame:
    """reviews.csv (quoted as WILDS writes it) and splits/user.csv, with two rows outside
    the data set (-1)."""
    folder = _folder(root, "amazon")
    codes = [0] * 24 + [1] * 6 + [2] * 8 + [3] * 8 + [4] * 8 + [-1] * 2
    frame = pd.DataFrame({"reviewerID": [f"U{i % 7}" for i in range(len(codes))],
                          "asin": [f"P{i}" for i in range(len(codes))],
                          "reviewText": _sentences(rng, len(codes)),
                          "overall": rng.integers(1, 6, len(codes)).astype(float),
                          "category": "Books", "reviewYear": 2015})
    frame.to_csv(folder / "reviews.csv", index=False, quoting=csv.QUOTE_NONNUMERIC)
    (folder / "splits").mkdir(exist_ok=True)
    pd.DataFrame({"split": codes}).to_csv(folder / "splits" / "user.csv", index=False)
    return frame


def write_poverty(root: Path, rng: np.random.Generator, n_in_distribution: int = 2030
                  ) -> pd.DataFrame:
    """dhs_metadata.csv and 8 x 8 x 8 arrays: fold A's OOD test and val countries and enough
    in-distribution rows for WILDS' 1000 id_val + 1000 id_test + a training part."""
    folder = _folder(root, "poverty")
    countries = (["angola"] * 7 + ["benin"] * 5
                 + [("kenya", "nigeria", "ghana")[i % 3] for i in range(n_in_distribution)])
    frame = pd.DataFrame({"country": countries,
                          "wealthpooled": rng.normal(0.0, 1.0, len(countries)).round(4),
                          "urban": rng.integers(0, 2, len(countries))})
    frame.to_csv(folder / "dhs_metadata.csv", index=False)
    (folder / "images").mkdir(exist_ok=True)
    for row in range(len(frame)):
        np.savez(folder / f"images/landsat_poverty_img_{row}.npz",
                 x=rng.normal(size=(8, 8, 8)).astype(np.float32))
    return frame


WRITERS = {"camelyon17": write_camelyon17, "fmow": write_fmow,
           "civilcomments": write_civilcomments, "amazon": write_amazon,
           "poverty": write_poverty}


def wilds_checkpoint(architecture: str, n_outputs: int, options: dict, form: str,
                     seed: int) -> dict:
    """A WILDS-format checkpoint of a randomly initialised network: ``model.*`` keys, or for
    ``form="featurizer"`` (deepCORAL) ``featurizer.*`` + ``classifier.*``."""
    network = build_network(architecture, n_outputs, options, form, make_generator(seed))
    last = LAST_LAYER[architecture]
    state = {}
    for key, value in network.state_dict().items():
        part, _, inner = key.partition(".")
        if form == "model":
            state[f"model.{last}.{inner}" if part == "head" else f"model.{inner}"] = value
        else:
            state[f"classifier.{inner}" if part == "head" else f"featurizer.{inner}"] = value
    state["group_weights"] = torch.ones(3)  # an algorithm's own state, not the network's
    return {"algorithm": state, "epoch": 4, "best_val_metric": np.float64(0.75)}


def write_checkpoints(folder: Path, name: str, seed: int = 0, fold: str = "A") -> list[Path]:
    """The five checkpoints of a data set for one seed, under ``folder/<name>/``; the third
    (deepCORAL) in the featurizer form."""
    architecture, n_outputs, options = STAND_INS[name]
    paths = []
    for k, pattern in enumerate(CHECKPOINTS[name]):
        form = "featurizer" if k == 2 else "model"
        path = folder / name / f"{pattern.format(s=seed, f=fold)}.pth"
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(wilds_checkpoint(architecture, n_outputs, options, form, 100 * seed + k),
                   path)
        paths.append(path)
    return paths


def write_benchmark(root: Path, checkpoints: Path, names=tuple(WRITERS), seed: int = 0) -> None:
    """Data files and seed-``seed`` checkpoints of each data set in ``names``."""
    rng = np.random.default_rng(0)
    for name in names:
        WRITERS[name](root, rng)
        write_checkpoints(checkpoints, name, seed, "ABCDE"[seed])
