"""The power limit optimizer: the choice of a limit from a profile, the just-in-time profiler's walk
over the limits, the server's answers, and a generated trace whose best (batch size, power limit)
pair is known, replayed against the server's application in this process."""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from basht.bso.http import BSOClient
from basht.bso.jit import JitProfiler, LimitMeasurement, cheapest_limit
from basht.bso.simulate import simulate_server
from basht.bso.trace import TraceJob, TraceWorkload
from tests.bso.support import job_body
from tests.bso.test_server import next_trial, register, state

# -- the choice --------------------------------------------------------------------------------

PROFILE = [
    LimitMeasurement(250, time_s=1.0, energy_j=250.0),
    LimitMeasurement(200, time_s=1.1, energy_j=200.0),
    LimitMeasurement(150, time_s=1.5, energy_j=180.0),
]


def test_energy_only_picks_the_least_energy_and_time_only_the_fastest():
    assert cheapest_limit(PROFILE, eta_knob=1.0, max_power_w=250) == 150
    assert cheapest_limit(PROFILE, eta_knob=0.0, max_power_w=250) == 250
    # eta 0.9: 250 W costs 250, 200 W 207.5, 150 W 199.5 (per GPU-second at 250 W)
    assert cheapest_limit(PROFILE, eta_knob=0.9, max_power_w=250) == 150
    assert cheapest_limit(PROFILE, eta_knob=0.9, max_power_w=1000) == 200


def test_a_tie_goes_to_the_higher_limit():
    tie = [LimitMeasurement(100, 2.0, 100.0), LimitMeasurement(200, 1.0, 200.0)]
    assert cheapest_limit(tie, eta_knob=0.5, max_power_w=100) == 200


# -- the profiler ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    time_s: float
    energy_j: float
    source: str = "fake"
    by_component: dict[str, float] = field(default_factory=dict)


@dataclass
class FakeGpu:
    """Power limits and a monitor in one: a step takes 1 s and the limit's watts."""

    calls: list[str] = field(default_factory=list)
    limit_w: float = 300.0
    steps: dict[str, tuple[float, float]] = field(default_factory=dict)
    clock: tuple[float, float] = (0.0, 0.0)

    def candidates_w(self) -> list[float]:
        return [250.0, 200.0, 150.0]

    def set_w(self, limit_w: float) -> None:
        self.calls.append(f"set {limit_w:g}")
        self.limit_w = limit_w

    def restore(self) -> None:
        self.calls.append("restore")

    def step(self) -> None:
        t, e = self.clock
        self.clock = (t + 1.0, e + self.limit_w)

    def begin_window(self, key: str) -> None:
        self.calls.append("begin")
        self.steps[key] = self.clock

    def end_window(self, key: str) -> Measured:
        self.calls.append("end")
        t0, e0 = self.steps.pop(key)
        return Measured(self.clock[0] - t0, self.clock[1] - e0)


def profiler(gpu: FakeGpu, **steps: int) -> JitProfiler:
    return JitProfiler(gpu, gpu, lambda m: m.energy_j, gpu.candidates_w(), **steps)


def run_steps(gpu: FakeGpu, jit: JitProfiler, n: int) -> None:
    for _ in range(n):
        jit.on_step_begin()
        gpu.step()


def test_steps_walk_the_limits_from_the_top_warming_each_up_before_measuring():
    gpu = FakeGpu()
    jit = profiler(gpu, wait_steps=1, warmup_steps=2, profile_steps=3)
    run_steps(gpu, jit, 1 + 3 * (2 + 3))
    assert not jit.done  # the last measurement closes when the next step begins
    run_steps(gpu, jit, 1)
    assert jit.done
    assert jit.measurements == [
        LimitMeasurement(250, 3.0, 750.0),
        LimitMeasurement(200, 3.0, 600.0),
        LimitMeasurement(150, 3.0, 450.0),
    ]
    assert [c for c in gpu.calls if c.startswith("set")] == [
        "set 250",  # at once: the wait and warm-up run at the highest limit
        "set 250",
        "set 200",
        "set 150",
    ]
    assert gpu.calls.count("begin") == gpu.calls.count("end") == 3


def test_an_epoch_that_ends_mid_measurement_measures_that_limit_again():
    gpu = FakeGpu()
    jit = profiler(gpu, wait_steps=0, warmup_steps=1, profile_steps=4)
    run_steps(gpu, jit, 3)  # warm-up, then two of the four measured steps at 250 W
    jit.on_epoch_end(3.0, 750.0)  # evaluation follows: the window is dropped
    assert jit.measurements == [] and gpu.calls.count("end") == 1
    run_steps(gpu, jit, 1 + 4 + 1)
    assert jit.measurements == [LimitMeasurement(250, 4.0, 1000.0)]


def test_without_steps_each_epoch_measures_one_limit():
    gpu = FakeGpu()
    jit = profiler(gpu)
    for epoch_s in (10.0, 11.0, 13.0):
        assert not jit.done
        jit.on_epoch_end(epoch_s, epoch_s * gpu.limit_w)
    assert jit.done
    assert [m.power_limit_w for m in jit.measurements] == [250, 200, 150]
    assert jit.measurements[1] == LimitMeasurement(200, 11.0, 2200.0)


# -- the server --------------------------------------------------------------------------------


def test_a_zeus_job_sees_no_power_limit_anywhere(inproc):
    created = inproc.post("/jobs", json=job_body("plz-1"))
    assert "optimize_power_limit" not in created.json()
    assert set(next_trial(inproc, "plz-1")) == {"job_id", "batch_size", "trial_number"}
    assert state(inproc, "plz-1")["power_limits"] is None
    trial = next_trial(inproc, "plz-1")
    profile = {**trial, "measurements": [{"power_limit": 250, "time": 1, "energy": 250}]}
    refused = inproc.post("/power_profiles", json=profile)
    assert refused.status_code == 400 and "optimize_power_limit" in refused.json()["message"]


