"""The Basht lifecycle: seven timed phases, the runner, and the systems under test."""

from basht.bench.lifecycle import PHASES, BestTrial, RunContext, SystemUnderTest
from basht.bench.runner import RunResult, run_benchmark
from basht.bench.timing import Timing, timed

__all__ = [
    "PHASES",
    "BestTrial",
    "RunContext",
    "RunResult",
    "SystemUnderTest",
    "Timing",
    "run_benchmark",
    "timed",
]
