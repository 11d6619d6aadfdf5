"""The simulated executor: the Tuner's protocol on a virtual clock, curves, and runs at scale."""

from __future__ import annotations

import hashlib
import math
import statistics
import struct
import time
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest

from basht.engine import (
    COMPLETE,
    CONTINUE,
    PAUSE,
    STOP,
    FunctionCurve,
    SimulatedExecutor,
    SyntheticCurve,
    TrialTask,
    WorkloadRef,
)
from basht.engine.simulated import _splitmix64
from basht.errors import BashtError
from basht.space import Float, Int, SearchSpace
from basht.tune.base import Decision, Suggestion
from basht.tune.basic import FullBudgetSearch
from basht.tune.simulate import simulate
from basht.tune.tuner import Tuner

REF = WorkloadRef("simulated")
SPACE = SearchSpace(
    {"lr": Float(1e-4, 1.0, log=True), "width": Int(8, 512, log=True), "drop": Float(0.0, 0.5)}
)


def linear(config: dict[str, Any], epoch: int) -> tuple[float, float]:
    """value = epoch / 10, and epoch e takes e seconds: easy to check by hand."""
    return epoch / 10, float(epoch)


def one(ex: SimulatedExecutor) -> Any:
    events = ex.poll()
    assert len(events) == 1, events
    return events[0]


def test_a_trial_loads_reports_each_epoch_and_waits_for_commands():
    ex = SimulatedExecutor(2, FunctionCurve(linear), load_s=0.5, metric="acc")
    assert ex.idle_workers == 2 and ex.now() == 0.0
    worker = ex.submit(TrialTask(7, {"x": 1}, REF, seed=0))
    assert ex.idle_workers == 1

    loaded = one(ex)
    assert (loaded.kind, loaded.trial_id, loaded.worker, loaded.load_s) == (
        "loaded",
        7,
        worker,
        0.5,
    )
    assert ex.now() == 0.5
    report = one(ex)
    assert (report.kind, report.epoch, report.metrics, report.train_s) == (
        "report",
        1,
        {"acc": 0.1},
        1.0,
    )
    assert report.at == ex.now() == 1.5
    assert ex.poll() == []  # it waits for a command, and the clock does not move
    assert ex.now() == 1.5

    ex.command(7, CONTINUE)
    report = one(ex)
    assert (report.epoch, report.metrics["acc"], ex.now()) == (2, 0.2, 3.5)
    ex.command(7, COMPLETE, "/final.pkl")
    done = one(ex)
    assert (done.kind, done.epoch, done.path, ex.now()) == ("completed", 2, "/final.pkl", 3.5)
    assert ex.idle_workers == 2


def test_a_command_is_accepted_only_while_the_trial_waits():
    ex = SimulatedExecutor(1, FunctionCurve(linear))
    ex.submit(TrialTask(1, {}, REF, seed=0))
    with pytest.raises(BashtError, match="not waiting"):
        ex.command(1, CONTINUE)  # loaded, but no report yet
    ex.poll(), ex.poll()
    ex.command(1, CONTINUE)
    with pytest.raises(BashtError, match="not waiting"):
        ex.command(1, STOP)
    with pytest.raises(KeyError):
        ex.command(99, STOP)
    with pytest.raises(BashtError, match="no idle worker"):
        ex.submit(TrialTask(2, {}, REF, seed=0))


@pytest.mark.parametrize(
    ("command", "kind", "path"),
    [(STOP, "stopped", None), (PAUSE, "paused", "/x/p.pkl"), (COMPLETE, "completed", "/x/f.pkl")],
)
def test_ending_commands_free_the_worker_and_echo_the_path(command, kind, path):
    ex = SimulatedExecutor(1, FunctionCurve(linear))
    ex.submit(TrialTask(3, {}, REF, seed=0))
    ex.poll(), ex.poll()
    ex.command(3, command, path)
    assert ex.idle_workers == 0  # freed when the ending event is delivered, as LocalExecutor does
    end = one(ex)
    assert (end.kind, end.trial_id, end.epoch, end.path, end.at) == (kind, 3, 1, path, 1.0)
    assert ex.idle_workers == 1 and ex.running == [] and ex.poll() == []
    assert not Path("/x/p.pkl").exists()  # paths are only echoed


