"""A LightningModule and a LightningDataModule as anyone would write them: an MLP on the 8x8 digits
that come with scikit-learn. Nothing here knows Basht.

`asha.yaml` tunes them as they are with the ready workload `lightning`; `train.py` is the same
training as a script of one's own, which `BashtCallback` turns into a Basht trial.
"""

from __future__ import annotations

import lightning as L
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class DigitsClassifier(L.LightningModule):
    """A one-hidden-layer MLP; Adam with weight decay."""

    def __init__(
        self, lr: float = 1e-3, hidden: int = 64, dropout: float = 0.0, weight_decay: float = 0.0
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def _evaluate(self, batch: tuple[torch.Tensor, torch.Tensor], split: str) -> None:
        x, y = batch
        logits = self(x)
        self.log(f"{split}_loss", F.cross_entropy(logits, y))
        self.log(f"{split}_acc", (logits.argmax(dim=1) == y).float().mean())

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        self._evaluate(batch, "test")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        hp = self.hparams
        return torch.optim.Adam(self.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)


class DigitsData(L.LightningDataModule):
    """scikit-learn's digits, split 60/20/20 (the same split every time), pixels scaled to [0, 1]."""

    def __init__(self, batch_size: int = 32) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.splits: dict[str, TensorDataset] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.splits:  # Lightning calls setup on every fit, validate and test
            return
        X, y = load_digits(return_X_y=True)
        X_train, X_rest, y_train, y_rest = train_test_split(
            X, y, test_size=0.4, stratify=y, random_state=0
        )
        X_val, X_test, y_val, y_test = train_test_split(
            X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=0
        )
        for name, xs, ys in (
            ("train", X_train, y_train),
            ("val", X_val, y_val),
            ("test", X_test, y_test),
        ):
            x = torch.tensor(xs / 16.0, dtype=torch.float32)
            self.splits[name] = TensorDataset(x, torch.tensor(ys, dtype=torch.long))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["train"], batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["val"], batch_size=512)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["test"], batch_size=512)
