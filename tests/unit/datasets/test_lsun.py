"""LSUN classroom_val as an OOD set: the image-folder export read as torchvision's LSUN loader with
Laplace Redux's transform reads it, and the per-set normalisations of Table 4's OOD sets."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from PIL import Image
from torchvision import transforms

from bench.datasets.image_classification import ImageClassificationData
from bench.datasets.image_files import ImageDataCorruptError, read_image_folder
from bench.datasets.vision import ImageDataMissingError, find_image_files, load_images
from bench.harness.errors import ConfigError
from bench.harness.finished_jobs import apply_scale_overrides
from bench.harness.job_execution import check_dataset_node
from tests.helpers import compose_config
from tests.unit.datasets.image_fixtures import write_cifar10_ood_sets, write_lsun_folder

# The authors' OOD loaders (notes section 4), written out as the notes print them.
SVHN_MEAN, SVHN_STD = (0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970)
CIFAR_MEAN = (125.3 / 255, 123.0 / 255, 113.9 / 255)
CIFAR100_MEAN, CIFAR100_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


@pytest.mark.parametrize("nested", [False, True])
def test_folder_images_equal_torchvisions_resize_to_tensor_in_key_order(tmp_path, nested):
    files = write_lsun_folder(tmp_path / "classroom_val", np.random.default_rng(1), n=5,
                              nested=nested)
    images, labels = read_image_folder(tmp_path / "classroom_val")
    assert images.shape == (5, 3, 32, 32) and images.dtype == np.uint8
    assert labels.tolist() == [0] * 5
    authors = transforms.Compose([transforms.Resize(size=(32, 32)), transforms.ToTensor()])
    for i, path in enumerate(files):  # files are in key order, as the LMDB cursor walks
        with Image.open(path) as picture:
            expected = authors(picture.convert("RGB"))
        torch.testing.assert_close(torch.from_numpy(images[i]) / 255.0, expected, rtol=0,
                                   atol=0)


def test_lsun_is_a_test_only_ood_set_found_in_its_folder(tmp_path):
    assert find_image_files("lsun", "test", tmp_path) is None
    with pytest.raises(ImageDataMissingError) as caught:
        load_images("lsun", "test", tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"image data set 'lsun' (test split) not found: put "
                              f"classroom_val/ in {tmp_path}/lsun/")
    assert "python data.py export classroom_val_lmdb --out_dir <folder> --flat" in message
    write_lsun_folder(tmp_path / "lsun" / "classroom_val", np.random.default_rng(0), n=3)
    found = load_images("lsun", "test", tmp_path)
    assert found.images.shape == (3, 3, 32, 32) and found.name == "lsun"
    with pytest.raises(ConfigError, match=r"^lsun split='train' is not valid; choose one of: "
                                          r"test$"):
        load_images("lsun", "train", tmp_path)
    with pytest.raises(ConfigError, match=r"^dataset.images='lsun' is not valid; choose one of"):
        ImageClassificationData("lsun", "lsun", root=str(tmp_path))


def test_an_empty_or_unreadable_export_names_the_file(tmp_path):
    folder = tmp_path / "lsun" / "classroom_val"
    folder.mkdir(parents=True)
    with pytest.raises(ImageDataCorruptError, match="no image files"):
        read_image_folder(folder)
    (folder / "0001.webp").write_bytes(b"not an image")
    with pytest.raises(ImageDataCorruptError, match=r"0001.webp: not a readable image"):
        read_image_folder(folder)


def test_table_4_ood_sets_get_the_authors_normalisations(tmp_path):
    write_cifar10_ood_sets(tmp_path, np.random.default_rng(2))
    overrides = ["experiment=laplace_redux/table-4", "scale=smoke", f"dataset.root={tmp_path}"]
    cfg = apply_scale_overrides(compose_config(overrides), overrides)
    data = instantiate(cfg.dataset)
    assert data.ood == ("svhn", "lsun", "cifar100") and data.available_ood == data.ood

    def raw(name: str) -> torch.Tensor:
        return load_images(name, "test", tmp_path).images.double() / 255.0

    def normalised(pixels: torch.Tensor, mean, std) -> torch.Tensor:
        return ((pixels - torch.tensor(mean).view(1, 3, 1, 1))
                / torch.tensor(std).view(1, 3, 1, 1)).float()

    # The notes print SVHN's statistics to 4 digits (the code has 8): < 1e-3 once normalised.
    torch.testing.assert_close(data.ood_set("svhn").x, normalised(raw("svhn"), SVHN_MEAN,
                                                                  SVHN_STD), rtol=0, atol=1e-3)
    torch.testing.assert_close(data.ood_set("lsun").x, raw("lsun").float(), rtol=0, atol=0)
    torch.testing.assert_close(data.ood_set("cifar100").x,
                               normalised(raw("cifar100"), CIFAR100_MEAN, CIFAR100_STD))
    # The in-distribution test part keeps CIFAR-10's own statistics (std (63.0, 62.1, 66.7)).
    test = raw("cifar10")[data.splits(6).test_indices]
    torch.testing.assert_close(data.splits(6).x_test, normalised(
        test, CIFAR_MEAN, (63.0 / 255, 62.1 / 255, 66.7 / 255)))
    assert data.augmentation == "crop_flip"


def test_absent_lsun_is_skipped_and_named_but_absent_cifar100_stops(tmp_path):
    write_cifar10_ood_sets(tmp_path, np.random.default_rng(2))
    for path in (tmp_path / "lsun" / "classroom_val").iterdir():
        path.unlink()
    (tmp_path / "lsun" / "classroom_val").rmdir()
    overrides = ["experiment=laplace_redux/table-4", "scale=smoke", f"dataset.root={tmp_path}"]
    cfg = apply_scale_overrides(compose_config(overrides), overrides)
    data = instantiate(cfg.dataset)
    assert data.available_ood == ("svhn", "cifar100")
    assert "classroom_val/" in data.missing_ood()["lsun"]
    (tmp_path / "cifar100" / "cifar-100-python" / "test").unlink()
    with pytest.raises(ImageDataMissingError, match=r"^image data set 'cifar100' \(test split\) "
                                                    r"not found: put test in"):
        check_dataset_node(cfg)