def test_pause_and_resume_continue_from_start_epoch_paying_only_load_s():
    ex = SimulatedExecutor(1, FunctionCurve(linear), load_s=0.25)
    ex.submit(TrialTask(1, {}, REF, seed=0))
    ex.poll(), ex.poll()
    ex.command(1, CONTINUE)
    ex.poll()
    ex.command(1, PAUSE, "/ckpt")
    paused = one(ex)
    assert (paused.kind, paused.epoch, paused.path) == ("paused", 2, "/ckpt")
    paused_at = ex.now()
    assert paused_at == 0.25 + 1 + 2

    ex.submit(TrialTask(1, {}, REF, seed=0, start_epoch=2, resume_from="/ckpt"))
    loaded = one(ex)
    assert (loaded.epoch, loaded.at) == (2, paused_at + 0.25)
    report = one(ex)
    assert (report.epoch, report.metrics["value"]) == (3, 0.3)
    assert report.at == paused_at + 0.25 + 3.0  # epoch 3 only; epochs 1-2 are not retrained


def test_n_workers_run_n_trials_at_once():
    curve = FunctionCurve(lambda config, epoch: (0.5, 1.0))

    def makespan(workers: int) -> float:
        algorithm = FullBudgetSearch(SPACE, metric="value", max_budget=3, max_trials=4)
        return simulate(algorithm, workers, curve).makespan_s

    one_trial = 3.0
    assert makespan(4) == one_trial
    assert makespan(2) == 2 * one_trial
    assert makespan(1) == 4 * one_trial


def _event_log(seed: int, straggler_p: float = 0.2) -> list[tuple]:
    """Every event of a Tuner run, through a wrapper that records them."""
    log: list[tuple] = []

    class Recording(SimulatedExecutor):
        def poll(self, timeout_s=None):
            events = super().poll(timeout_s)
            log.extend(
                (e.at, e.kind, e.trial_id, e.worker, e.epoch, e.metrics.get("acc")) for e in events
            )
            return events

    algorithm = FullBudgetSearch(SPACE, metric="acc", max_budget=4, max_trials=60, seed=seed)
    executor = Recording(
        7, SyntheticCurve(seed=seed), load_s=0.3, seed=seed, straggler_p=straggler_p, metric="acc"
    )
    Tuner(algorithm, executor, None, "sim", REF, checkpoint_dir=Path("/nonexistent")).run()
    return log


def test_the_virtual_clock_is_monotonic_and_deterministic_for_a_seed():
    log = _event_log(seed=1)
    times = [entry[0] for entry in log]
    assert times == sorted(times) and times[-1] > 0
    assert len(log) == 60 * (1 + 4 + 1)
    assert _event_log(seed=1) == log
    assert _event_log(seed=2) != log


def test_stragglers_slow_epochs_down():
    plain = [e for e in _event_log(seed=1, straggler_p=0.0) if e[1] == "report"]
    slow = [e for e in _event_log(seed=1, straggler_p=0.5) if e[1] == "report"]
    assert max(e[0] for e in slow) > max(e[0] for e in plain)
    assert sorted(e[5] for e in slow) == sorted(e[5] for e in plain)  # same values, later


def test_full_budget_search_through_the_tuner_without_a_store_finishes_every_trial():
    algorithm = FullBudgetSearch(SPACE, metric="acc", max_budget=5, max_trials=200)
    executor = SimulatedExecutor(16, SyntheticCurve(), metric="acc")
    tuner = Tuner(algorithm, executor, None, "sim", REF, checkpoint_dir=Path("/nonexistent"))
    status = tuner.run()
    assert status.counts["completed"] == 200 and status.counts["running"] == 0
    assert all(t.state == "completed" and t.budget == 5 for t in tuner.trials.values())
    assert status.elapsed_s == executor.now() > 0
    assert executor.idle_workers == 16


