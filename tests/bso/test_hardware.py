"""What a client registers about its machine: GPUs when NVML sees them, else the CPU node."""

from __future__ import annotations

import pytest

from basht.bso import hardware
from basht.bso.errors import BSOError


def test_without_a_gpu_the_cpu_node_is_one_labelled_device(monkeypatch):
    monkeypatch.setattr(hardware, "_nvidia", lambda: None)
    found = hardware.detect()
    assert found.number_of_gpus == 1 and found.gpu_model.startswith("cpu: ")
    assert found.gpu_model.endswith("(no GPU)")
    assert found.max_power_w > 0
    assert found.max_power_source in ("rapl package limit", "estimate")
    assert not found.has_gpu


def test_rapl_package_limits_are_summed(monkeypatch, tmp_path):
    for package, watts in (("intel-rapl:0", 125), ("intel-rapl:1", 125)):
        (tmp_path / package).mkdir()
        (tmp_path / package / "constraint_0_max_power_uw").write_text(f"{watts * 10**6}\n")
    (tmp_path / "intel-rapl:0:0").mkdir()  # a subzone (dram) is not a package
    monkeypatch.setattr(hardware, "POWERCAP", tmp_path)
    monkeypatch.setattr(hardware, "_nvidia", lambda: None)
    found = hardware.detect()
    assert (found.max_power_w, found.max_power_source) == (250.0, "rapl package limit")


@pytest.mark.parametrize(("value", "expected"), [("0,2", [0, 2]), ("1", [1])])
def test_visible_gpus_follow_cuda_visible_devices(monkeypatch, value, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert hardware.visible_indices(4) == expected


@pytest.mark.parametrize("value", ["GPU-3b2c", "MIG-1", "7", ""])
def test_unusable_cuda_visible_devices_are_refused(monkeypatch, value):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    with pytest.raises(BSOError, match="CUDA_VISIBLE_DEVICES"):
        hardware.visible_indices(4)