def test_the_first_run_profiles_and_later_runs_of_the_size_get_the_cheapest_limit(inproc):
    created = register(inproc, "pl-1", optimize_power_limit=True, eta_knob=0.9, max_power=250.0)
    assert created["optimize_power_limit"] is True
    first = next_trial(inproc, "pl-1")
    assert first["profile_power_limits"] is True and "power_limit" not in first
    measurements = [
        {"power_limit": m.power_limit_w, "time": m.time_s, "energy": m.energy_j} for m in PROFILE
    ]
    trial = {k: first[k] for k in ("job_id", "batch_size", "trial_number")}
    chosen = inproc.post("/power_profiles", json={**trial, "measurements": measurements})
    assert chosen.json() == {"job_id": "pl-1", "batch_size": 1024, "power_limit": 150.0}
    # While the probe runs, a second request gets the same size, now with its limit.
    again = next_trial(inproc, "pl-1")
    assert (again["batch_size"], again["power_limit"]) == (1024, 150.0)
    assert "profile_power_limits" not in again or again["profile_power_limits"] is False
    profiled = state(inproc, "pl-1")["power_limits"]
    assert [(p["batch_size"], p["power_limit"], len(p["profile"])) for p in profiled] == [
        (1024, 150.0, 3)
    ]


@pytest.mark.parametrize(
    "measurements",
    [
        [],
        [
            {"power_limit": 200, "time": 1, "energy": 1},
            {"power_limit": 200, "time": 2, "energy": 1},
        ],
        [{"power_limit": 200, "time": 0, "energy": 1}],
    ],
)
def test_bad_profiles_are_422s(inproc, measurements):
    register(inproc, "pl-2", optimize_power_limit=True)
    trial = next_trial(inproc, "pl-2")
    body = {**{k: trial[k] for k in ("job_id", "batch_size", "trial_number")}}
    response = inproc.post("/power_profiles", json={**body, "measurements": measurements})
    assert response.status_code == 422


# -- a generated trace with a known best pair --------------------------------------------------

SLOWDOWN = {250: 1.0, 200: 1.03, 150: 1.10, 100: 1.5}  # epoch time at a lower limit
EPOCH_S = {8: 12.0, 16: 8.0, 32: 7.5}
EPOCHS = {8: 4, 16: 4, 32: 6}  # to the target, every run
SYNTH = TraceWorkload("synth", "synth", "net", "sgd", 0.5, 10, 32, True)


def write_trace(folder: Path) -> None:
    with (folder / "summary_train.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["dataset", "network", "batch_size", "optimizer", "learning_rate", "run"]
            + [
                "target_metric",
                "target_epoch",
            ]
        )
        for size, epochs in EPOCHS.items():
            for run in range(4):
                w.writerow(["synth", "net", size, "sgd", 0.1, run, 0.5, epochs])
    with (folder / "summary_power_v100.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["dataset", "network", "batch_size", "optimizer", "power_limit"]
            + [
                "time_per_epoch",
                "average_power",
            ]
        )
        for size, epoch_s in EPOCH_S.items():
            for limit, slowdown in SLOWDOWN.items():
                w.writerow(["synth", "net", size, "sgd", limit, epoch_s * slowdown, limit])


def run_cost(size: int, limit: int, eta: float = 0.5, max_power: float = 250.0) -> float:
    """What one run costs, from the numbers written above (not from Basht's code)."""
    time_s = EPOCHS[size] * EPOCH_S[size] * SLOWDOWN[limit]
    return eta * time_s * limit + (1 - eta) * max_power * time_s


def test_the_job_settles_on_the_pair_of_least_cost(inproc, tmp_path):
    write_trace(tmp_path)
    trace = TraceJob(SYNTH, "v100", data=tmp_path)
    best = min(((s, pl) for s in EPOCHS for pl in SLOWDOWN), key=lambda k: run_cost(*k))
    assert best == (16, 150)  # the trace was made so; lower limits cost more time than energy
    client = BSOClient("http://testserver", http=inproc)
    with_pl = simulate_server(
        trace, client, 30, seed=1, job_id="trace-synth-v100-pl", power_limits=True
    )
    chosen = {
        p["batch_size"]: p["power_limit"]
        for p in state(inproc, "trace-synth-v100-pl")["power_limits"]
    }
    assert chosen == {size: min(SLOWDOWN, key=lambda pl: run_cost(size, pl)) for size in EPOCHS}
    last = Counter((r.batch_size, r.power_limit_w) for r in with_pl.runs[-10:])
    assert last.most_common(1)[0][0] == best
    without = simulate_server(trace, client, 30, seed=1, job_id="trace-synth-v100-max")
    assert with_pl.cost < without.cost
    assert all(r.power_limit_w is None for r in without.runs)


def test_a_profiling_epoch_costs_the_mean_of_the_limits(tmp_path):
    write_trace(tmp_path)
    trace = TraceJob(SYNTH, "v100", data=tmp_path)
    epoch = trace.profile_epoch(16)
    assert epoch.time_s == pytest.approx(8.0 * sum(SLOWDOWN.values()) / 4)
    assert epoch.energy_j == pytest.approx(sum(8.0 * s * pl for pl, s in SLOWDOWN.items()) / 4)
    shares = trace.profile(16)
    assert [limit for limit, _ in shares] == [250, 200, 150, 100]
    assert sum(e.time_s for _, e in shares) == pytest.approx(epoch.time_s)
