"""What a carbon-aware run reports: the schedule table on the console, the HTML report's
"Carbon-aware schedule" section, and its plot of the grid, the workers allowed and the deadline."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from basht.report.console import result_tables, schedule_rows
from basht.report.html import run_sections
from tests.report.test_console import _summary

T0 = datetime(2023, 6, 10, 12, tzinfo=UTC).timestamp()  # the series' time when the run began
H = 3600.0
#: The run phase on the clock: 11 s, at 3600 series seconds a second 11 series hours.
CLOCK = 1_700_000_000.0

SCHEDULE: dict[str, Any] = {
    "carbon_aware": True,
    "deadline": T0 + 12 * H,
    "start": T0,
    "time_scale": 3600.0,
    "max_workers": 2,
    "forecast": "persistence forecast (86400 s earlier) of time series grid.csv: 3 steps",
    "intensity": "time series grid.csv: 3 steps 2023-06-10T12:00:00Z .. (value held)",
    "decisions": [
        {"at": T0, "workers": 2, "reason": "measuring an epoch"},
        {"at": T0 + 0.1 * H, "workers": 0, "reason": "dirty: held"},
        {"at": T0 + 6 * H, "workers": 2, "reason": "clean slot"},
        {"at": T0 + 8 * H, "workers": 0, "reason": "dirty: held"},
        {"at": T0 + 9 * H, "workers": 2, "reason": "deadline needs full speed"},
    ],
    "trial_energy_kwh": 1e-6,
    "emissions_g": 2e-4,
    "agnostic_emissions_g": 5e-4,
    "oracle_emissions_g": 1e-4,
    "saving_g": 3e-4,
    "saving_percent": 60.0,
    "oracle_share_percent": 75.0,
}


def summary(run_s: float = 11.0, **schedule: Any) -> dict[str, Any]:
    """A run's summary with a carbon-aware schedule whose run phase lasted `run_s` seconds."""
    phases = [
        {"name": "setup", "attempt": 1, "start": CLOCK - 1, "end": CLOCK, "duration_s": 1.0,
         "aborted": False, "error": None},
        {"name": "run", "attempt": 1, "start": CLOCK, "end": CLOCK + run_s, "duration_s": run_s,
         "aborted": False, "error": None},
    ]  # fmt: skip
    measurement = {"energy_sources": ["estimate"], "schedule": copy.deepcopy(SCHEDULE) | schedule}
    return _summary(phases=phases, measurement=measurement)


def _text(data: dict[str, Any]) -> str:
    console = Console(width=160, record=True)
    console.print(result_tables(data))
    return console.export_text()


def _row(text: str, label: str) -> str:
    line = next(line for line in text.splitlines() if line.startswith(f"│ {label} "))
    return line.split("│")[2].strip()


# -- the console ---------------------------------------------------------------------------------


def test_the_console_shows_the_deadline_met_the_emissions_and_the_holds():
    text = _text(summary())
    assert "carbon-aware schedule" in text
    assert _row(text, "deadline") == "2023-06-11T00:00:00Z"
    # The run phase ended 11 series hours after the schedule's start: an hour early.
    assert _row(text, "deadline met") == "yes: the work ended 2023-06-10T23:00:00Z, 60 min early"
    assert _row(text, "forecast") == "persistence forecast (86400 s earlier)"
    assert _row(text, "emissions as run (estimate)") == "0.0002 gCO2eq"
    assert _row(text, "carbon-agnostic") == "0.0005 gCO2eq"
    assert _row(text, "oracle") == "0.0001 gCO2eq"
    assert _row(text, "saving against carbon-agnostic") == "60.0 % (0.0003 gCO2eq)"
    assert _row(text, "share of the oracle's saving") == "75.0 %"
    # Held from 0.1 h to 6 h and from 8 h to 9 h.
    assert _row(text, "hold decisions") == "2 of 5 decisions, held 6.9 h of series time"
    flat = " ".join(text.split())
    assert "Oracle: the least any schedule knowing the series could emit" in flat
    # Between the result and the phases.
    assert text.index("carbon-aware schedule") < text.index("phases")


