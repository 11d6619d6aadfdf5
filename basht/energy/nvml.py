"""GPU energy from NVIDIA's NVML: the total-energy counter on Volta and newer, power sampling before."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from basht.energy.base import EnergyUnavailable, Reading

log = logging.getLogger(__name__)

_VOLTA = 5  # NVML_DEVICE_ARCH_VOLTA


class NvmlSource:
    """One component per GPU (`gpu:0`, `gpu:1`, ...).

    On Volta and newer the cumulative counter (mJ) is read; older GPUs have only a power reading,
    which is integrated with the trapezoid rule between reads. A window shorter than the counter's
    update period would read 0 J, so very short windows fall back to power × time.
    """

    name = "nvml"

    def __init__(self, indices: list[int] | None = None):
        try:
            import pynvml
        except ImportError:
            raise EnergyUnavailable("NVML: nvidia-ml-py is not installed (extra `gpu`)") from None
        try:
            pynvml.nvmlInit()
        except Exception as err:  # pynvml raises its own NVMLError subclasses
            raise EnergyUnavailable(f"NVML: cannot initialise ({err}); no NVIDIA driver?") from None
        self._nvml = pynvml
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            raise EnergyUnavailable("NVML: no GPU found")
        self.indices = indices if indices is not None else list(range(count))
        self._handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices}
        self._counter: dict[int, bool] = {}
        self._start_mj: dict[int, float] = {}
        self._energy: dict[int, float] = {i: 0.0 for i in self.indices}
        self._last_power_w: dict[int, float] = {}
        self._last_mj: dict[int, float] = {}
        self._advanced_at: dict[int, float] = {}
        self._at = time.time()
        for i, handle in self._handles.items():
            self._counter[i] = self._supports_counter(handle)
            if self._counter[i]:
                self._start_mj[i] = float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
                self._last_mj[i], self._advanced_at[i] = self._start_mj[i], self._at
            else:
                self._last_power_w[i] = self._power_w(handle)

    def _supports_counter(self, handle: Any) -> bool:
        try:
            if self._nvml.nvmlDeviceGetArchitecture(handle) < _VOLTA:
                return False
            self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            return True
        except Exception:
            return False

    def _power_w(self, handle: Any) -> float:
        return self._nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0

    def read(self) -> Reading:
        now = time.time()
        dt = now - self._at
        for i, handle in self._handles.items():
            if self._counter[i]:
                self._energy[i] = self._counter_energy(i, handle, now)
            else:
                power = self._power_w(handle)
                self._energy[i] += (power + self._last_power_w[i]) / 2 * dt
                self._last_power_w[i] = power
        self._at = now
        return Reading(now, {f"gpu:{i}": e for i, e in self._energy.items()})

    def _counter_energy(self, i: int, handle: Any, now: float) -> float:
        """The counter's joules; between its updates (every 100 ms or so) a provisional
        power × time since the last update, so a short window does not read 0 J. The counter is
        the truth again at its next update; the total never goes backwards."""
        total_mj = float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        counted = (total_mj - self._start_mj[i]) / 1000.0
        if total_mj != self._last_mj.get(i):
            self._last_mj[i], self._advanced_at[i] = total_mj, now
            return max(self._energy[i], counted)
        provisional = counted + self._power_w(handle) * (now - self._advanced_at[i])
        return max(self._energy[i], provisional)

    def max_interval_s(self) -> float | None:
        # Power integration needs frequent samples; counters do not.
        return None if all(self._counter.values()) else 0.1

    def describe(self) -> str:
        kinds = ["counter" if self._counter[i] else "power sampling" for i in self.indices]
        return "NVML: " + ", ".join(
            f"gpu:{i} ({k})" for i, k in zip(self.indices, kinds, strict=True)
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):  # shutting down a driver that is already gone
            self._nvml.nvmlShutdown()
