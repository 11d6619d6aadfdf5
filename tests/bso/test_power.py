"""GPU power limits through NVML, on a fake `pynvml` that records every call: the candidates, the
limit set on every GPU, the limits put back, and what happens without permission or NVML."""

from __future__ import annotations

import logging
import sys
import types

import pytest

from basht.bso.power import NvmlPowerLimits, PowerLimitError, open_power_limits


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_nvml(gpus: int = 2, permitted: bool = True, limit_mw: int = 250_000) -> types.ModuleType:
    """A pynvml whose GPUs support 100-250 W; `calls` records what was asked of it."""
    nvml = types.ModuleType("pynvml")
    nvml.calls = []  # type: ignore[attr-defined]
    nvml.NVMLError = NVMLError  # type: ignore[attr-defined]
    limits = dict.fromkeys(range(gpus), limit_mw)

    def record(name, result=None):
        def call(*args):
            nvml.calls.append((name, *args))  # type: ignore[attr-defined]
            return result(*args) if callable(result) else result

        return call

    def set_limit(handle, mw):
        if not permitted:
            raise NVMLError(4)  # NVML_ERROR_NO_PERMISSION
        limits[handle] = mw

    nvml.nvmlInit = record("init")  # type: ignore[attr-defined]
    nvml.nvmlShutdown = record("shutdown")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = record("count", gpus)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = record("handle", lambda i: i)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetName = record("name", "Fake GPU")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetPowerManagementLimitConstraints = record(  # type: ignore[attr-defined]
        "constraints", (100_000, 250_000)
    )
    nvml.nvmlDeviceGetPowerManagementLimit = record("limit", lambda h: limits[h])  # type: ignore[attr-defined]
    nvml.nvmlDeviceSetPowerManagementLimit = record("set", set_limit)  # type: ignore[attr-defined]
    return nvml


def sets(nvml) -> list[tuple[int, int]]:
    return [(h, mw) for name, *args in nvml.calls if name == "set" for h, mw in [args]]


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    module = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def test_candidates_are_zeus_s_25_watt_steps_from_the_top(nvml):
    limits = NvmlPowerLimits()
    assert limits.candidates_w() == [250.0, 225.0, 200.0, 175.0, 150.0, 125.0, 100.0]
    limits.restore()


def test_a_limit_is_set_on_every_gpu_and_the_old_one_put_back(nvml):
    limits = NvmlPowerLimits()
    assert sets(nvml) == [(0, 250_000), (1, 250_000)]  # the permission check: the same limit
    limits.set_w(150)
    limits.set_w(90)  # below the range: clipped
    assert sets(nvml)[2:] == [(0, 150_000), (1, 150_000), (0, 100_000), (1, 100_000)]
    limits.restore()
    limits.restore()  # twice is harmless
    assert sets(nvml)[-2:] == [(0, 250_000), (1, 250_000)]
    assert [c[0] for c in nvml.calls].count("shutdown") == 1


def test_only_the_visible_gpus_are_touched(nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    limits = NvmlPowerLimits()
    limits.set_w(200)
    limits.restore()
    assert {h for h, _ in sets(nvml)} == {1}


def test_without_permission_auto_degrades_with_a_warning(monkeypatch, caplog):
    nvml = fake_nvml(permitted=False)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with caplog.at_level(logging.WARNING, logger="basht.bso.power"):
        assert open_power_limits("auto") is None
    assert "needs root" in caplog.text and "current limit" in caplog.text
    assert [c[0] for c in nvml.calls][-1] == "shutdown"  # NVML is released


def test_without_permission_an_explicit_nvml_fails_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(permitted=False))
    with pytest.raises(PowerLimitError, match="needs root"):
        open_power_limits("nvml")


def test_without_nvml_auto_degrades_and_nvml_fails(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with caplog.at_level(logging.WARNING, logger="basht.bso.power"):
        assert open_power_limits("auto") is None
    assert "nvidia-ml-py" in caplog.text
    with pytest.raises(PowerLimitError, match="nvidia-ml-py"):
        open_power_limits("nvml")


def test_off_never_touches_nvml(monkeypatch):
    nvml = fake_nvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert open_power_limits("off") is None
    assert nvml.calls == []
