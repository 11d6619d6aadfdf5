"""Live metrics scraped by a real Prometheus during a real `basht run`, read back by the collector."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry, Counter, start_http_server

from basht.bench import run_benchmark
from basht.experiment import Experiment
from basht.store import Store
from tests.prometheus_server import free_port, prometheus


def _wait_for(client, expr: str, timeout_s: float = 20.0):
    """The last value of each series: after the run its target is gone and its series are stale."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = client.query(f"last_over_time({expr}[10m])")
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"no series for {expr}")


def test_prometheus_scrapes_the_live_exporter_during_a_run(spec, tmp_path):
    port = free_port()
    # Long enough (about 8 s of trials) for many scrapes even on a loaded machine.
    spec["workload"]["params"] = {"epoch_s": 1.0}
    spec["search"].update(max_budget=3, max_trials=6)
    spec["measure"] = {"prometheus_port": port, "energy": "estimate", "carbon": {"g_per_kwh": 400}}
    with prometheus(tmp_path, [f"127.0.0.1:{port}"], interval_s=0.25) as client:
        result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
        assert result.status == "completed"
        energy = _wait_for(client, "basht_energy_joules_total")
        labels = {(s["component"], s["source"]) for s, _ in energy}
        assert labels == {("cpu", "estimate"), ("memory", "estimate")}
        assert all(v > 0 for _, v in energy)
        idle = {s["kind"] for s, _ in _wait_for(client, "basht_idle_energy_joules_total")}
        assert idle == {"baseline", "allocation", "overhead"}
        ((_, completed),) = _wait_for(client, 'basht_trials_total{state="completed"}')
        assert completed > 0
        assert _wait_for(client, "basht_trial_duration_seconds_count")
        ((_, grams),) = _wait_for(client, "basht_emissions_grams_total")
        assert grams > 0
        ((_, g),) = _wait_for(client, "basht_grid_carbon_intensity_grams_per_kilowatt_hour")
        assert g == 400
        assert _wait_for(client, "basht_cost_usd_total")
    # The collector read the same kind of numbers the store has.
    metrics = Store(spec["store"]).metrics(result.run_id)
    assert any(m.name == "energy_total" and m.value > 0 for m in metrics)


def test_energy_can_be_read_from_prometheus(spec, tmp_path):
    """`measure.energy: prometheus`: node energy from a counter series Prometheus scrapes."""
    registry = CollectorRegistry()
    counter = Counter("node_test_energy_joules", "a fake node meter", registry=registry)
    port = free_port()
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    stop = time.monotonic() + 120

    import threading

    def tick():
        while time.monotonic() < stop and not done.is_set():
            counter.inc(5.0)  # 50 W at 10 Hz
            time.sleep(0.1)

    done = threading.Event()
    threading.Thread(target=tick, daemon=True).start()
    try:
        with prometheus(tmp_path, [f"127.0.0.1:{port}"], interval_s=0.2) as client:
            _wait_for(client, "node_test_energy_joules_total")
            spec["workload"]["params"] = {"epoch_s": 0.3}
            spec["search"].update(max_budget=2, max_trials=4)
            spec["measure"] = {
                "energy": "prometheus",
                "prometheus_url": client.url,
                "prometheus_query": "sum(node_test_energy_joules_total)",
                "sample_interval_s": 0.2,
            }
            result = run_benchmark(Experiment.from_dict(spec), results_root=tmp_path / "results")
    finally:
        done.set()
        server.shutdown()
    metrics = {m.name: m for m in Store(spec["store"]).metrics(result.run_id)}
    assert metrics["energy_total"].source == "prometheus"
    jct_s = metrics["JCT"].value / 1000
    # About 50 W over the run, give or take the scrape interval at either end.
    assert metrics["energy_total"].value * 3.6e6 == pytest.approx(50 * jct_s, rel=0.5)


def test_an_unmeasured_trial_adds_no_energy_series():
    from basht.energy import CombinedSource, EnergyMonitor
    from basht.report.exporter import _MonitorCollector
    from tests.energy.test_monitor import CountingSource

    monitor = EnergyMonitor(source=CombinedSource([CountingSource()]), slots=1)
    monitor.assign(0, None, 3)  # runs on another node
    monitor.close()
    families = {f.name: f for f in _MonitorCollector(monitor, 0.0, None, time.time()).collect()}
    components = {s.labels["component"] for s in families["basht_energy_joules"].samples}
    assert components == {"cpu"}
