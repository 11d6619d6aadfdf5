"""Latency wrappers (the seed's annotation wrappers): time any block or function, also for users.

@timed("load")                      # as a decorator
def load(): ...

with timed("train", sink=records.append):   # as a context manager
    ...
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ContextDecorator
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    """One timed block: wall-clock start and end (unix seconds), a monotonic duration, and whether
    it ended by an exception (aborted), with that exception's one-line reason."""

    name: str
    start: float
    end: float
    duration_s: float
    aborted: bool = False
    error: str | None = None


class timed(ContextDecorator):  # noqa: N801 - reads as an annotation: @timed("setup")
    """Time a block or every call of a function; hand each Timing to `sink` and keep the last.

    Exceptions (KeyboardInterrupt too) pass through untouched; the timing records them as aborted.
    """

    def __init__(self, name: str, sink: Callable[[Timing], None] | None = None):
        self.name, self.sink = name, sink
        self.last: Timing | None = None
        self.history: list[Timing] = []

    def __enter__(self) -> timed:
        self._wall = time.time()
        self._mono = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        duration = time.perf_counter() - self._mono
        error = None
        if exc_type is not None:
            error = type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"
        self.last = Timing(
            self.name, self._wall, self._wall + duration, duration, exc_type is not None, error
        )
        self.history.append(self.last)
        if self.sink is not None:
            self.sink(self.last)
        return False
