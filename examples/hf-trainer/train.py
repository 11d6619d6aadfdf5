"""The tiny BERT's training as a Trainer script of one's own, made a Basht trial by one callback.

`BashtCallback` reports each evaluation to Basht and ends training when told to stop; told to
pause, it has the Trainer save its checkpoint, copied into the trial's checkpoint folder, and a
resumed trial passes `resume_checkpoint()` to `trainer.train`. Run on its own (`python train.py`),
it trains all its epochs and the callback does nothing. `script.yaml` tunes it with ASHA.

The last line it prints is the final metrics, as JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import transformers
from tiny_bert import build_datasets, build_model, compute_metrics
from transformers import Trainer, TrainingArguments

from basht.integrations import config
from basht.integrations.hf_trainer import BashtCallback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=9)
    args = parser.parse_args()
    settings = {"learning_rate": 5e-3, "hidden_size": 32, "batch_size": 32, **config()}
    transformers.logging.set_verbosity_error()

    transformers.set_seed(0)
    data = build_datasets(seed=0)
    model = build_model(hidden_size=settings["hidden_size"])
    basht = BashtCallback(metric="eval_accuracy")
    output = tempfile.TemporaryDirectory(prefix="tiny-bert-")  # the Trainer's checkpoints
    trainer = Trainer(
        model=model,
        args=TrainingArguments(
            output_dir=output.name,
            num_train_epochs=args.epochs,
            learning_rate=settings["learning_rate"],
            per_device_train_batch_size=settings["batch_size"],
            eval_strategy="epoch",
            save_strategy="no",
            logging_strategy="no",
            report_to=[],
            disable_tqdm=True,
            use_cpu=True,
            seed=0,
        ),
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        compute_metrics=compute_metrics,
        callbacks=[basht],
    )
    trainer.train(resume_from_checkpoint=basht.resume_checkpoint())
    metrics = trainer.evaluate()
    print(json.dumps({"epochs": round(trainer.state.epoch), "paused": basht.paused, **metrics}))
    output.cleanup()


if __name__ == "__main__":
    main()
