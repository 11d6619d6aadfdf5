"""A recurring training job that lets the BSO server pick its batch size: an MLP on sklearn's digits.

Start a server once, then run this script again and again (each run is one recurrence of the job;
the server learns which batch size reaches the target accuracy at the lowest energy-time cost):

    basht bso serve --db sqlite:///bso.db &
    for i in $(seq 10); do python examples/bso/train_digits.py --server http://127.0.0.1:8000; done

Exit code 0: the run reached the target. Exit code 3: the server gave this batch size up (early
stopped on cost, or out of epochs); relaunch and the next run gets another batch size. Exit code 1
with one line: the server could not be reached or refused a request. Energy is
measured with Basht's monitor (RAPL or NVML where readable, else a labelled estimate).

Needs the `torch`, `sklearn` and `bso` extras.
"""

from __future__ import annotations

import argparse
import logging
import sys

import numpy as np
import torch
from torch import nn

from basht.bso import BatchSizeOptimizer, JobSpec, TrainFailError
from basht.bso.errors import BSOError
from basht.workloads.digits import digits_splits

BATCH_SIZES = [8, 16, 32, 64, 128, 256]


def make_model(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="http://127.0.0.1:8000")
    parser.add_argument("--job-id", default="digits-mlp-bso", help="must start with 'digits'")
    parser.add_argument("--target", type=float, default=0.95, help="validation accuracy to reach")
    parser.add_argument("--max-epochs", type=int, default=40)
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate at batch 32")
    parser.add_argument("--token", default=None, help="the server's token, if it has one")
    parser.add_argument("--seed", type=int, default=None, help="data order and init (default: new)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)

    bso = BatchSizeOptimizer(
        args.server,
        JobSpec(
            job_id=args.job_id,
            job_id_prefix="digits",
            batch_sizes=BATCH_SIZES,
            default_batch_size=32,
            target_metric=args.target,
            max_epochs=args.max_epochs,
        ),
        token=args.token,
    )
    with bso:
        batch_size = bso.get_batch_size()
        seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**31)
        torch.manual_seed(seed)
        splits = digits_splits(0)
        x_train, y_train = (
            torch.from_numpy(splits.X_train.copy()),
            torch.from_numpy(splits.y_train.copy()),
        )
        x_val, y_val = torch.from_numpy(splits.X_val.copy()), torch.from_numpy(splits.y_val.copy())
        model = make_model(64)
        # Square-root scaling keeps the noise scale comparable across batch sizes.
        lr = args.lr * (batch_size / 32) ** 0.5
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss()
        print(f"trial {bso.trial_number}: batch size {batch_size}, lr {lr:.2e}, seed {seed}")

        bso.on_train_begin()
        try:
            for epoch in range(1, args.max_epochs + 1):
                model.train()
                order = torch.randperm(len(x_train))
                for start in range(0, len(order), batch_size):
                    idx = order[start : start + batch_size]
                    optimizer.zero_grad()
                    loss_fn(model(x_train[idx]), y_train[idx]).backward()
                    optimizer.step()
                acc = accuracy(model, x_val, y_val)
                print(f"epoch {epoch}: validation accuracy {acc:.4f}")
                bso.on_evaluate(acc)
                if bso.training_finished:
                    break
        except TrainFailError as err:
            print(f"batch size {batch_size} given up: {err}")
            return 3
        print(
            f"reached {args.target} in {bso.epoch} epochs: {bso.time_s:.2f} s, "
            f"{bso.energy_j:.1f} J ({bso.energy_source})"
        )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BSOError as err:  # the server unreachable or refusing: one line, not a traceback
        sys.exit(f"error: {err}")
