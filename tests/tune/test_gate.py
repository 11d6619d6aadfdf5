"""The Tuner's gate on the virtual clock: held trials wait for it, running ones pause at their next
report and resume, nothing is lost, and the search trains what it would have trained ungated."""

from __future__ import annotations

from basht.engine import SimulatedExecutor
from basht.space import Float, SearchSpace
from basht.states import EventKind, TrialState
from basht.tune import ASHA, RandomSearch, Tuner
from basht.workloads.base import WorkloadRef

SPACE = SearchSpace({"x": Float(0.0, 1.0)})


def curve(config: dict, epoch: int) -> tuple[float, float]:
    """Quality by x, one virtual second an epoch."""
    return config["x"] * (1 - 0.5**epoch), 1.0


class Window:
    """Allows nothing from `closed` to `opened` (virtual seconds), `width` trials otherwise."""

    def __init__(self, closed: float, opened: float, width: int = 2):
        self.closed, self.opened, self.width = closed, opened, width
        self.asked: list[tuple[float, int, float | None]] = []

    def allowed(self, now: float, epochs_done: int, epoch_s: float | None) -> tuple[int, float]:
        self.asked.append((now, epochs_done, epoch_s))
        if self.closed <= now < self.opened:
            return 0, self.opened
        return self.width, (self.closed if now < self.closed else now + 1e9)


class Recording(SimulatedExecutor):
    """Keeps the virtual time of every report."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reports: list[float] = []

    def poll(self, timeout_s=None):
        events = super().poll(timeout_s)
        self.reports += [e.at for e in events if e.kind == EventKind.REPORT]
        return events


def run(algorithm, gate=None, workers: int = 2) -> tuple[Tuner, Recording]:
    executor = Recording(workers, curve, seed=0, metric="accuracy")
    tuner = Tuner(
        algorithm,
        executor,
        store=None,
        run_id="gate",
        workload=WorkloadRef("simulated", experiment_seed=0),
        checkpoint_dir=None,
        gate=gate,
    )
    tuner.run()
    return tuner, executor


def epochs_in(reports: list[float], start: float, end: float) -> int:
    return sum(start < at <= end for at in reports)


def test_nothing_trains_while_the_gate_is_closed_and_the_search_is_the_same():
    gated_window = Window(closed=3.5, opened=50.0)
    plain, plain_executor = run(RandomSearch(SPACE, metric="accuracy", max_budget=5, max_trials=6))
    gated, executor = run(
        RandomSearch(SPACE, metric="accuracy", max_budget=5, max_trials=6), gated_window
    )
    # Reports land at whole seconds; the trials running at 3.5 s pause at 4 s and wait.
    assert epochs_in(executor.reports, 4.0, 50.0) == 0
    assert executor.now() > 50.0 > plain_executor.now()
    assert gated.status.counts[TrialState.COMPLETED] == 6
    assert gated.status.best_config == plain.status.best_config
    assert gated.status.best_value == plain.status.best_value
    # Each trial trained its five epochs once: paused trials resumed where they stopped.
    assert len(executor.reports) == len(plain_executor.reports) == 6 * 5


def test_asha_promotions_wait_for_the_gate_too():
    window = Window(closed=2.5, opened=30.0)
    gated, executor = run(ASHA(SPACE, metric="accuracy", max_budget=9, eta=3, max_trials=9), window)
    plain, _ = run(ASHA(SPACE, metric="accuracy", max_budget=9, eta=3, max_trials=9))
    assert epochs_in(executor.reports, 3.0, 30.0) == 0
    assert gated.status.best_config == plain.status.best_config
    assert gated.status.counts == plain.status.counts


def test_the_gate_hears_the_epochs_run_and_their_mean_length():
    window = Window(closed=1e9, opened=2e9)  # never closes
    run(RandomSearch(SPACE, metric="accuracy", max_budget=3, max_trials=2), window)
    assert window.asked[0][1:] == (0, None)  # before anything was measured
    done, mean = window.asked[-1][1:]
    assert done >= 1 and mean == 1.0
