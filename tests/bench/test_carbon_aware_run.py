"""`basht run` with a carbon-aware schedule, for real, on a replayed step series (dirty for the
first hours of the window, clean after): trials wait out the dirty hours and still meet the
deadline, a deadline too short to wait runs at full width, and a killed run resumes to the end."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from basht.store import Store
from tests.cli import basht, cli_env, run_in_background, wait_for_trials

pytestmark = pytest.mark.integration

#: The series' start: where the run replays it from.
START = "2023-01-01T00:00:00Z"
START_S = datetime.fromisoformat(START).timestamp()
#: Dirty (500 g/kWh) for this long after START, clean (50 g/kWh) after.
DIRTY_S = 5 * 3600.0
#: An hour of the series a second: the dirty hours pass in five seconds (setup takes one or two).
SCALE = 3600.0
HELD = "dirty: held"


def _experiment(
    folder: Path, deadline: str, epoch_s: float = 0.05, forecast: str = "perfect"
) -> Path:
    """Four trials of three epochs on two workers, carbon-aware on the step series. `forecast:
    csv` reads a forecast file that says what the series will do (a day-ahead forecast that
    came true)."""
    grid = (
        "timestamp,g_per_kwh\n"
        f"{START},500\n"
        f"{datetime.fromtimestamp(START_S + DIRTY_S, UTC).isoformat()},50\n"
        f"{datetime.fromtimestamp(START_S + 86400, UTC).isoformat()},50\n"
    )
    (folder / "grid.csv").write_text(grid)
    (folder / "day-ahead.csv").write_text(grid)
    spec = {
        "name": "carbon",
        "seed": 0,
        "workload": {"name": "tests.user_workloads:Spin", "params": {"epoch_s": epoch_s}},
        "space": {"x": {"type": "float", "low": -1.0, "high": 1.0}},
        "search": {"metric": "accuracy", "mode": "max", "max_budget": 3, "max_trials": 4},
        "resources": {"workers": 2},
        "measure": {"carbon": {"csv": "grid.csv"}, "sample_interval_s": 0.1},
        "schedule": {
            "carbon_aware": True,
            "deadline": deadline,
            "forecast": forecast,
            **({"forecast_csv": "day-ahead.csv"} if forecast == "csv" else {}),
            "start": START,
            "time_scale": SCALE,
        },
        "store": f"sqlite:///{folder / 'basht.db'}",
    }
    path = folder / "carbon.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _results(store: Store, run_id: str) -> dict[str, Any]:
    return json.loads((Path(store.get_run(run_id).results_dir) / "results.json").read_text())


def _to_series(results: dict[str, Any], attempt: int = 1) -> Any:
    """The run's clock onto the series: the schedule starts (series time) as the attempt's
    run phase starts (clock time), and then runs `time_scale` times as fast."""
    schedule = results["measurement"]["schedule"]
    (run,) = [p for p in results["phases"] if p["name"] == "run" and p["attempt"] == attempt]
    return lambda at: schedule["start"] + (at - run["start"]) * schedule["time_scale"]


def test_trials_wait_out_the_dirty_hours_and_meet_the_deadline(tmp_path):
    path = _experiment(tmp_path, deadline="10h", forecast="csv")
    ran = basht("run", "-q", str(path), cwd=tmp_path, env=cli_env(BASHT_PLOTS="1"))
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    store = Store(f"sqlite:///{tmp_path / 'basht.db'}")
    (run,) = store.list_runs()
    results = _results(store, run.id)
    schedule = results["measurement"]["schedule"]
    assert (
        schedule["forecast"].startswith("forecast time series ")
        and "day-ahead.csv" in (schedule["forecast"])
    ), schedule["forecast"]
    reasons = [d["reason"] for d in schedule["decisions"]]
    assert HELD in reasons, schedule["decisions"]
    hold = next(d for d in schedule["decisions"] if d["reason"] == HELD)
    assert hold["workers"] == 0 and hold["at"] < START_S + DIRTY_S
    # Once held, nothing trains while the grid is dirty: the epochs reported dirty are the
    # first ones, which measured the epoch (one per worker at most).
    series = _to_series(results)
    dirty = [r for r in store.reports(run.id) if series(r.at) < START_S + DIRTY_S]
    assert dirty and {r.epoch for r in dirty} == {1} and len(dirty) <= 2, [
        (r.epoch, series(r.at) - START_S) for r in dirty
    ]
    # ...and the trials paused for it went on from their checkpoints once it was clean.
    trials = {t.id: t for t in store.trials(run.id)}
    assert {t.state for t in trials.values()} == {"completed"}
    assert all(t.budget == 3 for t in trials.values())
    for report in dirty:
        paused = [c.epoch for c in store.checkpoints(report.trial_id) if c.kind == "pause"]
        assert paused == [1], paused
    assert all(t["restarts"] == 0 for t in results["trials"])  # no epoch trained twice
    # The deadline (10 h from the series' start) was met: the run phase ended before it.
    assert schedule["deadline"] == START_S + 10 * 3600
    run_phase = next(p for p in results["phases"] if p["name"] == "run")
    assert series(run_phase["end"]) <= schedule["deadline"]
    assert schedule["saving_percent"] > 0
    assert schedule["emissions_g"] < schedule["agnostic_emissions_g"]
    assert schedule["oracle_emissions_g"] <= schedule["emissions_g"]
    # The console says so, and the schedule is drawn beside the other plots.
    flat = " ".join(ran.stdout.split())
    assert "carbon-aware schedule" in flat and "deadline met │ yes: the work ended" in flat
    assert (Path(run.results_dir) / "schedule.png").is_file()


def test_a_deadline_too_short_to_wait_runs_at_full_width(tmp_path):
    path = _experiment(tmp_path, deadline="30m")
    ran = basht("run", "-q", "--no-plots", str(path), cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    store = Store(f"sqlite:///{tmp_path / 'basht.db'}")
    (run,) = store.list_runs()
    schedule = _results(store, run.id)["measurement"]["schedule"]
    assert schedule["decisions"]
    assert all(d["reason"] != HELD for d in schedule["decisions"]), schedule["decisions"]
    assert all(d["workers"] == 2 for d in schedule["decisions"]), schedule["decisions"]
    assert {t.state for t in store.trials(run.id)} == {"completed"}
    # Nothing was paused for the gate: each trial trained its three epochs in one go.
    assert not [d for d in store.decisions(run.id) if d.op == "suggest" and d.result == "resume"]
    # That run timed the workload's epochs (12 of at least 0.05 s, 180 s of series each, on 2
    # workers: 18 minutes at the soonest), so a 10-minute deadline is refused before it starts.
    _experiment(tmp_path, deadline="10m")
    refused = basht("run", "-q", "--no-plots", str(path), cwd=tmp_path)
    assert refused.returncode != 0
    (line,) = refused.stderr.strip().splitlines()
    assert "schedule.deadline: 2023-01-01T00:10:00Z is too early" in line, line
    assert f"as run {run.id} timed them" in line and "at the earliest" in line, line
    assert [r.id for r in store.list_runs()] == [run.id]


def test_a_killed_carbon_aware_run_resumes_and_restarts_its_held_trials(tmp_path):
    path = _experiment(tmp_path, deadline="10h")
    url = f"sqlite:///{tmp_path / 'basht.db'}"
    proc = run_in_background(path, tmp_path)
    try:
        # Killed while the gate holds a trial paused for the dirty hours.
        wait_for_trials(
            url,
            tmp_path / "basht.db",
            lambda store, run: any(t.state == "paused" for t in store.trials(run.id)),
            timeout_s=60,
        )
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    store = Store(url)
    (run,) = store.list_runs()
    assert run.status == "running"  # killed outright: the store still says it runs
    held = [t.number for t in store.trials(run.id) if t.state == "paused"]
    assert held

    done = basht("resume", run.id, "-q", "--no-plots", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    store = Store(url)
    trials = store.trials(run.id)
    assert store.get_run(run.id).status == "completed"
    assert sorted(t.number for t in trials) == [0, 1, 2, 3]
    assert {t.state for t in trials} == {"completed"} and all(t.budget == 3 for t in trials)
    # The held trials were started again in the second attempt, from their checkpoints.
    results = _results(store, run.id)
    again = [p for p in results["phases"] if p["name"] == "run" and p["attempt"] == 2]
    for t in trials:
        if t.number in held:
            paused = [c.epoch for c in store.checkpoints(t.id) if c.kind == "pause"]
            assert paused and paused[0] >= 1
            reports = [r for r in store.reports(run.id) if r.trial_id == t.id]
            assert reports[-1].epoch == 3 and reports[-1].at >= again[0]["start"]
    assert {p.attempt for p in store.phases(run.id)} == {1, 2}
    schedule = results["measurement"]["schedule"]
    # The replay went on where the first attempt left the series, against the same deadline.
    assert schedule["deadline"] == START_S + 10 * 3600 and schedule["origin"] == START_S
    assert schedule["start"] > START_S + 100 and schedule["decisions"][0]["at"] >= schedule["start"]
