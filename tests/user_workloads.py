"""User workloads given as `package.module:attr`, as a user's own project would write them."""

from __future__ import annotations

import os
import time
from typing import Any

from basht.workloads import Resources


class Counter:
    """A class workload: value grows with epochs; raises in load when config has `boom`."""

    def __init__(self, seed: int = 0, fail_value: Any = "boom"):
        self.fail_value = fail_value
        self.epoch = 0

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        if config.get("kind") == self.fail_value:
            raise RuntimeError("this configuration always crashes")
        self.rate = float(config.get("x", 1.0))
        self.memory_mb = resources.memory_mb

    def train(self, epochs: int) -> None:
        self.epoch += epochs

    def validate(self) -> dict[str, float]:
        return {"accuracy": self.rate * self.epoch, "memory_mb": self.memory_mb}

    def test(self) -> dict[str, float]:
        return {"accuracy": self.rate * self.epoch}

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = state["epoch"]


class CrashesMidEpoch:
    """Each epoch takes `epoch_s`; epoch `crash_at` raises half-way (0: the load does, after
    `epoch_s`), so a failed trial held its worker for a known time beyond its reports."""

    def __init__(self, seed: int = 0, epoch_s: float = 0.2, crash_at: int = 2):
        self.epoch_s, self.crash_at = epoch_s, crash_at
        self.epoch = 0

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        if self.crash_at == 0:
            time.sleep(self.epoch_s)
            raise RuntimeError("the load broke")

    def train(self, epochs: int) -> None:
        self.epoch += epochs
        if self.epoch == self.crash_at:
            time.sleep(self.epoch_s / 2)
            raise RuntimeError(f"epoch {self.epoch} broke")
        time.sleep(self.epoch_s)

    def validate(self) -> dict[str, float]:
        return {"accuracy": float(self.epoch)}

    def test(self) -> dict[str, float]:
        return {"accuracy": float(self.epoch)}


def objective(config: dict[str, Any], trial: Any) -> None:
    """A plain-function workload: reports once per epoch up to the trial's budget."""
    for step in range(1, (trial.budget or 3) + 1):
        trial.report(step, accuracy=float(config.get("x", 1.0)) * step)


def thread_probe(config: dict[str, Any], trial: Any) -> None:
    """Reports how many threads the worker's math libraries were given."""
    import torch
    from threadpoolctl import threadpool_info

    pools = [p["num_threads"] for p in threadpool_info()]
    trial.report(
        1,
        accuracy=1.0,
        torch_threads=torch.get_num_threads(),
        omp_env=int(os.environ.get("OMP_NUM_THREADS", "0")),
        max_pool_threads=max(pools) if pools else 0,
    )


def not_a_dict(config: dict[str, Any], trial: Any) -> None:
    trial.report(1, accuracy=float("nan"))


def silent(config: dict[str, Any], trial: Any) -> None:
    """A plain function that returns without reporting anything."""


class Spin:
    """Accuracy by the distance of x from 0 and the epochs trained; an epoch keeps the CPU busy
    for `epoch_s`, so each epoch's energy is about the same and shifting it shows."""

    metrics = ("accuracy",)

    def __init__(self, seed: int = 0, epoch_s: float = 0.05):
        self.epoch_s, self.epoch, self.x = epoch_s, 0, 0.0

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        self.x = float(config["x"])

    def train(self, epochs: int) -> None:
        end = time.perf_counter() + self.epoch_s * epochs
        while time.perf_counter() < end:
            pass
        self.epoch += epochs

    def validate(self) -> dict[str, float]:
        return {"accuracy": (1.0 - abs(self.x) / 2) * (1.0 - 0.5**self.epoch)}

    def test(self) -> dict[str, float]:
        return self.validate()

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = state["epoch"]
