"""The contract every tracker keeps, and where each one lives.

A tracker is told a run's records in order by one thread (`basht.track.follow`): the run when it
opens, each report, each trial when first seen and whenever its state or budget changes, and at
the end everything the run measured; it makes a trial's record at whichever comes first. It never
sees the store, and it may raise: whoever drives it drops it with one warning (a live run) or one
error line (an export).
"""

from __future__ import annotations

import abc
import importlib
from pathlib import Path
from typing import ClassVar

from basht.experiment import TRACKERS, TrackerSpec
from basht.states import FINAL_STATES
from basht.track.records import ReportInfo, RunEnd, RunInfo, TrialInfo

#: name -> (module, class) of each tracker, imported only when a run asks for it.
_CLASSES = {
    "mlflow": ("basht.track.mlflow_tracker", "MlflowTracker"),
    "tensorboard": ("basht.track.tensorboard_tracker", "TensorBoardTracker"),
    "wandb": ("basht.track.wandb_tracker", "WandbTracker"),
}
assert set(_CLASSES) == set(TRACKERS)  # the schema's names and these are one list

#: The package each tracker needs, and the extra that installs it.
PACKAGES = {"mlflow": "mlflow", "tensorboard": "tensorboard", "wandb": "wandb"}


def is_final(state: str) -> bool:
    """Nothing more happens to a trial in this state in this run (a paused one may resume)."""
    return state in FINAL_STATES


class Tracker(abc.ABC):
    """One experiment tracker. Its third-party package is imported in `open`, in the tracker's
    own thread, so that neither the import's time nor its failure reaches the run."""

    name: ClassVar[str]

    def __init__(self, spec: TrackerSpec, results_dir: Path, folder: Path | None = None):
        """`results_dir` is the run's folder; `folder` where a file-writing tracker writes
        instead of its default place in that folder (`basht export --uri`)."""
        self.spec = spec
        self.results_dir = results_dir
        self.folder = folder

    @abc.abstractmethod
    def where(self) -> str:
        """Where the run goes: a tracking URI or a folder (kept in the run's `measurement`)."""

    @abc.abstractmethod
    def open(self, run: RunInfo) -> None:
        """Start the run's record (or find the one an earlier attempt or export started)."""

    @abc.abstractmethod
    def trial(self, trial: TrialInfo) -> None:
        """A trial first seen, or whose state or budget changed (told after the reports read
        with it, so a trial that ended ends after its last report)."""

    @abc.abstractmethod
    def report(self, trial: TrialInfo, report: ReportInfo) -> None:
        """One epoch's report of `trial`."""

    def flush(self) -> None:  # noqa: B027 -- a tracker that writes at once has nothing to flush
        """Send what the last reads gave (called after each read of the store)."""

    @abc.abstractmethod
    def close(self, end: RunEnd) -> None:
        """Flush the run's end: each trial's energy, carbon, cost and state, the phases, Table 2
        and the artifacts; then let go of whatever it holds."""

    def abandon(self) -> None:  # noqa: B027 -- most trackers hold nothing worth letting go of
        """Let go of what it holds after a failure, without writing more (must not raise)."""


def make_tracker(spec: TrackerSpec, results_dir: Path, folder: Path | None = None) -> Tracker:
    module, cls = _CLASSES[spec.name]
    tracker_class: type[Tracker] = getattr(importlib.import_module(module), cls)
    return tracker_class(spec, results_dir, folder)


def one_line(err: BaseException) -> str:
    """An error as one line, its kind named (a tracker's errors come from other packages)."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