class PauseThenResume:
    """Every trial pauses after one epoch; once all have, each is resumed to `budget`."""

    metric, mode = "value", "max"

    def __init__(self, trials: int, budget: int):
        self.trials, self.budget = trials, budget
        self.started, self.paused, self.resumed, self.done = 0, 0, 0, 0
        self.reports: dict[int, list[tuple[int, float]]] = {}

    def suggest(self) -> Suggestion | None:
        if self.started < self.trials:
            self.started += 1
            return Suggestion(self.started - 1, {"i": self.started - 1}, self.budget)
        if self.paused == self.trials and self.resumed < self.trials:
            self.resumed += 1
            return Suggestion(self.resumed - 1, {"i": self.resumed - 1}, self.budget, resume=True)
        return None

    def report(self, trial_id: int, budget: int, value: float) -> Decision:
        self.reports.setdefault(trial_id, []).append((budget, value))
        if budget == 1:
            self.paused += 1
            return Decision.PAUSE
        return Decision.CONTINUE

    def complete(self, trial_id: int) -> None:
        self.done += 1

    def fail(self, trial_id: int) -> None:
        raise AssertionError(trial_id)

    def is_finished(self) -> bool:
        return self.done == self.trials


def test_paused_trials_resume_through_the_tuner_where_they_stopped():
    curve = FunctionCurve(lambda config, epoch: (config["i"] + epoch / 10, 1.0))
    algorithm = PauseThenResume(trials=6, budget=4)
    result = simulate(algorithm, 3, curve, load_s=0.5)
    assert result.counts["completed"] == 6
    for i in range(6):
        assert algorithm.reports[i] == [(e, pytest.approx(i + e / 10)) for e in (1, 2, 3, 4)]
    # two waves of 3 x (load + 1 epoch), then two waves of 3 x (load + 3 epochs)
    assert result.makespan_s == pytest.approx(2 * 1.5 + 2 * 3.5)
    # the first wave of resumed trials finishes at the maximum budget first
    assert result.first_completed_s == pytest.approx(2 * 1.5 + 3.5)


def test_simulate_measures_time_to_target_and_keeps_a_best_so_far_trace():
    algorithm = FullBudgetSearch(SPACE, metric="acc", max_budget=10, max_trials=2000, seed=3)
    result = simulate(algorithm, 50, SyntheticCurve(seed=3), target=0.85)
    assert result.time_to_target_s is not None
    assert 0 < result.time_to_target_s <= result.makespan_s
    assert result.stop_reason and "target" in result.stop_reason
    assert result.trials < 2000 and result.best_value >= 0.85
    times = [at for at, _ in result.trace]
    values = [v for _, v in result.trace]
    assert times == sorted(times) and values == sorted(values)
    assert result.trace[-1][1] == result.best_value


def test_simulate_stops_at_the_time_budget_and_respects_mode_min():
    algorithm = FullBudgetSearch(SPACE, metric="loss", mode="min", max_budget=10, max_trials=None)
    result = simulate(algorithm, 20, SyntheticCurve(mode="min"), max_time_s=100.0)
    assert result.stop_reason and "time budget" in result.stop_reason
    assert 100.0 <= result.makespan_s < 130.0  # running trials are wound down after the budget
    values = [v for _, v in result.trace]
    assert values == sorted(values, reverse=True)
    assert result.time_to_target_s is None
    with pytest.raises(ValueError, match="mode"):
        simulate(algorithm, 2, SyntheticCurve(mode="max"))


def test_synthetic_curves_are_deterministic_realistic_and_cross():
    curve, configs = SyntheticCurve(seed=0), [{"id": i, "lr": 0.1} for i in range(2000)]
    # independent of call order, of the dict's key order and of a fresh instance
    forward = [curve(c, 5) for c in configs[:50]]
    backward = [curve(c, 5) for c in reversed(configs[:50])][::-1]
    assert forward == backward
    assert SyntheticCurve(seed=0)({"lr": 0.1, "id": 3}, 5) == forward[3]
    assert SyntheticCurve(seed=1)(configs[3], 5) != forward[3]

    final = [curve(c, 100)[0] for c in configs]
    assert all(0.0 <= v <= 1.0 for v in final)
    assert statistics.median(final) < 0.5  # most configurations are mediocre...
    assert 0.005 < sum(v > 0.85 for v in final) / len(final) < 0.1  # ...and a few are good
    seconds = [curve(c, 1)[1] for c in configs]
    assert statistics.median(seconds) == pytest.approx(1.0, rel=0.2)
    assert max(seconds) > 3 * min(seconds)
    # crossing: the best after 1 epoch is not the best after 100 epochs, and some late bloomers
    # that sit in the bottom half after one epoch end in the top 5 %
    early = [curve(c, 1)[0] for c in configs]
    assert max(range(2000), key=early.__getitem__) != max(range(2000), key=final.__getitem__)
    top = sorted(final)[int(0.95 * len(final))]
    median_early = statistics.median(early)
    assert any(f >= top and e < median_early for e, f in zip(early, final, strict=True))
    # the mean curve rises
    assert statistics.mean(curve(c, 1)[0] for c in configs) < statistics.mean(final)
    loss = SyntheticCurve(seed=0, mode="min")
    assert loss(configs[0], 7)[0] == pytest.approx(1.0 - curve(configs[0], 7)[0])


