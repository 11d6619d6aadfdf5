"""Trackers follow a run from the store, each in a thread of its own, so none ever sits in the run
loop: the thread reads what is new (trials, their states, reports) every `poll_s`, and when the
run is over it flushes the end (phases, Table 2, artifacts). A tracker that fails is dropped with
one warning; the run and its results never see it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from basht.experiment import TrackerSpec
from basht.store import Store
from basht.track.base import Tracker, make_tracker, one_line
from basht.track.records import RunInfo, read_end, read_reports, read_run, read_trials

log = logging.getLogger(__name__)

#: Seconds between two reads of the store: a tracker shows a report this long after it is made.
POLL_S = 1.0
#: The longest the end of a run waits for a tracker's last flush (a slow server, large
#: artifacts); a tracker that takes longer is left behind with one warning.
FINISH_TIMEOUT_S = 120.0

#: (run id, tracker) of each tracker dropped in this process: what comes after the run (its
#: plots, sent by `send_plots`) leaves them alone instead of warning a second time.
_stopped: set[tuple[str, str]] = set()


def stopped(run_id: str, name: str) -> bool:
    """Whether tracker `name` was dropped from run `run_id` in this process."""
    return (run_id, name) in _stopped


class Follower:
    """Tells one tracker what is new in one run since it last looked."""

    def __init__(self, tracker: Tracker, store: Store, run_id: str):
        self.tracker, self.store, self.run_id = tracker, store, run_id
        self.run: RunInfo | None = None
        self._told: dict[int, tuple[str, int]] = {}  # trial -> (state, budget) as last told
        self._last_report = 0

    def open(self) -> None:
        self.run = read_run(self.store, self.run_id)
        self.tracker.open(self.run)

    def sync(self) -> None:
        # Reports first: every trial they name is then among the trials read after them. A
        # tracker makes a trial's record at its first report or state, whichever comes first;
        # a trial's state is told after its reports, so that one that ended ends after them.
        reports, self._last_report = read_reports(self.store, self.run_id, self._last_report)
        trials = {t.number: t for t in read_trials(self.store, self.run_id)}
        for report in reports:
            self.tracker.report(trials[report.trial], report)
        for trial in trials.values():
            if self._told.get(trial.number) != (trial.state, trial.budget):
                self.tracker.trial(trial)
                self._told[trial.number] = (trial.state, trial.budget)
        self.tracker.flush()

    def close(self) -> None:
        assert self.run is not None
        self.tracker.close(read_end(self.store, self.run_id, self.run.experiment))

    def replay(self) -> None:
        """The whole stored run at once: an export."""
        self.open()
        self.sync()
        self.close()


class TrackerThread:
    """One tracker following a live run until `stop`."""

    def __init__(self, tracker: Tracker, store: Store, run_id: str, poll_s: float = POLL_S):
        self.follower = Follower(tracker, store, run_id)
        self.name = tracker.spec.name
        self.poll_s = poll_s
        self.failed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name=f"basht-track-{self.name}")
        self._thread.daemon = True  # a tracker left behind never keeps the process alive

    def start(self) -> None:
        self._thread.start()

    def _follow(self) -> None:
        tracker = self.follower.tracker
        try:
            self.follower.open()
            while True:
                stopping = self._stop.wait(self.poll_s)
                self.follower.sync()
                if stopping:
                    break
            self.follower.close()
        except Exception as err:  # the one warning; the run goes on without this tracker
            self.failed = True
            _stopped.add((self.follower.run_id, self.name))
            log.warning(
                "tracker %s (%s) stopped, the run goes on without it: %s",
                self.name,
                tracker.where(),
                one_line(err),
            )
            try:
                tracker.abandon()
            except Exception as abandon_err:  # already warned once for this tracker
                log.debug("tracker %s: letting go failed: %s", self.name, abandon_err)

    def stop(self) -> None:
        """The run is over: read what is left, flush the end, close."""
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        """Whether it finished within `timeout_s`."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()


@dataclass
class Tracking:
    """A run's trackers, each following it in its thread."""

    threads: list[TrackerThread] = field(default_factory=list)

    def finish(self, timeout_s: float = FINISH_TIMEOUT_S) -> None:
        """Let each tracker flush the run's end (all at once), waiting at most `timeout_s`."""
        for thread in self.threads:
            thread.stop()
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            if not thread.join(max(0.0, deadline - time.monotonic())) and not thread.failed:
                _stopped.add((thread.follower.run_id, thread.name))
                log.warning(
                    "tracker %s did not finish within %.0f s; the run ended without waiting for it",
                    thread.name,
                    timeout_s,
                )


def start_tracking(
    store: Store, run_id: str, specs: Iterable[TrackerSpec], poll_s: float | None = None
) -> Tracking | None:
    """Start a thread per tracker of `specs` (the experiment's `measure.trackers`) on the run,
    after keeping where each one writes in the run's `measurement`. None without trackers."""
    specs = list(specs)
    if not specs:
        return None
    run = store.get_run(run_id)
    trackers = [make_tracker(spec, Path(run.results_dir)) for spec in specs]
    measurement = dict(run.measurement or {})
    measurement["trackers"] = {t.spec.name: t.where() for t in trackers}
    store.update_run(run_id, measurement=measurement)
    poll_s = POLL_S if poll_s is None else poll_s
    tracking = Tracking([TrackerThread(t, store, run_id, poll_s) for t in trackers])
    for thread in tracking.threads:
        thread.start()
        log.info("tracker %s: %s", thread.name, thread.follower.tracker.where())
    return tracking