def test_a_missed_deadline_says_by_how_much():
    text = _text(summary(run_s=14.0))
    assert _row(text, "deadline met") == "no: the work ended 2023-06-11T02:00:00Z, 2 h late"


def test_the_work_ends_where_the_last_attempts_run_phase_ends():
    """A resumed run's schedule is its last attempt's: so is the run phase that ends the work."""
    data = summary()
    data["phases"] = [
        {"name": "run", "attempt": 1, "start": CLOCK - 100, "end": CLOCK - 50},
        {"name": "run", "attempt": 2, "start": CLOCK, "end": CLOCK + 3.5},
    ]
    rows = dict(schedule_rows(data))
    assert rows["deadline met"] == "yes: the work ended 2023-06-10T15:30:00Z, 8.5 h early"
    data["phases"] = []
    assert dict(schedule_rows(data))["deadline met"] == "unknown (no run phase recorded)"


def test_no_energy_measured_leaves_the_savings_unsaid():
    data = summary()
    schedule = data["measurement"]["schedule"]
    for key in ("agnostic_emissions_g", "oracle_emissions_g", "saving_g", "saving_percent"):
        del schedule[key]
    schedule["oracle_share_percent"] = None
    rows = dict(schedule_rows(data))
    assert rows["carbon-agnostic"] == rows["oracle"] == "-"
    assert rows["saving against carbon-agnostic"] == rows["share of the oracle's saving"] == "-"


def test_other_runs_show_no_schedule():
    plain = _summary(measurement={"energy_sources": ["estimate"]})
    assert schedule_rows(plain) == []
    assert "carbon-aware" not in _text(plain) and "deadline" not in _text(plain)
    assert _text(plain) == _text(_summary(measurement={"energy_sources": ["estimate"]}))


def test_a_file_name_in_the_series_is_shown_as_it_is_not_read_as_markup():
    text = _text(summary(intensity="time series [/x].csv"))
    assert "time series [/x].csv" in text


# -- the HTML report -----------------------------------------------------------------------------


def test_the_html_report_has_a_schedule_section_with_its_plot_and_table(tmp_path):
    plots = {}
    for name in ("best_so_far", "schedule"):
        plots[name] = tmp_path / f"{name}.png"
        plots[name].write_bytes(b"png")
    page = "".join(run_sections(summary(), plots))
    section = page[page.index("<h2>Carbon-aware schedule</h2>") : page.index("<h2>Phases</h2>")]
    assert section.count("<img") == 1 and 'alt="carbon-aware schedule"' in section
    assert "<td>deadline</td><td>2023-06-11T00:00:00Z</td>" in section
    assert "<td>deadline met</td><td>yes: the work ended 2023-06-10T23:00:00Z" in section
    assert "<td>saving against carbon-agnostic</td><td>60.0 % (0.0003 gCO2eq)</td>" in section
    assert "<td>hold decisions</td><td>2 of 5 decisions" in section
    assert "The dashed red line is the deadline" in section
    # Its plot is shown there, not again among the run's other plots.
    assert page[page.index("<h2>Plots</h2>") :].count("<img") == 1


def test_without_matplotlib_the_section_has_its_table_alone():
    page = "".join(run_sections(summary(), None))
    section = page[page.index("<h2>Carbon-aware schedule</h2>") : page.index("<h2>Phases</h2>")]
    assert "<img" not in section and "<td>hold decisions</td>" in section


def test_other_runs_have_no_schedule_section():
    assert "Carbon-aware" not in "".join(run_sections(_summary(), None))


