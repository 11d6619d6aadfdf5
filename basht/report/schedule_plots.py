"""The plot of a carbon-aware run: the grid's intensity over the run's window, the workers the
schedule allowed, the stretches it held the work back, and the deadline, all in series time.

Drawn from plain data as `basht.report.plots` draws its own; the series is read from the
experiment's CSV when the jobs are made (in the driver), so the plotter process reads no file.
Importing this module imports neither matplotlib nor the store.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from basht.report.plots import PlotJob, _figure, _save

log = logging.getLogger(__name__)

SCHEDULE_PLOTS = ("schedule",)

#: Room below 0 and above the most workers on the workers' axis.
_BELOW, _ABOVE = 0.12, 0.6
_INTENSITY = "#5a5a5a"
_WORKERS = "#1b7f5f"
_HELD = "#9aa4ad"
_DEADLINE = "#d62728"
_END = "#1f77b4"
#: The decisions' reasons as the plot marks them (`basht.energy.shifting.Decision`,
#: `basht.tune.carbon_gate`); any other reason is drawn grey.
_REASONS = {
    "measuring an epoch": "#9467bd",
    "clean slot": "#2ca02c",
    "marginal slot": "#bcbd22",
    "dirty: held": "#7f7f7f",
    "deadline needs full speed": "#ff7f0e",
    "past the estimate": "#8c564b",
}


@dataclass(frozen=True)
class ScheduleData:
    """What the plot shows, in series time (unix seconds): the intensity as (time, g/kWh) steps
    (None when the series could not be read, `missing` saying why), the gate's decisions as
    (time, workers, reason), the held stretches, and the window's start, deadline and the
    work's end (None: unknown)."""

    series: list[tuple[float, float]] | None
    missing: str | None
    decisions: list[tuple[float, int, str]]
    held: list[tuple[float, float]]
    start: float
    deadline: float
    end: float | None
    max_workers: int


def series_paths(spec: dict[str, Any], results_dir: str | None) -> list[Path]:
    """Where the run's carbon series may be: the experiment's `measure.carbon.csv` as stored
    (resolved against the experiment file's folder when it was loaded, but relative to the
    folder `basht run` ran in when the file was named by a relative path), then beside the
    results root that folder holds by default."""
    csv = ((spec.get("measure") or {}).get("carbon") or {}).get("csv")
    if not csv:
        return []
    path = Path(csv)
    if path.is_absolute():
        return [path]
    candidates = [path]
    if results_dir:  # <where basht ran>/results/<run id>
        candidates.append(Path(results_dir).parent.parent / path)
    return candidates


def read_series(
    candidates: list[Path], start: float, stop: float
) -> tuple[list[tuple[float, float]] | None, str | None]:
    """The series' steps over [start, stop] (its value at `start` first, then each change), or
    None and why not."""
    from basht.energy.carbon import CarbonIntensityError, TimeSeriesIntensity

    if not candidates:
        return None, "the experiment names no carbon series (measure.carbon.csv)"
    problem = None
    for path in candidates:
        if not path.is_file():
            continue
        try:
            series = TimeSeriesIntensity.from_csv(path)
        except CarbonIntensityError as err:
            problem = str(err)
            continue
        ts, vs = series.timestamps, series.values_g_per_kwh
        first = max(0, bisect.bisect_right(ts, start) - 1)  # the value held at `start`
        steps = [(start, vs[first])]
        steps += [(t, v) for t, v in zip(ts[first + 1 :], vs[first + 1 :], strict=True) if t < stop]
        steps.append((stop, steps[-1][1]))
        return steps, None
    return None, problem or f"carbon series {candidates[0]} not found"


