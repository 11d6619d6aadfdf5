"""A labelled estimate of node energy from CPU utilisation, for machines without counters.

The model is Cloud Carbon Footprint's per-vCPU linear model with an idle floor, plus memory power
per GB (CCF's coefficient):

    P_cpu    = vcpus × (idle_w_per_vcpu + (max_w_per_vcpu − idle_w_per_vcpu) × u)
    P_memory = memory_gb × memory_w_per_gb

with u the node's CPU utilisation over each interval (from /proc/stat via psutil). Energy is the
model power integrated over the intervals between reads, so it is exact for the model whatever the
read rate. Every figure it produces is labelled `estimate`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from basht.energy.base import Reading

# Cloud Carbon Footprint, AWS_CLOUD_CONSTANTS (fleet averages over AWS microarchitectures):
# MIN_WATTS_AVG 0.74 W/vCPU, MAX_WATTS_AVG 3.5 W/vCPU; MEMORY_COEFFICIENT 0.000392 kWh/GB-hour,
# i.e. 0.392 W per GB. Read from the cloud-carbon-footprint source (packages/aws), 2023 snapshot.
IDLE_W_PER_VCPU = 0.74
MAX_W_PER_VCPU = 3.5
MEMORY_W_PER_GB = 0.392


@dataclass(frozen=True)
class EstimateModel:
    """The constants of the model; override them per machine (`measure.estimate` in the file)."""

    vcpus: int
    memory_gb: float
    idle_w_per_vcpu: float = IDLE_W_PER_VCPU
    max_w_per_vcpu: float = MAX_W_PER_VCPU
    memory_w_per_gb: float = MEMORY_W_PER_GB

    def cpu_power_w(self, utilization: float) -> float:
        u = min(max(utilization, 0.0), 1.0)
        return self.vcpus * (
            self.idle_w_per_vcpu + (self.max_w_per_vcpu - self.idle_w_per_vcpu) * u
        )

    def memory_power_w(self) -> float:
        return self.memory_gb * self.memory_w_per_gb

    @property
    def max_power_w(self) -> float:
        return self.cpu_power_w(1.0) + self.memory_power_w()


def busy_and_total_s() -> tuple[float, float]:
    """CPU seconds spent busy and in total, summed over all CPUs, since boot."""
    t = psutil.cpu_times()
    # Linux counts a virtual machine's time (guest, guest_nice) in user and nice too: summing
    # every field counted it twice, overstating the utilisation of a host that runs VMs.
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    idle = t.idle + getattr(t, "iowait", 0.0)
    return total - idle, total


class EstimateSource:
    """Integrates the model's power over time; components `cpu` and `memory`."""

    name = "estimate"

    def __init__(self, model: EstimateModel | None = None, memory_gb: float | None = None):
        if model is None:
            total_gb = psutil.virtual_memory().total / 2**30
            model = EstimateModel(vcpus=os.cpu_count() or 1, memory_gb=memory_gb or total_gb)
        self.model = model
        self._busy, self._total = busy_and_total_s()
        self._at = time.time()
        self._energy = {"cpu": 0.0, "memory": 0.0}
        self.last_utilization = 0.0

    def read(self) -> Reading:
        now = time.time()
        busy, total = busy_and_total_s()
        d_total = total - self._total
        u = (busy - self._busy) / d_total if d_total > 0 else self.last_utilization
        dt = max(0.0, now - self._at)
        self._energy["cpu"] += self.model.cpu_power_w(u) * dt
        self._energy["memory"] += self.model.memory_power_w() * dt
        self._busy, self._total, self._at = busy, total, now
        self.last_utilization = min(max(u, 0.0), 1.0)
        return Reading(now, dict(self._energy))

    def max_interval_s(self) -> float | None:
        return None

    def describe(self) -> str:
        m = self.model
        return (
            f"estimate: {m.vcpus} vCPU × ({m.idle_w_per_vcpu:g} W idle .. {m.max_w_per_vcpu:g} W busy) "
            f"+ {m.memory_gb:.1f} GB × {m.memory_w_per_gb:g} W/GB (Cloud Carbon Footprint constants)"
        )

    def close(self) -> None:
        pass
