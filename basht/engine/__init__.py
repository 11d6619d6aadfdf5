"""Running trials on resources: the `Executor` contract, the executors (local processes, a
virtual clock, Ray in `engine.ray`) and the messages they exchange with the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from basht._lazy import lazy_exports

if TYPE_CHECKING:
    from basht.engine.base import Executor
    from basht.engine.local import LocalExecutor
    from basht.engine.messages import (
        COMPLETE,
        CONTINUE,
        PAUSE,
        STOP,
        TrialEvent,
        TrialTask,
        WorkloadRef,
    )
    from basht.engine.ray.executor import RayExecutor
    from basht.engine.recorded import RecordedCurves
    from basht.engine.simulated import (
        FunctionCurve,
        LearningCurve,
        SimulatedExecutor,
        SyntheticCurve,
    )

__all__ = [
    "COMPLETE",
    "CONTINUE",
    "Executor",
    "FunctionCurve",
    "LearningCurve",
    "LocalExecutor",
    "PAUSE",
    "RayExecutor",
    "RecordedCurves",
    "STOP",
    "SimulatedExecutor",
    "SyntheticCurve",
    "TrialEvent",
    "TrialTask",
    "WorkloadRef",
]

__getattr__, __dir__ = lazy_exports(__name__)
