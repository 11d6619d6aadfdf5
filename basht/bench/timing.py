"""Latency wrappers (the seed's annotation wrappers): time any block or function, also for users.

@timed("load")                      # as a decorator
def load(): ...

with timed("train", sink=records.append):   # as a context manager
    ...
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


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


class timed:  # noqa: N801 - reads as an annotation: @timed("setup")
    """Time a block or every call of a function; hand each Timing to `sink` and keep the last.

    Exceptions (KeyboardInterrupt too) pass through untouched; the timing records them as aborted.
    """

    def __init__(self, name: str, sink: Callable[[Timing], None] | None = None):
        self.name, self.sink = name, sink
        self.last: Timing | None = None
        self.history: list[Timing] = []
        self._starts: list[tuple[float, float]] = []  # nested `with` blocks, innermost last

    def __enter__(self) -> timed:
        self._starts.append((time.time(), time.perf_counter()))
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._record(*self._starts.pop(), exc_type, exc)
        return False

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Each call keeps its own start, so recursive, threaded and concurrent async calls are
        timed apart; an async function is timed until its result, not its coroutine's creation."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def timed_coroutine(*args: Any, **kwargs: Any) -> Any:
                with _Call(self):
                    return await func(*args, **kwargs)

            return timed_coroutine

        @functools.wraps(func)
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            with _Call(self):
                return func(*args, **kwargs)

        return timed_call

    def _record(self, wall: float, mono: float, exc_type, exc) -> None:
        duration = time.perf_counter() - mono
        error = None
        if exc_type is not None:
            error = type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"
        self.last = Timing(self.name, wall, wall + duration, duration, exc_type is not None, error)
        self.history.append(self.last)
        if self.sink is not None:
            self.sink(self.last)


class _Call:
    """One call of a decorated function, with its own start, recorded by its `timed`."""

    def __init__(self, owner: timed):
        self.owner = owner

    def __enter__(self) -> None:
        self.wall, self.mono = time.time(), time.perf_counter()

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.owner._record(self.wall, self.mono, exc_type, exc)
        return False
