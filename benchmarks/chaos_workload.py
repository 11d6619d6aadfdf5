"""The workload `benchmarks/chaos.py` runs: the `sleep` curve (deterministic, checkpointable),
whose chosen trials fault in their worker as real trials do.

`fault_every: k` makes every k-th trial (by its seed, so the same trials every run) fault in its
first epoch, in turn: SIGKILL of its own process, `os.abort()`, an allocation past the worker's
memory limit (`resources.limit_memory`), and an ordinary exception.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from basht.workloads import Resources
from basht.workloads.synthetic import Sleep

#: The faults, in the order trials meet them.
FAULTS = ("sigkill", "abort", "oom", "raise")


class FaultyCurve(Sleep):
    def __init__(self, seed: int = 0, epoch_s: float = 0.0, fault_every: int = 0, **kw: Any):
        super().__init__(seed=seed, epoch_s=epoch_s, **kw)
        self.fault_every = fault_every
        self.fault: str | None = None

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        super().load(config, resources)
        self.fault = fault_of(resources.seed, self.fault_every)
        self.memory_mb = resources.memory_mb

    def train(self, epochs: int) -> None:
        super().train(epochs)
        if self.fault is not None and self.epoch >= 1:
            _fault(self.fault, self.memory_mb)


def fault_of(trial_seed: int, every: int) -> str | None:
    """The fault a trial with this seed meets (None for most)."""
    if every <= 0 or trial_seed % every:
        return None
    return FAULTS[(trial_seed // every) % len(FAULTS)]


def _fault(kind: str, memory_mb: int) -> None:
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "abort":
        os.abort()
    elif kind == "oom":
        hog = bytearray(2 * memory_mb * 2**20)  # past the limit: MemoryError
        hog[0] = 1
    else:
        raise RuntimeError("this trial's configuration crashes its training")
