"""NVML through a stand-in driver module: counters on Volta+, power integration before, short windows."""

from __future__ import annotations

import sys
import types

import pytest

from basht.energy import NvmlSource
from basht.energy import nvml as nvml_module
from tests.tools import requires_tool


class FakeDriver(types.ModuleType):
    """pynvml's calls used by NvmlSource, over two GPUs: one Volta (counter), one Pascal."""

    def __init__(self):
        super().__init__("pynvml")
        self.counter_mj = 1_000_000.0
        self.power_mw = {0: 200_000.0, 1: 100_000.0}
        self.arch = {0: 5, 1: 4}

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetArchitecture(self, h):
        return self.arch[h]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if self.arch[h] < 5:
            raise RuntimeError("NotSupported")
        return self.counter_mj

    def nvmlDeviceGetPowerUsage(self, h):
        return self.power_mw[h]


@pytest.fixture
def driver(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    clock = {"t": 1000.0}
    monkeypatch.setattr(nvml_module.time, "time", lambda: clock["t"])
    return fake, clock


def test_volta_reads_the_counter_and_pascal_integrates_power(driver):
    fake, clock = driver
    source = NvmlSource()
    assert "gpu:0 (counter)" in source.describe() and "gpu:1 (power sampling)" in source.describe()
    clock["t"] += 2.0
    fake.counter_mj += 500_000  # 500 J on the Volta
    fake.power_mw[1] = 300_000.0  # the Pascal went from 100 W to 300 W
    reading = source.read()
    assert reading.energy_j["gpu:0"] == pytest.approx(500.0)
    assert reading.energy_j["gpu:1"] == pytest.approx((100 + 300) / 2 * 2.0)  # trapezoid
    assert source.max_interval_s() == 0.1  # power sampling needs frequent reads


def test_a_window_shorter_than_the_counter_update_is_not_zero(driver):
    fake, clock = driver
    source = NvmlSource(indices=[0])
    clock["t"] += 0.05  # the counter has not moved yet
    assert source.read().energy_j["gpu:0"] == pytest.approx(200 * 0.05)
    clock["t"] += 0.05
    fake.counter_mj += 15_000  # it updates: 15 J, the truth
    assert source.read().energy_j["gpu:0"] == pytest.approx(15.0)
    clock["t"] += 0.01
    # Provisional again, never below what was already reported.
    assert source.read().energy_j["gpu:0"] == pytest.approx(15.0 + 200 * 0.01)


def test_no_driver_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    from basht.energy import EnergyUnavailable

    with pytest.raises(EnergyUnavailable, match="nvidia-ml-py"):
        NvmlSource()


@requires_tool("cuda")  # and its NVML driver
def test_a_real_gpu_draws_more_under_load_than_idle():
    import time

    import torch

    source = NvmlSource()
    try:
        first = source.read()
        time.sleep(1.0)
        idle = source.read()
        x = torch.randn(4096, 4096, device="cuda:0")
        start = time.time()
        while time.time() - start < 2.0:
            x @ x
        torch.cuda.synchronize()
        busy = source.read()
    finally:
        source.close()
    idle_w = (idle.energy_j["gpu:0"] - first.energy_j["gpu:0"]) / (idle.at - first.at)
    busy_w = (busy.energy_j["gpu:0"] - idle.energy_j["gpu:0"]) / (busy.at - idle.at)
    assert 0 < idle_w < busy_w