def schedule_plot(data: ScheduleData, path: Path, title: str) -> Path:
    """The intensity (left axis) and the workers allowed (right axis, a step line with each
    decision marked by its reason) over series time; held stretches shaded, the deadline and
    the work's end as vertical lines."""
    import matplotlib.dates as mdates
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, ax = _figure((10, 5.6))

    def when(t: float) -> datetime:
        return datetime.fromtimestamp(t, UTC)

    right_edge = max(data.deadline, data.end or data.deadline)
    handles: list[Any] = []
    if data.series:
        xs = [when(t) for t, _ in data.series]
        ys = [v for _, v in data.series]
        handles.append(
            ax.step(xs, ys, where="post", color=_INTENSITY, linewidth=1.4,
                    label="grid carbon intensity")[0]
        )  # fmt: skip
        ax.fill_between(xs, ys, step="post", color=_INTENSITY, alpha=0.08, linewidth=0)
        ax.set_ylabel("carbon intensity (gCO2eq/kWh)")
        top = max(ys) * 1.12 or 1.0
        below = _BELOW / (data.max_workers + _ABOVE + _BELOW)  # the workers' 0 level with 0 g
        ax.set_ylim(-top * below / (1 - below), top)
        workers_ax = ax.twinx()
    else:
        ax.set_yticks([])
        ax.text(0.5, 0.93, f"intensity not drawn: {data.missing}", ha="center", va="top",
                transform=ax.transAxes, color="#555555", fontsize=8, wrap=True)  # fmt: skip
        workers_ax = ax.twinx()
    for i, (a, b) in enumerate(data.held):
        ax.axvspan(when(a), when(b), color=_HELD, alpha=0.28, linewidth=0)
        if i == 0:
            handles.append(Patch(color=_HELD, alpha=0.45, label="held: cleaner hours are forecast"))
    if data.decisions:
        xs = [when(t) for t, _, _ in data.decisions]
        ys = [w for _, w, _ in data.decisions]
        if data.end is not None and data.end > data.decisions[-1][0]:
            xs.append(when(data.end))
            ys.append(ys[-1])
        handles.append(
            workers_ax.step(xs, ys, where="post", color=_WORKERS, linewidth=2.0,
                            label="workers allowed")[0]
        )  # fmt: skip
        seen: dict[str, str] = {}
        for t, w, reason in data.decisions:
            colour = _REASONS.get(reason, "#c7c7c7")
            seen.setdefault(reason, colour)
            workers_ax.scatter([when(t)], [w], s=26, color=colour, edgecolors="white",
                               linewidths=0.6, zorder=4)  # fmt: skip
        handles += [
            Line2D([], [], marker="o", linestyle="none", color=c, markeredgecolor="white",
                   markersize=6, label=f"decided: {r}")
            for r, c in seen.items()
        ]  # fmt: skip
    else:
        workers_ax.text(0.5, 0.5, "the schedule recorded no decision", ha="center",
                        va="center", transform=workers_ax.transAxes, color="#555555")  # fmt: skip
    handles.append(
        ax.axvline(when(data.deadline), color=_DEADLINE, linestyle="--", linewidth=1.6,
                   label=f"deadline {_clock(data.deadline)}")
    )  # fmt: skip
    if data.end is not None:
        met = "met" if data.end <= data.deadline else "missed"
        handles.append(
            ax.axvline(when(data.end), color=_END, linestyle=":", linewidth=1.6,
                       label=f"work ended {_clock(data.end)} (deadline {met})")
        )  # fmt: skip
    workers_ax.set_ylim(-_BELOW, data.max_workers + _ABOVE)  # a marker at 0 shows
    workers_ax.set_yticks(range(data.max_workers + 1))
    workers_ax.set_ylabel("workers allowed", color=_WORKERS)
    workers_ax.tick_params(axis="y", colors=_WORKERS)
    pad = (right_edge - data.start) * 0.02
    ax.set_xlim(when(data.start), when(right_edge + pad))
    locator = mdates.AutoDateLocator(tz=UTC)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    ax.set_xlabel("series time (UTC)")
    ax.set_title(title, loc="left", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3,
              fontsize=8, frameon=False)  # fmt: skip
    return _save(fig, path)


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%m-%d %H:%M")


def schedule_plot_jobs(summary: dict[str, Any], folder: Path, label: str) -> dict[str, PlotJob]:
    """The schedule plot of a carbon-aware run (`summary` has the run's `measurement`,
    `phases`, `experiment` spec and `results_dir`), read but not yet drawn; none for any other
    run."""
    from basht.report.console import held_periods, schedule_end, schedule_of

    schedule = schedule_of(summary)
    if schedule is None or schedule.get("deadline") is None:
        return {}
    end = schedule_end(summary)
    decisions = [
        (float(d["at"]), int(d["workers"]), str(d["reason"]))
        for d in schedule.get("decisions") or []
    ]
    start = schedule.get("start")
    if start is None:
        start = decisions[0][0] if decisions else schedule["deadline"]
    deadline = float(schedule["deadline"])
    stop = max(deadline, end or deadline)
    candidates = series_paths(summary.get("experiment") or {}, summary.get("results_dir"))
    series, missing = read_series(candidates, start, stop)
    if missing is not None:
        log.info("schedule plot without the intensity: %s", missing)
    data = ScheduleData(
        series=series,
        missing=missing,
        decisions=decisions,
        held=held_periods(schedule, end),
        start=float(start),
        deadline=deadline,
        end=end,
        max_workers=int(
            schedule.get("max_workers") or max((w for _, w, _ in decisions), default=1)
        ),
    )
    saving = schedule.get("saving_percent")
    share = schedule.get("oracle_share_percent")
    said = []
    if saving is not None:
        said.append(f"{saving:.1f} % less than carbon-agnostic")
    if share is not None:
        said.append(f"{share:.1f} % of the oracle's saving")
    heading = "Carbon-aware schedule" + (f": {', '.join(said)}" if said else "")
    path = folder / "schedule.png"
    return {"schedule": PlotJob(path, partial(schedule_plot, data, path, f"{heading}\n{label}"))}
