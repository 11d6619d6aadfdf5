"""The Electricity Maps forecast as the scheduler's forecast: what it asks the API, how it reads
the answer, and what it plans with when the API fails; and a real carbon-aware `basht run` on a
live zone served by a local stand-in for the API."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from basht.energy.carbon import StaticIntensity
from basht.energy.em_forecast import ElectricityMapsForecast, FlatForecast
from basht.errors import ExperimentError
from basht.experiment import Experiment
from basht.store import Store
from tests.cli import basht, cli_env
from tests.energy.em_api import ElectricityMapsStub

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
H = 3600.0


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def points(*rows: tuple[float, float]) -> dict[str, Any]:
    return {
        "zone": "DE",
        "forecast": [{"carbonIntensity": g, "datetime": iso(t)} for t, g in rows],
        "updatedAt": iso(T0),
    }


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def forecast(api: ElectricityMapsStub, **kw: Any) -> ElectricityMapsForecast:
    return ElectricityMapsForecast(
        "DE", "secret", StaticIntensity(300.0), base_url=api.base_url, timeout_s=2, **kw
    )


# -- the API -------------------------------------------------------------------------------------


@pytest.mark.integration
def test_asks_for_the_zone_with_the_token_and_reads_a_step_series(api: ElectricityMapsStub) -> None:
    api.forecast = lambda: points((T0 + H, 200), (T0 + 2 * H, 80), (T0 + 3 * H, 150))
    f = forecast(api, cache_s=1e9)
    assert f.g_per_kwh(T0 + 1.5 * H, T0) == 200.0  # the earlier point holds until the next
    assert f.g_per_kwh(T0 + 2 * H, T0) == 80.0
    assert f.g_per_kwh(T0 + 30 * H, T0) == 150.0  # past the horizon: the last point
    assert f.g_per_kwh(T0 + 10, T0) == 200.0  # before the first point: the first
    assert f.g_per_kwh(T0, T0) == 300.0  # before the forecast: the run's own intensity
    assert f.g_per_kwh(T0 + 2.5 * H, T0 + 2.5 * H) == 80.0  # the present, where it covers it
    assert api.requests == [("/v3/carbon-intensity/forecast?zone=DE&horizonHours=72", "secret")]
    assert "Electricity Maps forecast for zone DE" in f.describe()
    assert "secret" not in f.describe() and "secret" not in repr(f)


@pytest.mark.integration
def test_fetches_again_only_when_the_cache_runs_out(api: ElectricityMapsStub) -> None:
    clock = _Clock()
    api.forecast = lambda: points((T0, 100))
    f = forecast(api, cache_s=600, clock=clock)
    assert f.g_per_kwh(T0 + H, T0) == 100.0
    api.forecast = lambda: points((T0, 50))
    clock.now = 599
    assert f.g_per_kwh(T0 + H, T0) == 100.0
    clock.now = 600
    assert f.g_per_kwh(T0 + H, T0) == 50.0
    assert len(api.requests) == 2


@pytest.mark.integration
@pytest.mark.parametrize(
    "status, body",
    [
        (500, {"error": "down"}),
        (200, {"zone": "DE"}),  # no forecast
        (200, {"zone": "DE", "forecast": []}),
        (200, points((T0, -5))),
        (200, {"zone": "DE", "forecast": [{"carbonIntensity": True, "datetime": iso(T0)}]}),
        (200, {"zone": "DE", "forecast": [{"carbonIntensity": 10, "datetime": "soon"}]}),
        (
            200,
            {"zone": "DE", "forecast": [{"carbonIntensity": 10, "datetime": "2026-01-01T00:00"}]},
        ),
    ],
)
def test_a_failed_or_bad_answer_plans_with_the_fallback_and_warns_once(
    api: ElectricityMapsStub, status: int, body: object, caplog: pytest.LogCaptureFixture
) -> None:
    api.status, api.forecast = status, lambda: body
    clock = _Clock()
    f = forecast(api, cache_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="basht.energy.em_forecast"):
        assert f.g_per_kwh(T0 + H, T0) == 300.0  # the current value held flat
        clock.now = 61
        assert f.g_per_kwh(T0 + H, T0) == 300.0
    assert len(api.requests) == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "zone DE" in warnings[0].getMessage()
    assert "unavailable" in f.describe() and "held flat" in f.describe()


def test_an_unreachable_api_plans_with_the_fallback() -> None:
    with socket_closed() as port:
        f = ElectricityMapsForecast(
            "FR", "t", StaticIntensity(90.0), base_url=f"http://127.0.0.1:{port}/v3", timeout_s=1
        )
        assert f.g_per_kwh(T0 + H, T0) == 90.0
    assert "unavailable" in f.describe()


class socket_closed:
    """A port on 127.0.0.1 that nothing listens on."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_flat_forecast_is_the_value_now() -> None:
    f = FlatForecast(StaticIntensity(123.0))
    assert f.g_per_kwh(T0 + 5 * H, T0) == 123.0
    assert "held flat" in f.describe()


