"""The seven Basht phases and the protocol every system under test implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from basht.errors import BashtError
from basht.experiment import Experiment
from basht.store import Store

#: In order. JCT runs from the start of deploy to the end of test.
PHASES = ("deploy", "setup", "run", "collect_results", "test", "collect_metrics", "undeploy")


@dataclass
class RunContext:
    """What a system under test gets: the experiment, the store, its run and its folder."""

    experiment: Experiment
    store: Store
    run_id: str
    results_dir: Path
    on_update: Any = None  # a callable taking a TunerStatus, for live progress
    resume: bool = False  # continue the stored run (`basht resume`) instead of starting afresh
    monitor: Any = None  # the node's EnergyMonitor, running from deploy to the end of test
    exporter: Any = None  # the live Prometheus exporter when measure.prometheus_port is set
    notes: dict[str, Any] = field(default_factory=dict)
    attempt: int = 1  # 2, 3, ... after `basht resume`
    intensity: Any = None  # the run's carbon intensity (replayed when schedule.time_scale says)


@dataclass
class BestTrial:
    trial_id: int | None
    config: dict[str, Any] | None
    value: float | None
    budget: int
    checkpoint: str | None = None

    def check_testable(self, ctx: RunContext) -> None:
        """Refuse, in one line, to test when no trial produced a result (saying what ended the
        search, if something did: a budget used before the first result, say)."""
        if self.trial_id is None or self.config is None:
            reason = ctx.notes.get("stop_reason")
            why = f" before the search ended ({reason})" if reason else ""
            raise BashtError(f"no trial produced a result{why}, so there is nothing to test")


class SystemUnderTest(Protocol):
    """A tuning framework measured by Basht. Undeploy must be safe after any failure."""

    name: str

    def deploy(self) -> None:
        """Bring up the framework's components (processes, clusters, storage)."""

    def setup(self) -> None:
        """Prepare this workload: hand classes and data to the workers."""

    def run(self) -> None:
        """The trial phase: load, train and validate every configuration the tuner picks."""

    def collect_results(self) -> BestTrial:
        """Consolidate the trials and identify the best configuration."""

    def test(self, best: BestTrial) -> dict[str, float]:
        """Evaluate the best configuration's model on the test split."""

    def collect_metrics(self) -> dict[str, Any]:
        """Gather what the framework does not measure itself (latencies, resources)."""

    def undeploy(self) -> None:
        """Remove everything deploy made, so the next run starts clean."""
