"""The Zeus NSDI'23 train and power traces (bundled in `data/`), as recurring jobs to replay.

A trace job is one (dataset, network, optimizer, target metric) on one GPU. Running it with a batch
size samples one training path (one seed's run: how many epochs it needed to reach the target, or
never) and prices each epoch with the power trace. We run every batch size at the GPU's highest
power limit: Basht optimizes the batch size only, not the power limit (Zeus's JIT power limit
optimizer is a separate knob).

Sampling matches Zeus's legacy simulator row for row (`df.sample(n=1, random_state=rng)` over the
same rows in the same order is `rng.choice(len(rows), size=1, replace=False)`), so with the same
seed both simulators draw the same paths.
"""

from __future__ import annotations

import csv
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from basht.bso.errors import BSOError

DATA = Path(__file__).resolve().parent / "data"
GPUS = ("v100", "a40", "p100", "rtx6000")


@dataclass(frozen=True)
class TraceWorkload:
    """A recurring job of the trace with Zeus's defaults for it.

    Source: Zeus `examples/research_reproducibility/zeus_nsdi23/run_alibaba.py`,
    `get_job_with_defaults` (ml-energy/zeus, 2023): dataset, network, optimizer, target metric,
    max epochs and the preferred default batch size b0 (capped at the GPU's largest batch size).
    """

    name: str
    dataset: str
    network: str
    optimizer: str
    target_metric: float
    max_epochs: int
    preferred_default: int
    higher_is_better: bool  # librispeech's metric is the word error rate


WORKLOADS: dict[str, TraceWorkload] = {
    w.name: w
    for w in (
        TraceWorkload("cifar100", "cifar100", "shufflenetv2", "adadelta", 0.6, 100, 1024, True),
        TraceWorkload("imagenet", "imagenet", "resnet50", "adadelta", 0.65, 100, 256, True),
        TraceWorkload("librispeech", "librispeech", "deepspeech2", "adamw", 40.0, 16, 256, False),
        TraceWorkload("movielens-1m", "movielens-1m", "ncf", "adam", 0.41, 100, 1024, True),
        TraceWorkload("squad", "squad", "bert_base_uncased", "adamw", 84.0, 6, 32, True),
        TraceWorkload(
            "sentiment140", "sentiment140", "bert_base_uncased", "adamw", 0.84, 10, 128, True
        ),
    )
}


@dataclass(frozen=True)
class Epoch:
    """One epoch of a batch size at the chosen power limit."""

    time_s: float
    energy_j: float


@functools.lru_cache(maxsize=1)
def _train_rows() -> tuple[dict[str, str], ...]:
    with (DATA / "summary_train.csv").open(newline="") as f:
        return tuple(csv.DictReader(f))


@functools.lru_cache(maxsize=len(GPUS))
def _power_rows(gpu: str) -> tuple[dict[str, str], ...]:
    with (DATA / f"summary_power_{gpu}.csv").open(newline="") as f:
        return tuple(csv.DictReader(f))


class TraceJob:
    """One workload on one GPU: its batch sizes, default, per-epoch prices and training paths."""

    def __init__(self, workload: str | TraceWorkload, gpu: str = "v100") -> None:
        if isinstance(workload, str):
            if workload not in WORKLOADS:
                raise BSOError(
                    f"trace workload {workload!r}: expected one of {', '.join(WORKLOADS)}"
                )
            workload = WORKLOADS[workload]
        if gpu not in GPUS:
            raise BSOError(f"trace GPU {gpu!r}: expected one of {', '.join(GPUS)}")
        self.workload = workload
        self.gpu = gpu
        w = workload
        power = _power_rows(gpu)
        # Cost's max power: the highest power limit anywhere in this GPU's trace, as Zeus uses.
        self.max_power_w = max(float(r["power_limit"]) for r in power)
        job_power = [
            r
            for r in power
            if (r["dataset"], r["network"], r["optimizer"]) == (w.dataset, w.network, w.optimizer)
        ]
        limits: dict[int, float] = {}
        for r in job_power:
            size = int(r["batch_size"])
            limits[size] = max(limits.get(size, 0.0), float(r["power_limit"]))
        self._limit_w = limits
        self._epoch: dict[int, Epoch] = {}
        for r in job_power:
            size = int(r["batch_size"])
            if float(r["power_limit"]) == limits[size]:
                t = float(r["time_per_epoch"])
                self._epoch[size] = Epoch(t, t * float(r["average_power"]))
        trained = [
            r
            for r in _train_rows()
            if (r["dataset"], r["network"], r["optimizer"]) == (w.dataset, w.network, w.optimizer)
        ]
        # Zeus's feasible range: sizes in both traces, whatever the target.
        self.batch_sizes = sorted({int(r["batch_size"]) for r in trained} & set(self._epoch))
        if not self.batch_sizes:
            raise BSOError(f"trace: no batch size of {w.name} was measured on {gpu}")
        largest = max(int(r["batch_size"]) for r in power if r["dataset"] == w.dataset)
        self.default_batch_size = min(w.preferred_default, largest)
        self._paths: dict[int, list[int | None]] = {size: [] for size in self.batch_sizes}
        for r in trained:
            size = int(r["batch_size"])
            if size in self._paths and float(r["target_metric"]) == w.target_metric:
                epoch = float(r["target_epoch"])
                self._paths[size].append(None if math.isnan(epoch) else int(epoch))
        if self.default_batch_size not in self.batch_sizes:
            raise BSOError(
                f"trace: default batch size {self.default_batch_size} of {w.name} "
                f"is not in the trace on {gpu}"
            )

    @property
    def name(self) -> str:
        return f"{self.workload.name}@{self.gpu}"

    def epoch(self, batch_size: int) -> Epoch:
        return self._epoch[batch_size]

    def power_limit_w(self, batch_size: int) -> float:
        """The power limit the batch size runs at: the highest one measured for it."""
        return self._limit_w[batch_size]

    def paths(self, batch_size: int) -> list[int | None]:
        """The epochs each recorded run needed to reach the target (None: never), in trace order."""
        return list(self._paths[batch_size])

    def sample_path(self, batch_size: int, rng: np.random.Generator) -> int | None:
        """Draw one training run of `batch_size` (the same draw as Zeus's `df.sample`)."""
        paths = self._paths[batch_size]
        if not paths:
            raise BSOError(f"trace: no run of {self.workload.name} with batch size {batch_size}")
        return paths[int(rng.choice(len(paths), size=1, replace=False)[0])]
