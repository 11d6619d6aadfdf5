"""Our client on a job that optimizes the power limit, with a fake NVML whose limit slows the fake
training down: the first run profiles the limits step by step and trains on at the cheapest, a
run of the same batch size gets that limit at once, and the limits found are put back. The server's
application runs in this process."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import pytest

from basht.bso import BatchSizeOptimizer, JobSpec
from basht.bso.http import BSOClient
from basht.bso.power import PowerLimitError
from tests.bso.test_power import fake_nvml, sets
from tests.bso.test_server import state

SLOWDOWN = {250: 1.0, 225: 1.01, 200: 1.03, 175: 1.06, 150: 1.10, 125: 1.25, 100: 1.5}
# One step costs slowdown × (0.5 × limit + 0.5 × 250): least at 150 W (220 against 250 at 250 W).


@dataclass(frozen=True)
class Measured:
    time_s: float
    energy_j: float
    source: str
    by_component: dict[str, float]


@dataclass
class StepMonitor:
    """A GPU whose training step takes SLOWDOWN[limit] seconds at the fake NVML's limit."""

    nvml: object
    clock: tuple[float, float] = (0.0, 0.0)
    windows: dict[str, tuple[float, float]] = field(default_factory=dict)

    def step(self) -> None:
        limit = sets(self.nvml)[-1][1] // 1000
        t, e = self.clock
        self.clock = (t + SLOWDOWN[limit], e + SLOWDOWN[limit] * limit)

    def begin_window(self, key: str) -> None:
        self.windows[key] = self.clock

    def end_window(self, key: str) -> Measured:
        t0, e0 = self.windows.pop(key)
        t, e = self.clock
        return Measured(t - t0, e - e0, "nvml", {"gpu0": e - e0})


@pytest.fixture
def nvml(monkeypatch, inproc):
    module = fake_nvml(gpus=1)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.setattr(
        "basht.bso.client.BSOClient",
        lambda url, token=None, timeout_s=10.0: BSOClient(url, http=inproc),
    )
    return module


def spec(job_id: str) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        job_id_prefix=job_id.split("-")[0],
        batch_sizes=[16, 32, 64],
        default_batch_size=32,
        target_metric=0.9,
        max_epochs=5,
        optimize_power_limit=True,
    )


def client(job_id: str, monitor, **kwargs) -> BatchSizeOptimizer:
    return BatchSizeOptimizer(
        "http://testserver",
        spec(job_id),
        monitor=monitor,
        max_power_w=250.0,
        number_of_gpus=1,
        gpu_model="fake",
        warmup_steps=2,
        profile_steps=3,
        **kwargs,
    )


def test_the_first_run_profiles_then_trains_at_the_cheapest_limit(nvml, inproc):
    monitor = StepMonitor(nvml)
    bso = client("cp-1", monitor)
    assert bso.get_batch_size() == 32
    bso.on_train_begin()
    for _ in range(1 + 7 * (2 + 3) + 1 + 10):  # wait, warm-up and measure each limit, train on
        bso.on_step_begin()
        monitor.step()
    assert bso.power_limit_w == 150
    profiled = [mw // 1000 for _, mw in sets(nvml)[1:]]  # after opening's permission check
    assert profiled[:8] == [250, 250, 225, 200, 175, 150, 125, 100] and profiled[8] == 150
    # A second run of the same size (asked while the first runs) trains at 150 W from the start.
    other = client("cp-1", StepMonitor(nvml))
    assert other.get_batch_size() == 32 and other.power_limit_w == 150
    other.end()
    bso.on_evaluate(0.95)
    assert bso.converged is True
    bso.end()
    assert sets(nvml)[-1] == (0, 250_000)  # put back as found
    chosen = state(inproc, "cp-1")["power_limits"]
    assert [(p["batch_size"], p["power_limit"]) for p in chosen] == [(32, 150.0)]


def test_without_permission_auto_trains_at_the_current_limit(monkeypatch, nvml):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(gpus=1, permitted=False))
    bso = client("cp-2", StepMonitor(nvml))
    assert bso.power_limits is None
    assert bso.get_batch_size() == 32 and bso.power_limit_w is None
    bso.end()


def test_without_permission_an_explicit_nvml_fails_at_once(monkeypatch, nvml):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(gpus=1, permitted=False))
    with pytest.raises(PowerLimitError, match="needs root"):
        client("cp-3", StepMonitor(nvml), power_limit="nvml")