# -- the experiment file ------------------------------------------------------------------------


def _spec(**schedule: Any) -> dict[str, Any]:
    return {
        "name": "em",
        "workload": {"name": "sleep"},
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "search": {"metric": "accuracy", "mode": "max", "max_budget": 3, "max_trials": 4},
        "measure": {"carbon": {"region": "DE"}},
        "schedule": {"carbon_aware": True, "deadline": "2h", **schedule},
    }


def test_the_electricitymaps_forecast_needs_a_region() -> None:
    spec = _spec(forecast="electricitymaps")
    spec["measure"]["carbon"] = {"g_per_kwh": 300}
    with pytest.raises(ExperimentError, match=r"schedule\.forecast: .*measure\.carbon\.region"):
        Experiment.from_dict(spec)


@pytest.mark.parametrize("key, value", [("start", "2026-01-01T00:00:00Z"), ("time_scale", 60)])
def test_a_live_forecast_replays_nothing(key: str, value: Any) -> None:
    with pytest.raises(ExperimentError, match=rf"schedule\.{key}: replays a recorded series"):
        Experiment.from_dict(_spec(forecast="electricitymaps", **{key: value}))


def test_a_region_without_the_live_forecast_is_still_refused() -> None:
    with pytest.raises(ExperimentError, match=r"measure\.carbon\.csv"):
        Experiment.from_dict(_spec(forecast="persistence"))


def test_no_token_is_one_line_before_the_run(tmp_path: Path) -> None:
    spec = _spec(forecast="electricitymaps")
    spec["workload"] = {"name": "tests.user_workloads:Spin"}
    path = tmp_path / "em.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = cli_env()
    env.pop("ELECTRICITYMAPS_TOKEN", None)
    ran = basht("validate", str(path), cwd=tmp_path, env=env)
    assert ran.returncode == 2
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and "schedule.forecast: electricitymaps needs a token" in lines[0]


# -- a real run ---------------------------------------------------------------------------------


#: The grid is dirty until this long after the API is first asked, and clean after.
DIRTY_S = 20.0


@pytest.mark.integration
def test_a_live_run_waits_for_the_clean_hours_the_forecast_promises(
    tmp_path: Path, api: ElectricityMapsStub
):
    started: list[float] = []

    def clean_at() -> float:
        if not started:
            started.append(time.time())
        return started[0] + DIRTY_S

    api.latest = lambda: {
        "zone": "DE",
        "carbonIntensity": 500 if time.time() < clean_at() else 50,
        "datetime": iso(time.time()),
    }
    api.forecast = lambda: points((time.time() - 60, 500), (clean_at(), 50))
    spec = _spec(forecast="electricitymaps", deadline="5m", step_s=5)
    spec["workload"] = {"name": "tests.user_workloads:Spin", "params": {"epoch_s": 0.05}}
    spec["resources"] = {"workers": 2}
    spec["measure"] = {"carbon": {"region": "DE"}, "sample_interval_s": 0.1}
    spec["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    path = tmp_path / "em.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    env = cli_env(ELECTRICITYMAPS_TOKEN="secret", ELECTRICITYMAPS_API_URL=api.base_url)
    ran = basht("run", "-q", "--no-plots", str(path), cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    store = Store(spec["store"])
    (run,) = store.list_runs()
    results = json.loads((Path(run.results_dir) / "results.json").read_text())
    schedule = results["measurement"]["schedule"]
    reasons = [d["reason"] for d in schedule["decisions"]]
    assert "dirty: held" in reasons, schedule["decisions"]
    assert "Electricity Maps forecast for zone DE" in schedule["forecast"]
    assert "agnostic_emissions_g" not in schedule and "csv" in schedule["accounting"]
    assert {t.state for t in store.trials(run.id)} == {"completed"}
    # Held while dirty: the epochs after the first (which measured one) trained once clean.
    clean = started[0] + DIRTY_S
    late = [r for r in store.reports(run.id) if r.epoch > 1]
    assert late and all(r.at >= clean - 1.0 for r in late), [(r.epoch, r.at - clean) for r in late]
    assert any("/forecast?zone=DE" in path for path, _ in api.requests)
    assert all(token == "secret" for _, token in api.requests)
