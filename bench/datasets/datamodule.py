"""A Lightning datamodule over a RegressionSplits' tensors, for the Lightning-trained networks
(the authors' base MLP, Lightning-UQ-Box's VI baselines) when the data came without one."""

from __future__ import annotations

import lightning as L
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from bench.datasets.regression_splits import RegressionSplits


class TensorDataModule(L.LightningDataModule):
    """Train/val loaders over a RegressionSplits' tensors in Lightning-UQ-Box's batch format.

    Batches are ``{"input": x, "target": y}`` dicts, as the library's own datamodules yield;
    the train loader shuffles (from the global torch RNG, as the library's loaders do).
    """

    def __init__(self, splits: RegressionSplits, batch_size: int = 32) -> None:
        super().__init__()
        self.splits, self.batch_size = splits, batch_size

    def _loader(self, x: Tensor, y: Tensor, shuffle: bool) -> DataLoader:
        from lightning_uq_box.datamodules.utils import collate_fn_tensordataset

        return DataLoader(TensorDataset(x, y), batch_size=self.batch_size, shuffle=shuffle,
                          collate_fn=collate_fn_tensordataset)

    def train_dataloader(self) -> DataLoader:
        """Shuffled training batches."""
        return self._loader(self.splits.x_train, self.splits.y_train, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        """Validation batches in order."""
        return self._loader(self.splits.x_val, self.splits.y_val, shuffle=False)
