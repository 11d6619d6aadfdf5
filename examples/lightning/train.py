"""The digits training as a Lightning script of one's own, made a Basht trial by one callback.

`BashtCallback` reports each epoch's validation to Basht and stops the fit when told to stop; told
to pause, it saves Lightning's checkpoint in the trial's checkpoint folder and stops, and a resumed
trial passes `resume_checkpoint()` to `trainer.fit`. Run on its own (`python train.py`), it trains
all its epochs and the callback does nothing. `script.yaml` tunes it with ASHA.

The last line it prints is the final metrics, as JSON.
"""

from __future__ import annotations

import argparse
import json

import lightning as L
from digits_lightning import DigitsClassifier, DigitsData

from basht.integrations import config
from basht.integrations.lightning import BashtCallback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=9)
    args = parser.parse_args()
    settings = {"lr": 1e-2, "hidden": 64, "dropout": 0.1, "batch_size": 64, **config()}

    L.seed_everything(0, verbose=False)
    model = DigitsClassifier(
        lr=settings["lr"], hidden=settings["hidden"], dropout=settings["dropout"]
    )
    data = DigitsData(batch_size=settings["batch_size"])
    basht = BashtCallback(monitor="val_acc")
    trainer = L.Trainer(
        max_epochs=args.epochs,
        callbacks=[basht],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=data, ckpt_path=basht.resume_checkpoint())
    metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
    print(json.dumps({"epochs": trainer.current_epoch, "paused": basht.paused, **metrics}))


if __name__ == "__main__":
    main()
