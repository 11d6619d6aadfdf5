"""A user workload with one trial that hangs, given as `package.module:attr` as a user's own is."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from basht.workloads import Resources


class HangsOnce:
    """Epochs of `epoch_s`; the first trial to reach epoch `hang_at` never finishes it (a training
    step that never returns), after writing its process id to `flag`. Every other trial trains on.
    """

    def __init__(self, flag: str, seed: int = 0, epoch_s: float = 0.1, hang_at: int = 2):
        self.flag, self.epoch_s, self.hang_at = Path(flag), epoch_s, hang_at
        self.epoch = 0

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        self.rate = float(config.get("x", 1.0))

    def train(self, epochs: int) -> None:
        self.epoch += epochs
        if self.epoch == self.hang_at and self._first():
            _hang()
        time.sleep(self.epoch_s)

    def _first(self) -> bool:
        """Whether this trial is the one that hangs: the first to create the flag file."""
        try:
            fd = os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True

    def validate(self) -> dict[str, float]:
        return {"accuracy": self.rate * self.epoch}

    def test(self) -> dict[str, float]:
        return {"accuracy": self.rate * self.epoch}

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = state["epoch"]


def _hang(limit_s: float = 600.0) -> None:
    """Never return while the driver lives; once orphaned (a test that failed killed its driver)
    or after `limit_s`, exit, so that no process is left behind."""
    parent, deadline = os.getppid(), time.monotonic() + limit_s
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.1)
    os._exit(1)
