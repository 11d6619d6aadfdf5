"""The words every layer shares about a trial: its states, the algorithm's decisions, the commands
a worker obeys and the events it sends back.

They are string enums, so a member is the very string the store keeps and the JSON shows
(`TrialState.COMPLETED == "completed"`): rows read back as plain strings compare equal to them.
"""

from __future__ import annotations

import enum


class TrialState(enum.StrEnum):
    """Where a trial is. PAUSED keeps a checkpoint and may resume; STOPPED never resumes.

    ABORTED is a trial cut off from outside (Ctrl-C, a crashed driver, a grace period run out):
    it never reported an end of its own, and `basht resume` runs it again.
    """

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"
    ABORTED = "aborted"

    @property
    def is_final(self) -> bool:
        """Nothing will happen to the trial any more in this run (PAUSED may still resume)."""
        return self in FINAL_STATES

    @property
    def is_wasted(self) -> bool:
        """Its training bought no finished result: wasted by default in the Table 2 metrics."""
        return self in WASTED_STATES


FINAL_STATES = frozenset(
    {TrialState.COMPLETED, TrialState.STOPPED, TrialState.FAILED, TrialState.ABORTED}
)
#: The default of `measure.wasted_states`, in the order the experiment file lists it.
WASTED_STATES = (TrialState.FAILED, TrialState.ABORTED, TrialState.STOPPED)


class Decision(enum.Enum):
    """What a trial does after a report.

    CONTINUE trains on towards the suggested budget. PAUSE ends the trial's current run but keeps
    its checkpoint: the algorithm may hand it back later with `resume=True` and a larger budget (ASHA
    promotion). STOP ends it for good; it is never resumed and its checkpoint may be dropped.
    """

    CONTINUE = "continue"
    PAUSE = "pause"
    STOP = "stop"


class Command(enum.StrEnum):
    """What the driver tells a worker after a report: the algorithm's `Decision`, or COMPLETE
    when the trial reached its budget (or the target) and should save its final state and end."""

    CONTINUE = "continue"
    PAUSE = "pause"
    STOP = "stop"
    COMPLETE = "complete"

    @property
    def ending(self) -> EventKind:
        """The event a worker sends when it ends a trial on this command (not CONTINUE)."""
        return _ENDING[self]


class EventKind(enum.StrEnum):
    """What a worker tells the driver. LOADED: model and data ready; REPORT: one epoch done, the
    worker waits for a command; PAUSED / STOPPED / COMPLETED / FAILED: the trial left the worker
    (its new state); TESTED: the test phase's result."""

    LOADED = "loaded"
    REPORT = "report"
    PAUSED = "paused"
    STOPPED = "stopped"
    COMPLETED = "completed"
    FAILED = "failed"
    TESTED = "tested"

    @property
    def ends_run(self) -> bool:
        """The trial left its worker: the event's kind is the trial's new state."""
        return self in ENDS_RUN


_ENDING = {
    Command.STOP: EventKind.STOPPED,
    Command.PAUSE: EventKind.PAUSED,
    Command.COMPLETE: EventKind.COMPLETED,
}
#: A set, not the property, in the driver's loop: it runs once per event.
ENDS_RUN = frozenset({EventKind.PAUSED, EventKind.STOPPED, EventKind.COMPLETED, EventKind.FAILED})
