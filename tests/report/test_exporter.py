"""Live metrics scraped by a real Prometheus during a real `basht run`, read back by the collector."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest
from prometheus_client import CollectorRegistry, Counter, start_http_server

from basht.bench import run_benchmark
from basht.experiment import Experiment
from basht.store import Store
from tests.prometheus_server import free_port, prometheus
from tests.tools import requires_tool


def _wait_for(client, expr: str, timeout_s: float = 20.0):
    """The last value of each series: after the run its target is gone and its series are stale."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = client.query(f"last_over_time({expr}[10m])")
        if result:
            return result
        time.sleep(0.3)
    raise AssertionError(f"no series for {expr}")


@pytest.mark.integration
@requires_tool("prometheus")
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


@pytest.mark.integration
@requires_tool("prometheus")
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


def test_the_exporter_listens_on_loopback_only_unless_told_otherwise():
    """Live metrics name the run's trials and costs: other machines must not read them by
    default."""
    from basht.energy import CombinedSource, EnergyMonitor
    from basht.report.exporter import LiveExporter
    from tests.energy.test_monitor import CountingSource

    monitor = EnergyMonitor(source=CombinedSource([CountingSource()]), slots=1)
    exporter = LiveExporter(monitor, port=0)
    try:
        assert exporter.server.server_address[0] == "127.0.0.1"
        assert exporter.url.startswith("http://127.0.0.1:")
    finally:
        exporter.stop()
        monitor.close()


def _sleep_spec(spec, port: int) -> dict:
    spec["workload"]["params"] = {"epoch_s": 0.01}
    spec["search"].update(max_budget=2, max_trials=3)
    spec["measure"] = {"prometheus_port": port, "energy": "estimate"}
    return spec


@pytest.mark.integration
def test_a_port_picked_by_0_is_said_as_soon_as_the_exporter_serves_it(spec, write_spec, tmp_path):
    """`basht run` prints `metrics: URL` before the first phase line (and with -q too); the
    store keeps the same URL with the run's measurement settings."""
    from tests.test_compare import basht

    path = write_spec(_sleep_spec(spec, 0))
    proc = basht("run", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    (line,) = [x for x in lines if x.startswith("metrics: ")]
    assert lines.index(line) < next(i for i, x in enumerate(lines) if x.startswith("phase deploy"))
    url = line.removeprefix("metrics: ")
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", url) and not url.endswith(":0/metrics")
    store = Store(spec["store"])
    (run,) = store.list_runs()
    assert run.measurement["prometheus"] == url

    quiet = basht("run", "-q", str(path), cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.splitlines()[0].startswith("metrics: http://127.0.0.1:")


@pytest.mark.integration
def test_an_on_update_object_is_told_the_url_while_it_serves(spec, tmp_path):
    """From Python: an on_update with `metrics_served(url)` is told the URL, which serves then;
    a plain callable gets TunerStatus snapshots alone."""
    from urllib.request import urlopen

    served: list[tuple[str, bytes]] = []
    statuses: list[object] = []

    class Watch:
        def __call__(self, status):
            statuses.append(status)

        def metrics_served(self, url):
            with urlopen(url, timeout=5) as response:
                served.append((url, response.read()))

    experiment = Experiment.from_dict(_sleep_spec(spec, 0))
    result = run_benchmark(experiment, results_root=tmp_path / "results", on_update=Watch())
    assert result.status == "completed"
    ((url, body),) = served
    assert b"basht_energy_joules_total" in body
    assert Store(spec["store"]).get_run(result.run_id).measurement["prometheus"] == url
    assert statuses and all(hasattr(s, "counts") for s in statuses)

    plain: list[object] = []
    result = run_benchmark(experiment, results_root=tmp_path / "results", on_update=plain.append)
    assert result.status == "completed" and all(hasattr(s, "counts") for s in plain)


@pytest.mark.integration
def test_a_taken_port_is_one_line_naming_key_and_port_before_anything_is_stored(
    spec, write_spec, tmp_path
):
    from tests.test_compare import basht

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = write_spec(_sleep_spec(spec, port))
        for command in ("validate", "run"):
            proc = basht(command, str(path), cwd=tmp_path)
            assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
            assert proc.stderr.strip().splitlines() == [
                f"error: {path}: measure.prometheus_port: port {port} on 127.0.0.1 is already "
                "in use; pick another, or 0 for a free one"
            ]
        assert not (tmp_path / "basht.db").exists() and not (tmp_path / "results").exists()
    # Free again: the same file validates (the check binds and lets go at once); 0 needs none.
    assert basht("validate", str(path), cwd=tmp_path).returncode == 0
    assert basht("validate", str(write_spec(_sleep_spec(spec, 0))), cwd=tmp_path).returncode == 0


def test_a_port_taken_after_preflight_still_names_the_key_and_port(spec):
    """The exporter's own bind (a port taken since preflight, or a resumed run's) says the same."""
    from types import SimpleNamespace

    from basht.bench.measurement import start_exporter
    from basht.energy import CombinedSource, EnergyMonitor
    from basht.errors import ExperimentError
    from tests.energy.test_monitor import CountingSource

    monitor = EnergyMonitor(source=CombinedSource([CountingSource()]), slots=1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        experiment = Experiment.from_dict(_sleep_spec(spec, port), "exp.yaml")
        ctx = SimpleNamespace(experiment=experiment, monitor=monitor, on_update=None)
        with pytest.raises(ExperimentError) as err:
            start_exporter(ctx, port)
    monitor.close()
    assert str(err.value).startswith(
        f"exp.yaml: measure.prometheus_port: cannot serve live metrics on 127.0.0.1:{port} ("
    )


@pytest.mark.integration
def test_the_metrics_url_is_in_results_json_and_the_report(spec, write_spec, tmp_path):
    from tests.test_compare import basht

    proc = basht("run", "-q", str(write_spec(_sleep_spec(spec, 0))), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    url = proc.stdout.splitlines()[0].removeprefix("metrics: ")
    (run,) = Store(spec["store"]).list_runs()
    results = json.loads((tmp_path / "results" / run.id / "results.json").read_text())
    assert results["measurement"]["prometheus"] == url
    shown = basht("report", run.id, "--store", spec["store"], cwd=tmp_path)
    assert re.search(rf"live metrics\s+│ {re.escape(url)}", shown.stdout), shown.stdout
    assert json.loads(basht("report", run.id, "--store", spec["store"], "--json",
                            cwd=tmp_path).stdout)["measurement"]["prometheus"] == url  # fmt: skip
    page = basht("report", run.id, "--store", spec["store"], "--html", cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    assert url in (tmp_path / "results" / run.id / "report.html").read_text()