# -- the plot ------------------------------------------------------------------------------------


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figure of each schedule plot as it is saved."""
    pytest.importorskip("matplotlib")
    from basht.report import schedule_plots

    saved: list[Any] = []
    keep = schedule_plots._save

    def save(fig: Any, path: Any) -> Any:
        saved.append(fig)
        return keep(fig, path)

    monkeypatch.setattr(schedule_plots, "_save", save)
    return saved


def _grid(folder: Path) -> Path:
    """Dirty (400) until 6 h into the window, clean (50) after; a row before the window too."""
    path = folder / "grid.csv"
    rows = [(T0 - 2 * H, 300), (T0, 400), (T0 + 6 * H, 50), (T0 + 30 * H, 60)]
    path.write_text("timestamp,g_per_kwh\n" + "".join(f"{t:.0f},{v}\n" for t, v in rows))
    return path


def _unix(x: Any) -> float:
    """A plotted time as unix seconds (lines keep the datetimes they were given)."""
    import matplotlib.dates as mdates

    return x.timestamp() if isinstance(x, datetime) else mdates.num2date(x).timestamp()


def _jobs(data: dict[str, Any], folder: Path, csv: str | None, results_dir: str | None = None):
    from basht.report.schedule_plots import schedule_plot_jobs

    data = data | {
        "experiment": {"measure": {"carbon": {"csv": csv}}},
        "results_dir": results_dir,
    }
    return schedule_plot_jobs(data, folder, "native · t-1")


def test_the_plot_draws_the_grid_the_workers_the_held_stretches_and_the_deadline(drawn, tmp_path):
    jobs = _jobs(summary(), tmp_path, str(_grid(tmp_path)))
    assert list(jobs) == ["schedule"]
    path = jobs["schedule"].draw()
    assert path == tmp_path / "schedule.png" and path.stat().st_size > 10_000
    (fig,) = drawn
    grid, workers = fig.axes
    intensity = grid.lines[0]
    # From the window's start (the value held then: 400, not the 300 before it) to its end.
    assert list(intensity.get_ydata()) == [400, 50, 50]
    assert _unix(intensity.get_xdata()[0]) == pytest.approx(T0)
    step = workers.lines[0]
    assert list(step.get_ydata()) == [2, 0, 2, 0, 2, 2]  # held to the work's end, 11 h in
    assert _unix(step.get_xdata()[-1]) == pytest.approx(T0 + 11 * H)
    held = [p for p in grid.patches if p.get_alpha() == pytest.approx(0.28)]
    assert len(held) == 2
    legend = [t.get_text() for t in grid.get_legend().get_texts()]
    assert "deadline 06-11 00:00" in legend and "work ended 06-10 23:00 (deadline met)" in legend
    assert "held: cleaner hours are forecast" in legend
    assert "decided: dirty: held" in legend and "decided: deadline needs full speed" in legend
    vertical = sorted(
        _unix(line.get_xdata()[0]) for line in grid.lines if line.get_linestyle() in ("--", ":")
    )
    assert vertical == pytest.approx([T0 + 11 * H, T0 + 12 * H])
    title = grid.get_title(loc="left")
    assert "60.0 % less than carbon-agnostic, 75.0 % of the oracle's saving" in title


def test_a_relative_series_is_found_beside_the_results_root(drawn, tmp_path):
    """The stored csv is relative to where `basht run` ran: <there>/results/<run id>."""
    _grid(tmp_path)
    jobs = _jobs(summary(), tmp_path, "grid.csv", str(tmp_path / "results" / "t-1"))
    jobs["schedule"].draw()
    assert list(drawn[0].axes[0].lines[0].get_ydata()) == [400, 50, 50]


def test_without_its_series_the_plot_draws_the_decisions_alone(drawn, tmp_path):
    jobs = _jobs(summary(), tmp_path, "gone.csv", str(tmp_path / "results" / "t-1"))
    jobs["schedule"].draw()
    grid, workers = drawn[0].axes
    notes = [t.get_text() for t in grid.texts]
    assert notes == ["intensity not drawn: carbon series gone.csv not found"]
    assert list(workers.lines[0].get_ydata()) == [2, 0, 2, 0, 2, 2]


def test_other_runs_have_no_schedule_plot(tmp_path):
    assert _jobs(_summary(), tmp_path, None) == {}
