"""Live Prometheus metrics of a run: energy, idle energy, emissions, cost, trials (base units).

Energy, emissions and cost are read from the energy monitor at scrape time, so the exported
counters are exactly the monitor's accounts; trial counts and durations are pushed by the engine.
No trial ids in labels: a label per trial would make an unbounded number of series.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from basht.energy.monitor import IDLE_KINDS, UNMEASURED

#: Where a run serves /metrics; preflight checks a fixed `measure.prometheus_port` on it.
HOST = "127.0.0.1"


class _MonitorCollector(Collector):
    def __init__(
        self,
        monitor: Any,
        usd_per_hour: float,
        intensity: Any,
        started: float,
        billed: Callable[[float], float | None] | None = None,
    ):
        self.monitor, self.usd_per_hour = monitor, usd_per_hour
        self.intensity, self.started, self.billed = intensity, started, billed

    def _cost(self, now: float) -> float:
        """The run's bill so far: its cluster's (`billed`), or one instance's time x price."""
        if self.billed is not None:
            try:
                bill = self.billed(now)
            except Exception:  # a scrape never fails over the store; the plain estimate stands
                bill = None
            if bill is not None:
                return bill
        return self.usd_per_hour * (now - self.started) / 3600

    def collect(self) -> Iterator[Any]:
        energy = CounterMetricFamily(
            "basht_energy_joules",
            "Node energy since the run started.",
            labels=["component", "source"],
        )
        idle = CounterMetricFamily(
            "basht_idle_energy_joules",
            "Energy no trial used: baseline (idle floor while busy), allocation (empty workers), "
            "overhead (the engine and the OS).",
            labels=["kind"],
        )
        emissions = CounterMetricFamily(
            "basht_emissions_grams", "CO2-equivalent emissions of the energy measured so far."
        )
        cost = CounterMetricFamily("basht_cost_usd", "Cost of the provisioned resources so far.")
        intensity = GaugeMetricFamily(
            "basht_grid_carbon_intensity_grams_per_kilowatt_hour",
            "Carbon intensity of the grid now.",
        )
        by_component: dict[str, float] = {}
        by_kind = dict.fromkeys(IDLE_KINDS, 0.0)
        grams = 0.0
        for (kind, _trial, component), account in self.monitor.all_accounts().items():
            if component == UNMEASURED:
                continue  # a marker of 0 J, not a component of any node
            by_component[component] = by_component.get(component, 0.0) + account.energy_j
            if kind in by_kind:
                by_kind[kind] += account.energy_j
            grams += account.emissions_g
        for component, joules in sorted(by_component.items()):
            energy.add_metric([component, self.monitor.source_of.get(component, "")], joules)
        for kind, joules in by_kind.items():
            idle.add_metric([kind], joules)
        emissions.add_metric([], grams)
        cost.add_metric([], self._cost(time.time()))
        intensity.add_metric([], self.intensity.g_per_kwh(time.time()) if self.intensity else 0.0)
        yield from (energy, idle, emissions, cost, intensity)


class LiveExporter:
    """Serves /metrics on `host:port` (HOST unless told otherwise; port 0 picks a free one)."""

    def __init__(
        self,
        monitor: Any,
        *,
        port: int,
        host: str = HOST,
        usd_per_hour: float = 0.0,
        intensity: Any = None,
        billed: Callable[[float], float | None] | None = None,
    ):
        """`billed(now)` is the run's bill so far where it has a cluster of several instances
        (None otherwise: `usd_per_hour` for the time since the exporter started)."""
        self.registry = CollectorRegistry()
        collector = _MonitorCollector(monitor, usd_per_hour, intensity, time.time(), billed)
        self.registry.register(collector)
        self.trials = Counter(
            "basht_trials",
            "Trials that ended, by the state they ended in.",
            ["state"],
            registry=self.registry,
        )
        self.durations = Histogram(
            "basht_trial_duration_seconds",
            "Time a trial held a worker, per run segment (a resumed trial adds a segment).",
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, float("inf")),
            registry=self.registry,
        )
        self.server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.host, self.port = host, self.server.server_port

    @property
    def url(self) -> str:
        """Where Prometheus scrapes this run (the port chosen, also when 0 was asked for)."""
        return f"http://{self.host}:{self.port}/metrics"

    def trial_ended(self, state: str, duration_s: float | None = None) -> None:
        self.trials.labels(state=state).inc()
        if duration_s is not None:
            self.durations.observe(duration_s)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
