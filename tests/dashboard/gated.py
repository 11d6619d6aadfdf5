"""A workload whose epochs wait for tickets the test hands out, so a test sees a run in progress
at a state it chose (two trials running, then a few more done), however fast or slow the machine.

Each epoch takes the next ticket number from `folder/used` (under a file lock, across the worker
processes) and waits until `folder/allowed` reaches it; `allow(folder, n)` lets n epochs run.
"""

from __future__ import annotations

import fcntl
import time
from pathlib import Path
from typing import Any

from basht.workloads.synthetic import Sleep

#: A trial still waiting after this long gives up (a test that failed must not hang its workers).
GIVE_UP_S = 600.0


def allow(folder: Path, epochs: int) -> None:
    """Let the run's first `epochs` epochs (over all trials) go."""
    tmp = folder / "allowed.tmp"
    tmp.write_text(str(epochs))
    tmp.replace(folder / "allowed")


def taken(folder: Path) -> int:
    """How many epochs have asked for a ticket so far."""
    used = folder / "used"
    return int(used.read_text() or 0) if used.exists() else 0


class Gated(Sleep):
    """The sleep workload (its known curve), each epoch held until its ticket is allowed."""

    def __init__(self, seed: int = 0, epoch_s: float = 0.02, gate: str = "", **params: Any):
        super().__init__(seed=seed, epoch_s=epoch_s, **params)
        self.gate = Path(gate)

    def train(self, epochs: int) -> None:
        for _ in range(epochs):
            self._wait(self._ticket())
            super().train(1)

    def _ticket(self) -> int:
        with open(self.gate / "lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            ticket = taken(self.gate) + 1
            (self.gate / "used").write_text(str(ticket))
        return ticket

    def _wait(self, ticket: int) -> None:
        deadline = time.monotonic() + GIVE_UP_S
        while ticket > int((self.gate / "allowed").read_text() or 0):
            if time.monotonic() > deadline:
                raise RuntimeError(f"epoch ticket {ticket} never allowed")
            time.sleep(0.02)
