"""A synthetic workload with a known answer: for engine tests and overhead benchmarks."""

from __future__ import annotations

import math
import time
from typing import Any

from basht.workloads.base import Resources


class Sleep:
    """Accuracy rises with epochs towards a ceiling set by the config; each epoch sleeps `epoch_s`.

    Numeric config values pull the ceiling down by their distance from `optimum` (default 0), so
    the best configuration is known in advance. Costs no CPU beyond the engine's own.
    """

    metrics = ("accuracy", "loss")

    def __init__(
        self, seed: int = 0, epoch_s: float = 0.0, optimum: float = 0.0, fail_on: Any = None
    ):
        self.seed, self.epoch_s, self.optimum, self.fail_on = seed, epoch_s, optimum, fail_on
        self.epoch = 0
        self.ceiling = 1.0

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        if self.fail_on is not None and self.fail_on in config.values():
            raise ValueError(f"configured to fail on {self.fail_on!r}")
        distance = sum(
            abs(float(v) - self.optimum) for v in config.values() if isinstance(v, (int, float))
        )
        self.ceiling = 1.0 / (1.0 + distance)

    def about(self) -> dict[str, Any]:
        """Table 1's t, ts, m, ta: no data and no model, a known curve."""
        return {
            "dataset": "none",
            "dataset_mb": 0.0,
            "model": "a known learning curve (its ceiling set by the config)",
            "training": f"none (an epoch sleeps {self.epoch_s:g} s)",
        }

    def train(self, epochs: int) -> None:
        if self.epoch_s:
            time.sleep(self.epoch_s * epochs)
        self.epoch += epochs

    def _score(self) -> dict[str, float]:
        accuracy = self.ceiling * (1.0 - math.exp(-0.5 * self.epoch))
        return {"accuracy": accuracy, "loss": 1.0 - accuracy}

    def validate(self) -> dict[str, float]:
        return self._score()

    def test(self) -> dict[str, float]:
        return self._score()

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "ceiling": self.ceiling}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.ceiling = state["epoch"], state["ceiling"]
