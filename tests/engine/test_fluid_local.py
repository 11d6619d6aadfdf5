"""Fluid on the local pool: thread widths change between epochs and the result does not."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

import pytest

from basht.engine import COMPLETE, CONTINUE, LocalExecutor, TrialTask, WorkloadRef

pytestmark = pytest.mark.integration

CONFIG = {"lr": 0.01, "hidden": 32, "batch_size": 64}
REF = WorkloadRef("digits-mlp")


def _events(ex, want: int, timeout_s: float = 120.0):
    out, deadline = [], time.monotonic() + timeout_s
    while len(out) < want and time.monotonic() < deadline:
        out.extend(e for e in ex.poll(1.0) if e.kind in ("report", "completed", "failed"))
    assert not [e for e in out if e.kind == "failed"], out
    return out


def _straight(epochs: int) -> list[dict[str, float]]:
    ex = LocalExecutor(workers=1, threads=1)
    ex.start()
    try:
        ex.submit(TrialTask(1, CONFIG, REF, seed=3))
        reports = []
        for i in range(epochs):
            (e,) = _events(ex, 1)
            reports.append(e.metrics)
            ex.command(1, CONTINUE if i < epochs - 1 else COMPLETE)
        _events(ex, 1)
        return reports
    finally:
        ex.shutdown()


def test_a_trial_resized_between_epochs_matches_a_fixed_width():
    ex = LocalExecutor(workers=2, threads=1, scheduler="fluid")
    ex.start()
    try:
        ex.submit(TrialTask(1, CONFIG, REF, seed=3, target_budget=4))
        widths = [ex._loads[1].width]  # alone: the whole pool
        (first,) = _events(ex, 1)
        ex.submit(TrialTask(2, {"alpha": 1e-3}, WorkloadRef("digits-sgd"), seed=0, target_budget=1))
        ex.command(1, CONTINUE)  # trial 2 arrived: trial 1 gives a core back
        widths.append(ex._loads[1].width)
        reports = [first.metrics]
        done_2 = False
        while len(reports) < 4 or not done_2:
            for e in _events(ex, 1):
                if e.trial_id == 2 and e.kind == "report":
                    ex.command(2, COMPLETE)
                elif e.trial_id == 2:
                    done_2 = True
                elif e.kind == "report":
                    reports.append(e.metrics)
                    if len(reports) < 4:
                        ex.command(1, CONTINUE)
                        widths.append(ex._loads[1].width)
        ex.command(1, COMPLETE)
    finally:
        ex.shutdown()
    assert done_2
    assert widths[0] == 2 and 1 in widths  # it shrank while trial 2 ran
    straight = _straight(4)
    # More threads sum in another order, so the loss may differ in its last bits; the model's
    # predictions (accuracy) are the same.
    assert [r["accuracy"] for r in reports] == [r["accuracy"] for r in straight]
    for got, want in zip(reports, straight, strict=True):
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)


class OmpProbe:
    """A class workload without `set_threads`: each report gives the thread count its process's
    pools were held to while it trained, and the width (`resources.cpus`) it was started at."""

    def __init__(self, seed: int = 0):
        self.epoch = 0

    def load(self, config, resources) -> None:
        self.cpus = resources.cpus

    def train(self, epochs: int) -> None:
        self.epoch += epochs

    def validate(self) -> dict[str, float]:
        return {"accuracy": 1.0, "omp": float(os.environ["OMP_NUM_THREADS"]), "cpus": self.cpus}

    def test(self) -> dict[str, float]:
        return {"accuracy": 1.0}

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state) -> None:
        self.epoch = state["epoch"]


def omp_steps(config, trial) -> None:
    """A plain-function workload: each step reports its process's thread count."""
    for step in range(1, trial.budget + 1):
        trial.report(step, accuracy=1.0, omp=float(os.environ["OMP_NUM_THREADS"]))


class _Events:
    """A trial's next event of a kind, keeping what other trials said meanwhile."""

    def __init__(self, ex: LocalExecutor):
        self.ex, self.kept = ex, []

    def next(self, trial_id: int, kind: str):
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            for i, e in enumerate(self.kept):
                if e.trial_id == trial_id and e.kind in (kind, "failed"):
                    del self.kept[i]
                    assert e.kind == kind, e
                    return e
            self.kept.extend(self.ex.poll(1.0))
        raise AssertionError(f"no {kind} from trial {trial_id}")


@contextlib.contextmanager
def _fluid_pair(ref: WorkloadRef) -> Iterator[tuple[LocalExecutor, _Events]]:
    """Two fluid workers of one thread each, set up for `ref`; shut down after."""
    ex = LocalExecutor(workers=2, threads=1, scheduler="fluid")
    ex.start()
    try:
        ex.setup(ref)
        yield ex, _Events(ex)
    finally:
        ex.shutdown()


def test_a_trial_starts_at_its_planned_width_not_the_last_trials():
    ref = WorkloadRef("tests.engine.test_fluid_local:OmpProbe")
    with _fluid_pair(ref) as (ex, events):
        ex.submit(TrialTask(1, {}, ref, seed=0), worker=0)  # alone: both cores
        alone = events.next(1, "report")
        ex.submit(TrialTask(2, {}, ref, seed=0), worker=1)
        ex.command(1, CONTINUE)  # shrinks to one thread
        events.next(2, "report")
        ex.command(2, COMPLETE)
        events.next(2, "completed")
        events.next(1, "report")
        ex.command(1, CONTINUE)  # alone again: grows to two threads
        events.next(1, "report")
        ex.submit(TrialTask(3, {}, ref, seed=0), worker=1)
        ex.command(1, COMPLETE)
        events.next(1, "completed")
        ex.submit(TrialTask(4, {}, ref, seed=0), worker=0)  # where trial 1 last had two threads
        reports = [events.next(4, "report"), events.next(3, "report")]
        for trial_id in (3, 4):
            ex.command(trial_id, COMPLETE)
            events.next(trial_id, "completed")
    assert alone.metrics["cpus"] == alone.metrics["omp"] == 2
    # Trials 3 and 4 share the two cores: one thread each, not two more on worker 0.
    assert [r.metrics["omp"] for r in reports] == [r.metrics["cpus"] for r in reports] == [1, 1]


def test_a_function_trial_takes_its_new_width():
    ref = WorkloadRef("tests.engine.test_fluid_local:omp_steps")
    with _fluid_pair(ref) as (ex, events):
        ex.submit(TrialTask(1, {}, ref, seed=0, target_budget=3), worker=0)  # alone: both cores
        steps = [events.next(1, "report")]
        ex.submit(TrialTask(2, {}, ref, seed=0, target_budget=1), worker=1)
        ex.command(1, CONTINUE)  # one core each from its next step
        steps.append(events.next(1, "report"))
        events.next(2, "report")
        ex.command(2, COMPLETE)
        events.next(2, "completed")
        ex.command(1, CONTINUE)  # alone again
        steps.append(events.next(1, "report"))
        ex.command(1, COMPLETE)
        events.next(1, "completed")
    assert [step.metrics["omp"] for step in steps] == [2, 1, 2]
