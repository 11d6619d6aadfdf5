"""What the client tells the server about its machine: max power (W), device count and model.

The server prices time at `max_power` (cost = eta·energy + (1 − eta)·max_power·time), so it must
describe the devices whose energy is measured:

* NVIDIA GPUs (NVML): the upper power-management limit of GPU 0 × the number of GPUs, exactly as
  Zeus's client computes it (mW // 1000 × n). GPUs must be all the same model, as in Zeus.
* No GPU: the CPU node counts as one device, named "cpu: <model> (no GPU)". Its max power is the
  RAPL package limit where the kernel exposes one, else the `estimate` model's full-load power
  (Cloud Carbon Footprint coefficients, see `basht.energy.estimate`), labelled as an estimate.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from basht.bso.errors import BSOError

log = logging.getLogger(__name__)

POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True)
class Hardware:
    """The GpuConfig fields of a registration, and where the max power came from."""

    max_power_w: float
    number_of_gpus: int
    gpu_model: str
    max_power_source: str  # "nvml power limit" | "rapl package limit" | "estimate" | "given"
    has_gpu: bool = False  # NVML sees NVIDIA GPUs here (whatever max power was given)


def detect() -> Hardware:
    """NVIDIA GPUs when NVML sees any, otherwise the CPU node."""
    return _nvidia() or _cpu_node()


def _nvidia() -> Hardware | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # pynvml.NVMLError: no driver, no device
        return None
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            return None
        visible = visible_indices(count)
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in visible]
        names = {_name(pynvml.nvmlDeviceGetName(h)) for h in handles}
        if len(names) != 1:
            raise BSOError(f"the batch size optimizer needs identical GPUs, found {sorted(names)}")
        limit_mw = pynvml.nvmlDeviceGetPowerManagementLimitConstraints(handles[0])[1]
        return Hardware(
            max_power_w=float(limit_mw // 1000 * len(handles)),
            number_of_gpus=len(handles),
            gpu_model=names.pop(),
            max_power_source="nvml power limit",
            has_gpu=True,
        )
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def visible_indices(count: int) -> list[int]:
    """CUDA_VISIBLE_DEVICES as NVML indices (integers only; MIG and UUIDs are not supported)."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return list(range(count))
    try:
        indices = [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        raise BSOError(
            f"CUDA_VISIBLE_DEVICES={raw!r}: only GPU indices are supported (no UUIDs or MIG); "
            "pass max_power_w, number_of_gpus and gpu_model yourself"
        ) from None
    if not indices or any(not 0 <= i < count for i in indices):
        raise BSOError(f"CUDA_VISIBLE_DEVICES={raw!r}: not GPUs of this machine (0..{count - 1})")
    return indices


def _name(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _cpu_node() -> Hardware:
    model = _cpu_model()
    rapl = _rapl_package_limit_w()
    if rapl is not None:
        return Hardware(rapl, 1, f"cpu: {model} (no GPU)", "rapl package limit")
    import psutil

    from basht.energy import EstimateModel

    estimate = EstimateModel(
        vcpus=os.cpu_count() or 1, memory_gb=psutil.virtual_memory().total / 2**30
    )
    log.info(
        "no GPU and no RAPL limit: max power is the estimate model's %.0f W", estimate.max_power_w
    )
    return Hardware(estimate.max_power_w, 1, f"cpu: {model} (no GPU)", "estimate")


def _rapl_package_limit_w() -> float | None:
    """Sum of the packages' long-term power limits (constraint_0), if readable."""
    total = 0.0
    for zone in sorted(POWERCAP.glob("intel-rapl:[0-9]*")):
        if zone.name.count(":") != 1:
            continue  # a subzone (core, dram)
        try:
            total += int((zone / "constraint_0_max_power_uw").read_text()) / 1e6
        except (OSError, ValueError):
            return None
    return total or None


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine() or "unknown"
