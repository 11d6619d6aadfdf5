"""`benchmarks/carbon_shift.py` run small: a digits SHA job behind the carbon-aware gate on a
generated daily sine, two start days. The deadline is met, a 2x deadline with the perfect
forecast emits no more than carbon-agnostic, and with no slack (1x) the schedule is
carbon-agnostic's."""

from __future__ import annotations

import argparse
import math
import sys
from datetime import UTC, datetime

import pytest

from basht.energy.carbon import TimeSeriesIntensity
from tests.cli import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import carbon_shift  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))

DAY_S = 86400.0
T0 = datetime(2020, 1, 1, tzinfo=UTC).timestamp()


def daily_sine(days: int = 5) -> TimeSeriesIntensity:
    """Quarter-hour steps, dirtiest (500 g/kWh) at 09:00 UTC and cleanest (100) at 21:00."""
    times = [T0 + 900.0 * i for i in range(days * 96)]
    values = [300 + 200 * math.cos(2 * math.pi * ((t - T0) / 3600 - 9) / 24) for t in times]
    return TimeSeriesIntensity(times, values, source="daily sine")


def test_a_shifted_job_meets_its_deadline_and_with_no_slack_runs_as_carbon_agnostic():
    series = daily_sine()
    workload = carbon_shift.digits_workload(max_trials=27)  # one SHA bracket, rungs 1..27
    base = carbon_shift.run(workload.with_pruner("sha"), workload, seed=0)
    for day in (2, 3):  # the persistence forecasts need the days before
        start = T0 + day * DAY_S + 9 * 3600
        rows = carbon_shift.job(
            workload,
            "sha",
            series,
            start,
            factors=(1.0, 2.0),
            forecasts=("perfect", "persistence", "persistence-2"),
            base=base,
        )
        assert len(rows) == 6
        assert not [r for r in rows if r["missed"]], rows
        assert all(r["same_best"] and r["same_work"] for r in rows), rows
        for r in rows:
            if r["factor"] == 1.0:
                assert r["as_agnostic"], r
                assert math.isclose(r["emissions_g"], r["agnostic_g"], rel_tol=1e-9)
            elif r["forecast"] == "perfect":
                assert r["saving"] >= 0, r
                assert r["oracle_g"] <= r["emissions_g"]
        rows = [{**r, "region": "XX"} for r in rows]
        done = carbon_shift.targets(rows, ["XX"])
        assert set(done["persistence_2x_share_by_forecast"]) == {"persistence", "persistence-2"}
        assert done["persistence_2x_share_by_region"]["XX"]["jobs"] == 1


def test_the_forecasts_are_named_perfect_persistence_or_persistence_over_days():
    assert [carbon_shift.forecast_kind(k) for k in ("perfect", "persistence-7")] == [
        "perfect",
        "persistence-7",
    ]
    assert carbon_shift.forecast_of("persistence-7", daily_sine()).days == 7
    for bad in ("persistence-0", "persistence-29", "persistence-x", "yesterday"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected perfect, persistence"):
            carbon_shift.forecast_kind(bad)


def test_the_series_loads_from_a_lets_wait_awhile_csv(tmp_path):
    path = tmp_path / "xx_ci.csv"
    path.write_text(
        "Time,Carbon Intensity\n2020-01-01 00:00:00,200.5\n2020-01-01 00:15:00,180.25\n"
    )
    series = carbon_shift.load_series(path)
    assert series.timestamps == [T0, T0 + 900]
    assert series.g_per_kwh(T0 + 1000) == 180.25