def test_scale_500_workers_20000_trials():
    algorithm = FullBudgetSearch(SPACE, metric="acc", max_budget=1, max_trials=20_000)
    started = time.perf_counter()
    result = simulate(algorithm, 500, SyntheticCurve())
    real_s = time.perf_counter() - started
    assert result.trials == 20_000 and result.counts == {"completed": 20_000}
    print(f"\n20,000 trials on 500 workers: {real_s:.2f} s real, {result.makespan_s:.1f} s virtual")


def _reference_curve(seed: int, config: dict[str, float], epoch: int) -> tuple[float, float]:
    """SyntheticCurve's defaults written out plainly (no caches, nothing inlined)."""
    names = sorted(config)
    data = b"%d|%s|" % (seed, "|".join(names).encode())
    data += struct.pack(f"<{len(names)}d", *(config[n] for n in names))
    words = struct.unpack("<6Q", hashlib.blake2b(data, digest_size=48).digest())
    u = [((w >> 12) + 0.5) / 2.0**52 for w in words]
    normal = NormalDist().inv_cdf
    chance, best = 0.1, 0.95
    if u[0] < 0.05:
        a_inf = a0 = chance
    else:
        a_inf = chance + (best - chance) * u[1] ** 2.5
        a0 = chance + (a_inf - chance) * 0.9 * u[3] ** 1.5
    z_quality = normal(u[1])
    k = math.exp(math.log(0.5) + 0.8 * (-0.4 * z_quality + math.sqrt(1 - 0.4 * 0.4) * normal(u[2])))
    seconds = math.exp(0.5 * (0.3 * z_quality + math.sqrt(1.0 - 0.3 * 0.3) * normal(u[4])))
    h = _splitmix64(words[5] ^ epoch)
    s = ((h & 0x1FFFFF) + ((h >> 21) & 0x1FFFFF) + ((h >> 42) & 0x1FFFFF)) / 2097152.0
    value = min(max(a_inf - (a_inf - a0) * epoch**-k + 0.005 * 2.0 * (s - 1.5), 0.0), 1.0)
    spread = ((h * 0x9E3779B97F4A7C15) >> 48) & 0xFFFF
    return value, seconds * (1.0 + 0.1 * (spread / 65536.0 - 0.5))


@pytest.mark.parametrize("seed", [0, 7])
def test_synthetic_curve_values_are_exactly_the_formula(seed):
    curve, configs = SyntheticCurve(seed=seed), [{"lr": 1e-4 * 1.3**i, "x": i} for i in range(300)]
    for epoch in (1, 2, 5, 81, 1000):
        for config in configs:
            assert curve(config, epoch) == _reference_curve(seed, config, epoch)
    single = {"lr": 0.3}
    assert curve(single, 3) == _reference_curve(seed, single, 3)


def test_events_due_at_the_same_time_come_in_the_order_they_were_scheduled():
    ex = SimulatedExecutor(3, FunctionCurve(lambda config, epoch: (0.5, 2.0)))
    for trial in (5, 3, 9):
        ex.submit(TrialTask(trial, {}, REF, seed=0))
    assert [e.trial_id for e in ex.poll()] == [5, 3, 9]  # loaded
    reports = ex.poll()
    assert [(e.kind, e.trial_id, e.at) for e in reports] == [("report", t, 2.0) for t in (5, 3, 9)]
    for trial in (9, 5, 3):
        ex.command(trial, CONTINUE)
    assert [e.trial_id for e in ex.poll()] == [9, 5, 3]
    assert ex.pending_events == 0
