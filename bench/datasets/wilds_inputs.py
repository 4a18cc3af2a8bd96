"""Network inputs of the WILDS data sets, as the WILDS example code's evaluation transforms
make them.

* images (Camelyon17, FMoW): RGB to a float tensor in [0, 1], then ImageNet's per-channel
  normalisation (WILDS' ``image_base``; both sets are stored at the networks' resolution);
* multispectral arrays (PovertyMap): the stored 8 x 224 x 224 array as it is (already
  normalised; WILDS' evaluation transform is none);
* text (CivilComments, Amazon): token ids and attention mask stacked as ``[length, 2]``,
  padded or truncated to ``max_token_length`` (300 and 512 in WILDS), by DistilBERT's
  ``distilbert-base-uncased`` tokenizer (``transformers``; from ``tokenizer_path`` or the
  hub cache), or, as a stand-in where ``transformers`` is absent, :class:`HashingTokenizer`.
"""

from __future__ import annotations

import importlib
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from bench.harness.errors import ConfigError, require_choice

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
TOKENIZERS = ("distilbert", "hashing")
DISTILBERT_NAME = "distilbert-base-uncased"


def image_tensor(image: Image.Image) -> Tensor:
    """An RGB image as a normalised ``[3, H, W]`` float tensor (WILDS ``image_base``)."""
    from torchvision.transforms import functional as image_functions  # slow import: on use

    pixels = image_functions.to_tensor(image.convert("RGB"))
    return image_functions.normalize(pixels, IMAGENET_MEAN, IMAGENET_STD)


def multispectral_tensor(array: Any) -> Tensor:
    """PovertyMap's stored ``[8, H, W]`` array (already normalised) as float32."""
    return torch.as_tensor(np.asarray(array), dtype=torch.float32)


class HashingTokenizer:
    """Stand-in tokenizer for the tests (not DistilBERT's): lower-cased words and digits, each
    mapped to ``1 + crc32(word) % (vocab_size - 1)`` (0 pads), truncated or padded to
    ``max_length``; returns ``[max_length, 2]`` (ids, mask) as WILDS' DistilBERT transform."""

    def __init__(self, vocab_size: int, max_length: int) -> None:
        self.vocab_size = int(vocab_size)
        self.max_length = int(max_length)

    def __call__(self, text: str) -> Tensor:
        words = re.findall(r"[a-z0-9']+", str(text).lower())[: self.max_length]
        ids = torch.zeros(self.max_length, dtype=torch.long)
        ids[: len(words)] = torch.tensor(
            [1 + zlib.crc32(w.encode()) % (self.vocab_size - 1) for w in words], dtype=torch.long)
        mask = torch.zeros(self.max_length, dtype=torch.long)
        mask[: max(len(words), 1)] = 1
        return torch.stack([ids, mask], dim=1)


class DistilBertTokens:
    """DistilBERT's tokenizer as WILDS' ``bert`` transform uses it: ``[max_length, 2]``."""

    def __init__(self, max_length: int, tokenizer_path: str | None = None) -> None:
        try:
            transformers = importlib.import_module("transformers")
        except ImportError:
            raise ConfigError("dataset.text.tokenizer='distilbert' needs the transformers "
                              "package (pip install -e '.[wilds]'); choose one of: hashing "
                              "(a stand-in)") from None
        source = tokenizer_path or DISTILBERT_NAME
        try:
            self.tokenizer = transformers.DistilBertTokenizerFast.from_pretrained(source)
        except OSError as err:
            raise ConfigError(f"dataset.text.tokenizer_path: no DistilBERT tokenizer at "
                              f"{source!r} ({err.__class__.__name__}); give the folder of "
                              f"{DISTILBERT_NAME}'s tokenizer files") from None
        self.max_length = int(max_length)

    def __call__(self, text: str) -> Tensor:
        tokens = self.tokenizer(str(text), padding="max_length", truncation=True,
                                max_length=self.max_length, return_tensors="pt")
        return torch.stack((tokens["input_ids"], tokens["attention_mask"]), dim=2)[0]


def text_encoder(text: dict[str, Any]) -> Callable[[str], Tensor]:
    """The tokenizer a data set node's ``text`` section names."""
    kind = require_choice("dataset.text.tokenizer", text.get("tokenizer"), TOKENIZERS)
    length = int(text["max_token_length"])
    if kind == "hashing":
        return HashingTokenizer(int(text.get("vocab_size", 1000)), length)
    return DistilBertTokens(length, text.get("tokenizer_path"))


def input_transform(kind: str, text: dict[str, Any] | None = None) -> Callable[[Any], Tensor]:
    """What turns one stored input (PIL image, array or string) into the network's tensor."""
    if kind == "image":
        return image_tensor
    if kind == "multispectral":
        return multispectral_tensor
    if text is None:
        raise ConfigError("dataset.text is missing; a text data set names its tokenizer and "
                          "max_token_length there")
    return text_encoder(text)


def read_input(folder: Path, kind: str, stored: str) -> Any:
    """One input as the files hold it: a PIL image, a multispectral array or the text."""
    if kind == "text":
        return stored
    path = folder / stored
    try:
        if kind == "image":
            with Image.open(path) as image:
                return image.convert("RGB")
        with np.load(path) as archive:
            return archive["x"]
    except (OSError, KeyError, ValueError) as err:
        raise ConfigError(f"cannot read WILDS input {path}: {err}") from None
