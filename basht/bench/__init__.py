"""The Basht lifecycle: seven timed phases, the runner, and the systems under test."""

from basht.bench.lifecycle import PHASES, BestTrial, RunContext, SystemUnderTest
from basht.bench.runner import RunResult, resume_benchmark, run_benchmark
from basht.bench.timing import Timing, timed

__all__ = [
    "PHASES",
    "BestTrial",
    "RunContext",
    "RunResult",
    "SystemUnderTest",
    "Timing",
    "resume_benchmark",
    "run_benchmark",
    "timed",
]
