"""The Zeus NSDI'23 train and power traces (bundled in `data/`), as recurring jobs to replay.

A trace job is one (dataset, network, optimizer, target metric) on one GPU. Running it with a batch
size samples one training path (one seed's run: how many epochs it needed to reach the target, or
never) and prices each epoch with the power trace: at the batch size's highest power limit, or at
any other limit the trace measured (for jobs that optimize the power limit too). A just-in-time
power profile is priced as Zeus's simulator prices it: the first epoch split evenly over the
limits, so it costs the mean of their epochs.

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


@functools.lru_cache(maxsize=4)
def _train_rows(data: Path) -> tuple[dict[str, str], ...]:
    with (data / "summary_train.csv").open(newline="") as f:
        return tuple(csv.DictReader(f))


@functools.lru_cache(maxsize=2 * len(GPUS))
def _power_rows(data: Path, gpu: str) -> tuple[dict[str, str], ...]:
    with (data / f"summary_power_{gpu}.csv").open(newline="") as f:
        return tuple(csv.DictReader(f))


class TraceJob:
    """One workload on one GPU: its batch sizes, default, per-epoch prices and training paths.

    `data` is the folder of the trace files (the bundled Zeus trace by default; tests generate
    small ones in the same format).
    """

    def __init__(self, workload: str | TraceWorkload, gpu: str = "v100", data: Path = DATA) -> None:
        if isinstance(workload, str):
            if workload not in WORKLOADS:
                raise BSOError(
                    f"trace workload {workload!r}: expected one of {', '.join(WORKLOADS)}"
                )
            workload = WORKLOADS[workload]
        if data == DATA and gpu not in GPUS:
            raise BSOError(f"trace GPU {gpu!r}: expected one of {', '.join(GPUS)}")
        self.workload = workload
        self.gpu = gpu
        w = workload
        power = _power_rows(data, gpu)
        # Cost's max power: the highest power limit anywhere in this GPU's trace, as Zeus uses.
        self.max_power_w = max(float(r["power_limit"]) for r in power)
        job_power = [
            r
            for r in power
            if (r["dataset"], r["network"], r["optimizer"]) == (w.dataset, w.network, w.optimizer)
        ]
        self._epochs: dict[int, dict[float, Epoch]] = {}
        for r in job_power:
            t = float(r["time_per_epoch"])
            by_limit = self._epochs.setdefault(int(r["batch_size"]), {})
            by_limit[float(r["power_limit"])] = Epoch(t, t * float(r["average_power"]))
        self._limit_w = {size: max(by_limit) for size, by_limit in self._epochs.items()}
        self._epoch = {size: self._epochs[size][limit] for size, limit in self._limit_w.items()}
        trained = [
            r
            for r in _train_rows(data)
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

    def epoch(self, batch_size: int, power_limit_w: float | None = None) -> Epoch:
        """One epoch at `power_limit_w` (default: the batch size's highest limit)."""
        if power_limit_w is None:
            return self._epoch[batch_size]
        return self._epochs[batch_size][power_limit_w]

    def power_limit_w(self, batch_size: int) -> float:
        """The power limit the batch size runs at without power capping: its highest measured."""
        return self._limit_w[batch_size]

    def power_limits_w(self, batch_size: int) -> list[float]:
        """The limits the trace measured for the batch size, highest first (the profile order)."""
        return sorted(self._epochs[batch_size], reverse=True)

    def profile_epoch(self, batch_size: int) -> Epoch:
        """The epoch that profiles every limit, each for an equal share of it (Zeus's model)."""
        epochs = [self._epochs[batch_size][limit] for limit in self.power_limits_w(batch_size)]
        n = len(epochs)
        return Epoch(sum(e.time_s for e in epochs) / n, sum(e.energy_j for e in epochs) / n)

    def profile(self, batch_size: int) -> list[tuple[float, Epoch]]:
        """What that epoch measures: each limit's share of it, (limit, its time and energy)."""
        limits = self.power_limits_w(batch_size)
        n = len(limits)
        return [
            (limit, Epoch(e.time_s / n, e.energy_j / n))
            for limit in limits
            for e in [self._epochs[batch_size][limit]]
        ]

    def paths(self, batch_size: int) -> list[int | None]:
        """The epochs each recorded run needed to reach the target (None: never), in trace order."""
        return list(self._paths[batch_size])

    def sample_path(self, batch_size: int, rng: np.random.Generator) -> int | None:
        """Draw one training run of `batch_size` (the same draw as Zeus's `df.sample`)."""
        paths = self._paths[batch_size]
        if not paths:
            raise BSOError(f"trace: no run of {self.workload.name} with batch size {batch_size}")
        return paths[int(rng.choice(len(paths), size=1, replace=False)[0])]
