"""`schedule.forecast: csv`: a forecast series of the user's own, read ahead of the measured one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from basht.bench.carbon_schedule import forecast_of
from basht.bench.preflight import preflight
from basht.energy.carbon import TimeSeriesIntensity
from basht.energy.shifting import PersistenceForecast, SeriesForecast
from basht.errors import ExperimentError
from basht.experiment import Experiment, load_experiment

T0 = 1_700_006_400.0
H = 3600.0


def test_the_future_is_the_forecast_and_the_past_the_series() -> None:
    measured = TimeSeriesIntensity([T0, T0 + H], [500.0, 100.0], source="grid")
    forecast = TimeSeriesIntensity([T0, T0 + H], [300.0, 50.0], source="day-ahead")
    f = SeriesForecast(measured, forecast)
    assert f.g_per_kwh(T0 + 10, T0 + 100) == 500.0  # past: as measured
    assert f.g_per_kwh(T0 + 2 * H, T0 + 100) == 50.0  # ahead: as forecast
    assert f.g_per_kwh(T0 + 2 * H, T0 + 3 * H) == 100.0
    assert "day-ahead" in f.describe() and "grid" in f.describe()


def _spec(**schedule: Any) -> dict[str, Any]:
    return {
        "name": "fc",
        "workload": {"name": "tests.user_workloads:Spin"},
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "search": {"metric": "accuracy", "mode": "max", "max_budget": 3, "max_trials": 4},
        "measure": {"carbon": {"csv": "grid.csv"}},
        "schedule": {"carbon_aware": True, "deadline": "2h", **schedule},
    }


@pytest.mark.parametrize(
    "schedule, says",
    [
        ({"forecast": "csv"}, "forecast: csv needs forecast_csv"),
        ({"forecast_csv": "f.csv"}, "forecast_csv is read with forecast: csv, not persistence"),
        ({"forecast": "perfect", "forecast_days": 7}, "forecast_days is read with forecast: "),
        ({"forecast_days": 0}, "forecast_days: Input should be greater than or equal to 1"),
        ({"forecast_days": 29}, "forecast_days: Input should be less than or equal to 28"),
    ],
)
def test_a_forecast_file_and_the_csv_forecast_come_together(schedule: dict, says: str) -> None:
    with pytest.raises(ExperimentError, match=f"schedule[:.] ?.*{says}"):
        Experiment.from_dict(_spec(**schedule))


def test_the_persistence_forecast_averages_the_days_the_file_asks_for() -> None:
    series = TimeSeriesIntensity([T0], [500.0], source="grid")
    assert forecast_of(Experiment.from_dict(_spec()), series).days == 1
    week = forecast_of(Experiment.from_dict(_spec(forecast_days=7)), series)
    assert isinstance(week, PersistenceForecast) and week.days == 7


def _write(folder: Path, forecast: str | None) -> Path:
    (folder / "grid.csv").write_text("timestamp,g_per_kwh\n2023-11-15T00:00:00Z,500\n")
    if forecast is not None:
        (folder / "day-ahead.csv").write_text(forecast)
    path = folder / "fc.yaml"
    path.write_text(yaml.safe_dump(_spec(forecast="csv", forecast_csv="day-ahead.csv")))
    return path


def test_the_file_is_found_beside_the_experiment_and_read_as_the_forecast(tmp_path, monkeypatch):
    path = _write(tmp_path, "timestamp,g_per_kwh\n2023-11-15T00:00:00Z,40\n")
    monkeypatch.chdir(Path("/"))
    exp = load_experiment(path)
    assert exp.schedule.forecast_csv == str(tmp_path / "day-ahead.csv")
    preflight(exp)
    series = TimeSeriesIntensity.from_csv(tmp_path / "grid.csv")
    forecast = forecast_of(exp, series)
    assert isinstance(forecast, SeriesForecast)
    assert forecast.g_per_kwh(T0 + H, T0) == 40.0


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "cannot read carbon time series"),
        ("when,grams\n1,2\n", "header must name the columns timestamp,g_per_kwh"),
        ("timestamp,g_per_kwh\n2023-11-15T00:00:00Z,-3\n", "g_per_kwh"),
    ],
)
def test_a_bad_forecast_file_is_one_line_before_the_run(tmp_path, content, says) -> None:
    path = _write(tmp_path, content)
    with pytest.raises(ExperimentError) as err:
        preflight(load_experiment(path))
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: schedule.forecast_csv: ")
    assert says in message, message
