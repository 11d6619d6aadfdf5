"""A run's power sources on one node, opened the same way by the driver and by every Ray node's meter."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from basht.energy.estimate import EstimateModel
from basht.energy.sources import CombinedSource, open_sources

if TYPE_CHECKING:  # the experiment schema imports the engine
    from basht.experiment import MeasureSpec, ResourcesSpec


def open_node_sources(
    measure: MeasureSpec, resources: ResourcesSpec, workers_here: int
) -> CombinedSource:
    """The sources `measure.energy` names, on this node; the estimate counts this node's vCPUs
    and the memory of the `workers_here` workers it holds (allocated memory, not the host's: on a
    shared or virtual host the host's RAM is not ours)."""
    estimate = EstimateModel(
        vcpus=os.cpu_count() or 1,
        memory_gb=workers_here * resources.memory_per_worker_mb / 1024,
        idle_w_per_vcpu=measure.estimate.idle_w_per_vcpu,
        max_w_per_vcpu=measure.estimate.max_w_per_vcpu,
        memory_w_per_gb=measure.estimate.memory_w_per_gb,
    )
    return open_sources(
        measure.energy,
        accelerator=resources.accelerator,
        estimate=estimate,
        prometheus_url=measure.prometheus_url,
        prometheus_query=measure.prometheus_query,
    )


def slot_devices(sources: CombinedSource, slots: int) -> list[str] | None:
    """The GPU component each worker slot uses: workers take the GPUs in turn (worker w on GPU
    w mod count), as the executors place them; None without GPU counters."""
    gpus = sorted(c for c in sources.component_sources if c.startswith("gpu:"))
    return [gpus[w % len(gpus)] for w in range(slots)] if gpus else None
