"""Running trials on resources: the executors and the messages they exchange with the driver."""

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

__all__ = [
    "COMPLETE",
    "CONTINUE",
    "PAUSE",
    "STOP",
    "LocalExecutor",
    "TrialEvent",
    "TrialTask",
    "WorkloadRef",
]
