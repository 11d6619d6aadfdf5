"""Choose the power sources for a run: the best available on `auto`, exactly what was asked otherwise."""

from __future__ import annotations

import logging
import time

from basht.energy.base import EnergySource, EnergyUnavailable, Reading
from basht.energy.estimate import EstimateModel, EstimateSource
from basht.energy.nvml import NvmlSource
from basht.energy.prometheus import DEFAULT_QUERY, PrometheusSource
from basht.energy.rapl import RaplSource
from basht.errors import BashtError

log = logging.getLogger(__name__)


class CombinedSource:
    """Several sources read together; each component keeps the label of the source it came from."""

    def __init__(self, sources: list[EnergySource]):
        self.sources = sources
        self.name = "+".join(s.name for s in sources)
        self.component_sources: dict[str, str] = {}
        for s in sources:
            for component in s.read().energy_j:
                self.component_sources[component] = s.name

    def read(self) -> Reading:
        energy: dict[str, float] = {}
        for s in self.sources:
            energy.update(s.read().energy_j)
        return Reading(time.time(), energy)

    def max_interval_s(self) -> float | None:
        limits = [m for s in self.sources if (m := s.max_interval_s()) is not None]
        return min(limits) if limits else None

    def describe(self) -> str:
        return "; ".join(s.describe() for s in self.sources)

    def close(self) -> None:
        for s in self.sources:
            s.close()


def open_sources(
    kind: str = "auto",
    *,
    accelerator: str = "cpu",
    estimate: EstimateModel | None = None,
    memory_gb: float | None = None,
    prometheus_url: str | None = None,
    prometheus_query: str | None = None,
) -> CombinedSource:
    """`auto` takes RAPL, else the estimate, plus NVML on GPU runs when it works; a named source
    that is not available is an error, because the user asked for measured numbers from it."""
    if kind == "estimate":
        return CombinedSource([EstimateSource(estimate, memory_gb)])
    if kind == "prometheus":
        if not prometheus_url:
            raise BashtError("measure.energy: prometheus needs measure.prometheus_url")
        return _named(lambda: PrometheusSource(prometheus_url, prometheus_query or DEFAULT_QUERY))
    if kind == "rapl":
        return _named(RaplSource)
    if kind == "nvml":
        return _named(NvmlSource)
    cpu: EnergySource
    try:
        cpu = RaplSource()
    except EnergyUnavailable as reason:
        log.info("%s; using the estimate", reason)
        cpu = EstimateSource(estimate, memory_gb)
    sources: list[EnergySource] = [cpu]
    if accelerator == "gpu":
        try:
            sources.append(NvmlSource())
        except EnergyUnavailable as reason:
            log.warning("%s; GPU energy is not measured", reason)
    return CombinedSource(sources)


def _named(make) -> CombinedSource:
    try:
        return CombinedSource([make()])
    except EnergyUnavailable as reason:
        raise BashtError(f"measure.energy: {reason}") from None
