"""The executor contract: what every engine that runs trials does for the Tuner and the runner.

The Tuner hands an executor tasks and commands and reads back events; the runner starts it, gives
it the workload, asks it for the test run, wires its workers to the energy monitor and stops it.
Each executor (local processes, Ray actors, a virtual clock, a RubberBand plan's elastic cluster)
implements the abstract methods and overrides what it does differently from the defaults here,
so no caller looks for optional methods or asks which executor it holds.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from basht.errors import BashtError

if TYPE_CHECKING:
    from basht.energy.monitor import EnergyMonitor
    from basht.engine.messages import TrialEvent, TrialTask
    from basht.states import Command
    from basht.workloads.base import WorkloadRef


class Executor(ABC):
    """Runs trials on resources; knows nothing of the algorithm that chose them."""

    # -- lifecycle (deploy, setup, undeploy) --------------------------------------------------

    def start(self) -> None:  # noqa: B027 - a default: an executor with nothing to start
        """Bring up the workers (deploy); returns once every one can take a trial."""

    def setup(self, ref: WorkloadRef) -> None:  # noqa: B027 - a default: nothing to prepare
        """Give every worker the workload, which it imports and prepares once (setup)."""

    def shutdown(self, timeout_s: float = 5.0) -> None:  # noqa: B027 - a default: nothing held
        """Stop every worker and release what the executor holds (undeploy). Safe twice."""

    # -- trials ---------------------------------------------------------------------------------

    @property
    @abstractmethod
    def idle_workers(self) -> int:
        """How many more trials could start now."""

    @abstractmethod
    def submit(self, task: TrialTask) -> int:
        """Start (or resume) a trial; returns the worker it runs on."""

    @abstractmethod
    def command(self, trial_id: int, command: Command, path: str | None = None) -> None:
        """Answer a trial's last report: go on, or pause / complete saving to `path`, or stop."""

    @abstractmethod
    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        """The events since the last poll, waiting up to `timeout_s` for the first."""

    def abort(self, trial_id: int) -> None:  # noqa: B027 - a default: left to shutdown
        """End a trial that no longer answers at once; nothing more is heard of it. By default it
        is left to `shutdown` (an executor that can kill one worker overrides this)."""

    def run_test(self, task: TrialTask, budget: int, timeout_s: float | None = None) -> TrialEvent:
        """Evaluate a trained configuration on the test split (the test phase)."""
        raise BashtError(f"{type(self).__name__} cannot run the test phase")

    @property
    def resume_costs(self) -> bool:
        """Whether resuming a paused trial costs a start (its model built again, its checkpoint
        read). Where it does, a trial promoted as it reaches its rung keeps running instead."""
        return True

    # -- the clock --------------------------------------------------------------------------

    def now(self) -> float:
        """Seconds on the executor's clock: time budgets and timestamps are measured on it (a
        simulated executor runs on virtual time)."""
        return time.time()

    def wait_until(self, at: float) -> None:
        """Nothing runs and nothing may start before `at` on this clock (a carbon-aware schedule
        holds the work back): wait for it, a second at most, so limits are still looked at."""
        time.sleep(max(0.0, min(at - self.now(), 1.0)))

    # -- checkpoints ----------------------------------------------------------------------------

    def discard_checkpoint(self, path: str) -> None:
        """Remove a checkpoint no trial will resume from. Workers here write to the driver's
        disk; an executor whose workers keep checkpoints elsewhere overrides this."""
        Path(path).unlink(missing_ok=True)

    # -- energy: which process runs what, for the monitor --------------------------------------

    def attach_monitor(self, monitor: EnergyMonitor) -> None:  # noqa: B027 - a default
        """Tell `monitor` what it cannot find out itself (devices placed, nodes metered
        elsewhere, workers released); by default there is nothing to tell."""

    def first_idle(self) -> int | None:
        """A worker free now (the one the test phase will use), or None."""
        return None

    def pid_of(self, worker: int) -> int | None:
        """The process id of `worker` if this machine can read its process."""
        return None

    def metered_elsewhere(self, worker: int) -> bool:
        """Whether a meter on another node books `worker`'s energy (the driver cannot)."""
        return False

    def devices_of(self, worker: int) -> dict[str, float]:
        """The accelerator devices `worker` holds and its share of each ({} for none known)."""
        return {}
