"""Trackers for the tests: one that records what it is told, one that breaks where it is told to."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from basht.track import Tracker
from basht.track.records import ReportInfo, RunEnd, RunInfo, TrialInfo


class Recorder(Tracker):
    """Keeps every call, in order, in `calls` (shared by all instances: one run at a time)."""

    name = "recorder"
    calls: ClassVar[list[tuple[str, Any]]] = []
    seen: ClassVar[dict[int, threading.Event]] = {}  # trial number -> set when first told

    def where(self) -> str:
        return "memory"

    def open(self, run: RunInfo) -> None:
        self.calls.append(("open", run))

    def trial(self, trial: TrialInfo) -> None:
        self.calls.append(("trial", trial))
        self.seen.setdefault(trial.number, threading.Event()).set()

    def report(self, trial: TrialInfo, report: ReportInfo) -> None:
        self.calls.append(("report", report))

    def close(self, end: RunEnd) -> None:
        self.calls.append(("close", end))


class Breaks(Recorder):
    """Raises at its first report, as a tracker whose server is gone would."""

    name = "breaks"

    def report(self, trial: TrialInfo, report: ReportInfo) -> None:
        raise ConnectionError("the tracking server went away")

    def abandon(self) -> None:
        self.calls.append(("abandon", None))


def use(monkeypatch: Any, **trackers: type[Tracker]) -> None:
    """Let `measure.trackers` names (mlflow, tensorboard, wandb) build these classes instead."""
    import basht.track.base as base

    for name, cls in trackers.items():
        monkeypatch.setitem(base._CLASSES, name, (__name__, cls.__name__))
    Recorder.calls.clear()
    Recorder.seen.clear()
