"""TensorBoard: event files in the run's folder (`tensorboard/`), one TensorBoard run per trial.

Each trial's folder has its reports as scalars at their epoch, its energy, carbon, cost and
duration at its last epoch, and the HParams plugin's session summaries (its configuration, its
end and status), so the HParams view lists every trial with its hyperparameters and metrics. The
top folder has the experiment's HParams configuration (the space's domains, the metrics), Table 2
and the phases. Written with the `tensorboard` package alone (no TensorFlow, no PyTorch).

`tensorboard --logdir results/<run-id>/tensorboard` shows one run; `--logdir results` all of them.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from basht.experiment import TrackerSpec
from basht.space import Choice, Float, Int
from basht.track.base import Tracker, is_final
from basht.track.records import ReportInfo, RunEnd, RunInfo, TrialInfo, numbers

FOLDER = "tensorboard"
_uid = itertools.count()


class EventFile:
    """One event file, written as TensorBoard's own writer frames it, but at once and without a
    thread of its own (the tracker's thread is the writer): reopened, it is appended to."""

    def __init__(self, folder: Path, path: Path | None = None):
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        self._event = event_pb2.Event
        folder.mkdir(parents=True, exist_ok=True)
        new = path is None
        # The name TensorBoard's EventFileWriter gives: it reads files named so, in name order.
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}"
        self.path = path or folder / f"{name}.{os.getpid()}.{next(_uid)}"
        self._writer = RecordWriter(open(self.path, "ab"))  # noqa: SIM115 -- closed in close()
        if new:
            self._add(self._event(wall_time=time.time(), file_version="brain.Event:2"))

    def _add(self, event: Any) -> None:
        self._writer.write(event.SerializeToString())

    def summary(self, summary: Any, step: int = 0, wall_time: float | None = None) -> None:
        self._add(self._event(wall_time=wall_time or time.time(), step=step, summary=summary))

    def scalars(self, values: dict[str, float], step: int, wall_time: float | None = None) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        if values:
            summary = Summary(
                value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()]
            )
            self.summary(summary, step, wall_time)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def hparam_value(value: Any) -> bool | float | str:
    """A configuration value as the HParams plugin takes one (a list, say, as its JSON)."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        return float(value)
    return json.dumps(value)


def hparam_domain(parameter: Any) -> Any:
    """The HParams domain of a space's parameter (None where the plugin has none for it)."""
    from tensorboard.plugins.hparams import summary_v2 as hp

    if isinstance(parameter, Float):
        return hp.RealInterval(float(parameter.low), float(parameter.high))
    if isinstance(parameter, Int):
        return hp.IntInterval(int(parameter.low), int(parameter.high))
    if isinstance(parameter, Choice):
        values = sorted({hparam_value(v) for v in parameter.values}, key=repr)
        kinds = {type(v) for v in values}
        if len(kinds) == 1:
            return hp.Discrete(values)
    return None


def session_end_pb(state: str, end_time_secs: float) -> Any:
    """The HParams summary that ends a trial's session, with its status. The plugin's own
    `summary.session_end_pb` needs TensorFlow; this is the same message, built as its
    TensorFlow-free `summary_v2` builds the session's start."""
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.hparams import metadata, plugin_data_pb2

    info = plugin_data_pb2.SessionEndInfo(status=session_status(state), end_time_secs=end_time_secs)
    data = plugin_data_pb2.HParamsPluginData(session_end_info=info)
    summary = Summary()
    summary.value.add(
        tag=metadata.SESSION_END_INFO_TAG,
        metadata=metadata.create_summary_metadata(data),
        tensor=metadata.NULL_TENSOR,
    )
    return summary


def session_status(state: str) -> int:
    from tensorboard.plugins.hparams import api_pb2

    if state == "failed":
        return api_pb2.STATUS_FAILURE
    if state in ("aborted", "pending", "running"):
        return api_pb2.STATUS_UNKNOWN
    return api_pb2.STATUS_SUCCESS  # completed, stopped by the pruner, paused and never promoted


class TensorBoardTracker(Tracker):
    name = "tensorboard"

    def __init__(self, spec: TrackerSpec, results_dir: Path, folder: Path | None = None):
        super().__init__(spec, results_dir, folder)
        self.logdir = (folder or results_dir / FOLDER).resolve()
        self.run: RunInfo | None = None
        self._files: dict[int, EventFile] = {}  # open files of trials still going
        self._paths: dict[int, Path] = {}  # each trial's file, appended to when reopened
        self._ended: set[int] = set()
        self._tags: set[str] = set()  # every scalar a trial has, the HParams view's metrics

    def where(self) -> str:
        return str(self.logdir)

    def open(self, run: RunInfo) -> None:
        import tensorboard.plugins.hparams.summary_v2  # noqa: F401 -- fail here, if at all

        self.run = run
        self.logdir.mkdir(parents=True, exist_ok=True)

    def _file(self, trial: TrialInfo) -> EventFile:
        from tensorboard.plugins.hparams import summary_v2

        file = self._files.get(trial.number)
        if file is not None:
            return file
        known = self._paths.get(trial.number)
        file = EventFile(self.logdir / trial.label, known)
        self._files[trial.number] = file
        if known is None:
            self._paths[trial.number] = file.path
            hparams = {k: hparam_value(v) for k, v in trial.config.items()}
            start = trial.started_at or time.time()
            file.summary(summary_v2.hparams_pb(hparams, trial.label, start), 0, start)
        return file

    def _end(self, trial: TrialInfo) -> None:
        """Its session's end: the HParams view shows its status; its file is closed."""
        file = self._file(trial)
        if trial.number not in self._ended:
            end = trial.ended_at or time.time()
            file.summary(session_end_pb(trial.state, end), 0, end)
            self._ended.add(trial.number)
        file.close()
        del self._files[trial.number]

    def trial(self, trial: TrialInfo) -> None:
        self._file(trial)
        if is_final(trial.state):
            self._end(trial)

    def report(self, trial: TrialInfo, report: ReportInfo) -> None:
        values = numbers(report.metrics)
        if report.value is not None and self.run is not None:
            values.setdefault(self.run.metric, report.value)
        self._file(trial).scalars(values, report.epoch, report.at)
        self._tags.update(values)
        if trial.number in self._ended:
            self._end(trial)  # reopened for a report read after its end: closed again

    def flush(self) -> None:
        for file in self._files.values():
            file.flush()

    def close(self, end: RunEnd) -> None:
        from tensorboard.plugins.hparams import summary_v2 as hp

        assert self.run is not None
        for outcome in end.outcomes:
            figures = outcome.figures()
            self._file(outcome.trial).scalars(figures, outcome.trial.budget)
            self._tags.update(figures)
            self._end(outcome.trial)
        top = EventFile(self.logdir)
        try:
            space = self.run.experiment.search_space
            params = [hp.HParam(name, hparam_domain(p)) for name, p in space.items()]
            metrics = [hp.Metric(tag) for tag in sorted(self._tags)]
            top.summary(hp.hparams_config_pb(params, metrics, self.run.started_at))
            values = {f"run/{m.name}": m.value for m in end.metrics if m.value is not None}
            values |= {f"phase/{name}_s": s for name, s in end.phases_s.items()}
            values |= {f"test/{k}": v for k, v in numbers(end.test_metrics).items()}
            top.scalars(numbers(values), 0)
        finally:
            top.close()

    def abandon(self) -> None:
        for file in self._files.values():
            file.close()
        self._files.clear()
