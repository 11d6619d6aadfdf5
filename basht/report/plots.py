"""Plots of a run or a comparison, drawn from the store with matplotlib (Agg) and saved as PNG.

Per run: the best value so far against time, the trials on their workers over time, the energy
of each trial by its state, and the phase latencies (and for a run of several objectives its
Pareto front, drawn by `basht.report.front_plots`; for a carbon-aware run its schedule, drawn by
`basht.report.schedule_plots`). Per comparison: the same curves and bars
with one line or bar per system. Needs the `plots` extra (matplotlib).

The figures are drawn from plain data, and importing this module imports neither matplotlib nor
the store: the plotter process (`basht.report.plotter`) draws what the driver read.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from basht.errors import BashtError
from basht.states import TrialState

if TYPE_CHECKING:
    from basht.report.timeline import Segment
    from basht.store import Store

PHASES = ("deploy", "setup", "run", "collect_results", "test", "collect_metrics", "undeploy")
STATE_COLOURS = {
    TrialState.COMPLETED: "#2ca02c",
    TrialState.STOPPED: "#ff7f0e",
    TrialState.FAILED: "#d62728",
    TrialState.ABORTED: "#7f7f7f",
    TrialState.PAUSED: "#aec7e8",
    TrialState.RUNNING: "#17becf",
    TrialState.PENDING: "#c7c7c7",
}
SYSTEM_COLOURS = {"native": "#1f77b4", "optuna": "#9467bd", "raytune": "#8c564b"}
KIND_COLOURS = {
    "baseline": "#bcbd22",
    "allocation": "#dbdb8d",
    "overhead": "#c49c94",
    "test": "#17becf",
}
PHASE_COLOURS = dict(
    zip(
        PHASES,
        ("#1f77b4", "#aec7e8", "#2ca02c", "#98df8a", "#ff7f0e", "#ffbb78", "#9467bd"),
        strict=True,
    )
)


@dataclass(frozen=True)
class Curve:
    """One best-so-far line: (seconds since the run phase began, best value) per new best, held
    until `end_s` (the run phase's end), so a search that found nothing better later shows it."""

    label: str
    system: str
    points: list[tuple[float, float]]
    end_s: float | None = None


def _figure(figsize: tuple[float, float]) -> tuple[Any, Any]:
    """A figure on its own Agg canvas, and its one axes, or a one-line error without matplotlib.

    Not through pyplot: it would import a GUI backend's machinery and keep every figure in its
    registry until closed; a figure drawn once into a file needs only the canvas.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise BashtError("plots need matplotlib (pip install 'basht[plots]')") from None
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def _swatch(colour: str) -> Any:
    """A legend's colour patch for a state or a kind."""
    from matplotlib.patches import Rectangle

    return Rectangle((0, 0), 1, 1, color=colour)


@contextmanager
def limits_once(ax: Any) -> Iterator[None]:
    """Bars added in the block widen the axes' data limits once, all together, not one by one.

    matplotlib updates the limits for each bar it adds, through the bar's path and transforms:
    for hundreds of bars, more time than drawing them. A bar's part of the limits is its
    rectangle, corner to corner, so the rectangles are gathered and their corners given to the
    axes at the end: the same limits, the same picture. (Where a matplotlib no longer updates
    its limits through `_update_patch_limits`, it updates them per bar as it always did, and
    this adds the same corners again.)
    """
    added: list[Any] = []
    ax._update_patch_limits = added.append  # this axes' own, for the block only
    try:
        yield
    finally:
        del ax._update_patch_limits
        corners = [
            corner
            for bar in added
            if bar.get_width() or bar.get_height()  # as matplotlib: an empty bar is no limit
            for corner in (
                (bar.get_x(), bar.get_y()),
                (bar.get_x() + bar.get_width(), bar.get_y() + bar.get_height()),
            )
        ]
        if corners:
            ax.update_datalim(corners)


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    # The layout is done: without an engine left on the figure, savefig draws it once, not a
    # second time first to lay it out again (the same pixels, a third less time).
    fig.set_layout_engine(None)
    fig.savefig(path, dpi=100)
    return path


def _ordered(states: set[str]) -> list[str]:
    known = list(STATE_COLOURS)
    return sorted(states, key=lambda s: (known.index(s) if s in known else len(known), s))


def _colour(system: str, index: int) -> str:
    return SYSTEM_COLOURS.get(system, f"C{index % 10}")


# -- the figures, from plain data ----------------------------------------------------------------


def best_so_far_plot(
    curves: Sequence[Curve], metric: str, mode: str, target: float | None, path: Path, title: str
) -> Path:
    fig, ax = _figure((8, 4.2))
    labelled: set[str] = set()
    systems = list(dict.fromkeys(c.system for c in curves))
    for curve in curves:
        if not curve.points:
            continue
        xs = [t for t, _ in curve.points]
        ys = [v for _, v in curve.points]
        if curve.end_s is not None and curve.end_s > xs[-1]:
            xs.append(curve.end_s)
            ys.append(ys[-1])
        label = curve.label if curve.label not in labelled else None
        labelled.add(curve.label)
        ax.step(
            xs,
            ys,
            where="post",
            color=_colour(curve.system, systems.index(curve.system)),
            alpha=0.9 if len(curves) <= len(systems) else 0.6,
            label=label,
            linewidth=1.8,
        )
    if not any(c.points for c in curves):  # all failed, or interrupted before a first report
        ax.text(0.5, 0.5, "no trial reported a value", ha="center", va="center",
                transform=ax.transAxes, color="#555555")  # fmt: skip
    if target is not None:
        ax.axhline(target, color="black", linestyle="--", linewidth=1, label=f"target {target:g}")
    ax.set_xlim(left=0)  # the time before a first result counts too
    ax.set_xlabel("seconds since the run phase began")
    ax.set_ylabel(f"best validation {metric} so far ({mode})")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if labelled:
        ax.legend(loc="lower right" if mode == "max" else "upper right")
    return _save(fig, path)


def timeline_plot(segs: Sequence[Segment], lanes: int, path: Path, title: str) -> Path:
    used = max([lanes] + [s.lane + 1 for s in segs])
    fig, ax = _figure((9, 1.2 + 0.55 * used))
    span = max((s.end_s for s in segs), default=1.0) or 1.0
    widths = [max(seg.end_s - seg.start_s, span / 2000) for seg in segs]
    if segs:  # one call for all the bars: hundreds of calls cost more than drawing them
        with limits_once(ax):
            ax.barh(
                [seg.lane for seg in segs],
                widths,
                left=[seg.start_s for seg in segs],
                height=0.7,
                color=[STATE_COLOURS.get(seg.state, "#c7c7c7") for seg in segs],
                edgecolor="white",
                linewidth=0.5,
            )
    for seg, width in zip(segs, widths, strict=True):
        if width > span / 40:
            ax.text(
                seg.start_s + width / 2,
                seg.lane,
                str(seg.trial),
                ha="center",
                va="center",
                fontsize=7,
            )
    ax.set_yticks(range(used), [f"worker {i}" for i in range(used)])
    ax.invert_yaxis()
    ax.set_xlim(left=min([0.0] + [s.start_s for s in segs]))
    ax.set_xlabel("seconds since the run phase began (white space: an idle worker)")
    ax.set_title(title)
    shown = _ordered({s.state for s in segs})
    handles = [_swatch(STATE_COLOURS.get(s, "#c7c7c7")) for s in shown]
    if handles:
        ax.legend(handles, shown, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return _save(fig, path)


def energy_plot(
    trials: Sequence[tuple[int, str, float]], source: str, path: Path, title: str
) -> Path:
    """Each trial's attributed energy (J), coloured by the state it ended in."""
    fig, ax = _figure((8, 4))
    if trials:  # one call for all the bars, as in the timeline
        with limits_once(ax):
            ax.bar(
                [number for number, _, _ in trials],
                [joules for _, _, joules in trials],
                color=[STATE_COLOURS.get(state, "#c7c7c7") for _, state, _ in trials],
                width=0.8,
            )
    shown = _ordered({s for _, s, _ in trials})
    handles = [_swatch(STATE_COLOURS.get(s, "#c7c7c7")) for s in shown]
    if handles:
        totals = defaultdict(float)
        for _, state, joules in trials:
            totals[state] += joules
        ax.legend(handles, [f"{s} ({totals[s]:.3g} J in all)" for s in shown])
    ax.set_ylim(bottom=0)  # no energy measured is a bar of 0, not an axis down to -0.05 J
    ax.set_xlabel("trial")
    ax.set_ylabel(f"energy (J, {source})")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def stacked_bars_plot(
    bars: Sequence[tuple[str, dict[str, float]]],
    order: Sequence[str],
    colours: dict[str, str],
    unit: str,
    path: Path,
    title: str,
) -> Path:
    """One horizontal bar per label, split into `order`'s parts (phases, or kinds of energy)."""
    fig, ax = _figure((9, 1.6 + 0.6 * len(bars)))
    for i, (_, parts) in enumerate(bars):
        left = 0.0
        for j, name in enumerate(order):
            value = parts.get(name, 0.0)
            if value <= 0:
                continue
            ax.barh(i, value, left=left, color=colours.get(name, f"C{j % 10}"), label=name)
            left += value
    ax.set_yticks(range(len(bars)), [label for label, _ in bars])
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    shown = [name for name in order if name in unique]
    ax.legend(
        [unique[n] for n in shown], shown, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8
    )
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, path)


# -- from the store ------------------------------------------------------------------------------


def _search(store: Store, run_id: str) -> dict[str, Any]:
    run = store.get_run(run_id)
    return store.get_experiment(run.experiment_id).spec


def _best_so_far(store: Store, system: str, run_id: str, mode: str) -> Curve:
    from basht.report import runstats

    points = runstats.best_so_far(store, run_id, mode)
    return Curve(system, system, points, runstats.run_length_s(store, run_id))


def write_run_plots(store: Store, run_id: str, folder: Path | None = None) -> dict[str, Path]:
    """The four plots of one run (six with several objectives: `pareto` and `front_over_time`
    too; with a carbon-aware schedule, `schedule` too), into `folder` (default: the run's
    results folder)."""
    return {name: job.draw() for name, job in run_plot_jobs(store, run_id, folder).items()}


@dataclass(frozen=True)
class PlotJob:
    """One plot to draw into `path`, from data already read from the store: it can be drawn
    anywhere (in another process too) once the store is closed."""

    path: Path
    draw: Callable[[], Path]


def run_plot_jobs(store: Store, run_id: str, folder: Path | None = None) -> dict[str, PlotJob]:
    """The plots of one run (see `write_run_plots`), read but not yet drawn."""
    from basht.report import runstats
    from basht.report.timeline import segments

    run = store.get_run(run_id)
    spec = store.get_experiment(run.experiment_id).spec
    search, workers = spec["search"], spec["resources"]["workers"]
    folder = Path(folder or run.results_dir)
    label = f"{run.system} · {run.id}"
    curve = _best_so_far(store, run.system, run.id, search["mode"])
    source = runstats.energy_source(store, run.id)
    energy = runstats.trial_energy_j(store, run.id)
    phases = runstats.phase_durations(store, run.id)
    paths = {
        name: folder / f"{name}.png" for name in ("best_so_far", "timeline", "energy", "phases")
    }
    jobs = {
        "best_so_far": PlotJob(
            paths["best_so_far"],
            partial(
                best_so_far_plot,
                [curve],
                search["metric"],
                search["mode"],
                search.get("target"),
                paths["best_so_far"],
                f"best so far · {label}",
            ),
        ),
        "timeline": PlotJob(
            paths["timeline"],
            partial(
                timeline_plot,
                segments(store, run.id, workers),
                workers,
                paths["timeline"],
                f"trials on workers · {label}",
            ),
        ),
        "energy": PlotJob(
            paths["energy"],
            partial(
                energy_plot,
                [
                    (t.number, t.state, joules)
                    for t in store.trials(run.id)
                    if (joules := energy.get(t.number, 0.0)) is not None  # None: not measured
                ],
                source,
                paths["energy"],
                f"energy per trial by state · {label}",
            ),
        ),
        "phases": PlotJob(
            paths["phases"],
            partial(
                stacked_bars_plot,
                [(run.system, phases)],
                PHASES,
                PHASE_COLOURS,
                "seconds",
                paths["phases"],
                f"phase latencies · {label}",
            ),
        ),
    }
    # A run of several objectives: its Pareto front and the front's hypervolume over time too.
    from basht.report.front import objectives_summary

    objectives = objectives_summary(store, run.id, spec, run.best_trial)
    if objectives is not None:
        from basht.report.front_plots import front_plot_jobs

        seen = {"objectives": objectives, "measurement": run.measurement or {}}
        jobs |= front_plot_jobs(seen, folder, label)
    # A carbon-aware run: the grid, the workers its schedule allowed and the deadline.
    if ((run.measurement or {}).get("schedule") or {}).get("carbon_aware"):
        from basht.report.schedule_plots import schedule_plot_jobs

        seen = {
            "measurement": run.measurement,
            "phases": [
                {"name": p.name, "attempt": p.attempt, "start": p.start, "end": p.end}
                for p in store.phases(run.id)
            ],
            "experiment": spec,
            "results_dir": run.results_dir,
        }
        jobs |= schedule_plot_jobs(seen, folder, label)
    return jobs


def write_comparison_plots(
    store: Store,
    runs: Sequence[tuple[str, str]],
    folder: Path,
    target: float | None = None,
) -> dict[str, Path]:
    """The comparison's plots: one line or bar per system; `runs` are (system, run id) pairs.

    With several seeds per system each run is its own line (one colour per system) and the bars
    are each system's median.
    """
    from basht.report import runstats

    if not runs:
        return {}
    spec = _search(store, runs[0][1])
    search = spec["search"]
    target = target if target is not None else search.get("target")
    curves = [_best_so_far(store, system, run_id, search["mode"]) for system, run_id in runs]
    by_system: dict[str, list[str]] = defaultdict(list)
    for system, run_id in runs:
        by_system[system].append(run_id)
    phase_bars, energy_bars = [], []
    kinds: list[str] = []
    for system, ids in by_system.items():
        phase_bars.append(
            (system, _median_parts([runstats.phase_durations(store, r) for r in ids]))
        )
        split = _median_parts([runstats.energy_by_kind_j(store, r) for r in ids])
        energy_bars.append((system, split))
        kinds.extend(k for k in split if k not in kinds)
    trial_kinds = sorted(k for k in kinds if k.startswith("trials "))
    order = trial_kinds + [k for k in ("test", "baseline", "allocation", "overhead") if k in kinds]
    colours = {**KIND_COLOURS, **{k: STATE_COLOURS.get(k[7:], "#c7c7c7") for k in trial_kinds}}
    source = runstats.energy_source(store, runs[0][1])
    seeds = max(len(ids) for ids in by_system.values())
    note = f" (median of {seeds} seeds)" if seeds > 1 else ""
    return {
        "best_so_far": best_so_far_plot(
            curves,
            search["metric"],
            search["mode"],
            target,
            folder / "best_so_far.png",
            "best validation value so far, by system",
        ),
        "phases": stacked_bars_plot(
            phase_bars,
            PHASES,
            PHASE_COLOURS,
            "seconds",
            folder / "phases.png",
            f"phase latencies by system{note}",
        ),
        "energy": stacked_bars_plot(
            energy_bars,
            order,
            colours,
            f"joules ({source})",
            folder / "energy.png",
            f"where the energy went, by system{note}",
        ),
    }


def _median_parts(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    keys = list(dict.fromkeys(k for p in parts for k in p))
    return {k: statistics.median(p.get(k, 0.0) for p in parts) for k in keys}
