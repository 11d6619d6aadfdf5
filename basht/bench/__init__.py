"""The Basht lifecycle: seven timed phases, the runner, and the systems under test."""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.bench.lifecycle import PHASES, BestTrial, RunContext, SystemUnderTest
    from basht.bench.runner import RunResult, resume_benchmark, run_benchmark
    from basht.bench.timing import Timing, timed

__all__ = [
    "BestTrial",
    "PHASES",
    "RunContext",
    "RunResult",
    "SystemUnderTest",
    "Timing",
    "resume_benchmark",
    "run_benchmark",
    "timed",
]

__getattr__, __dir__ = lazy_exports(__name__)
