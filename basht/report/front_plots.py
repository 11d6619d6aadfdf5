"""The plots of a run of several objectives: its trials on the first two objectives with the
Pareto front, and the front's hypervolume against the energy (or time) the trials had spent.

Drawn from plain data as `basht.report.plots` draws its own, and like it importing this module
imports neither matplotlib nor the store, so the plotter process can draw these too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from basht.report.plots import PlotJob, _figure, _save

FRONT_PLOTS = ("pareto", "front_over_time")

_FRONT = "#1f77b4"
_DOMINATED = "#8c96a0"
_INFEASIBLE = "#d62728"
_TESTED = "#f2b701"
_BOUND = "#d62728"
#: Front trials labelled with their number at most (more would be a blur of digits).
_NUMBERED = 20


@dataclass(frozen=True)
class Axis:
    """One objective as a plot axis: its label (mode, unit, source), its mode (`max`, `min`;
    None for the trial number), and the constraint bounds on its metric as (`≤` or `≥`,
    value)."""

    label: str
    mode: str | None
    bounds: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Point:
    """One scored trial on the plotted objectives."""

    trial: int
    x: float
    y: float
    completed: bool
    feasible: bool
    on_front: bool


def _plain_ticks(ax: Any) -> None:
    """Tick labels that carry their own scale (`5e-08`), not an offset such as `1e-7` above
    the axis, which an energy in kWh needs and which would run into a two-line title."""
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _: f"{value:.3g}")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)


def _cost(value: float, mode: str | None) -> float:
    return -value if mode == "max" else value


def _staircase(
    front: list[Point], x: Axis, y: Axis, reference: tuple[float, float] | None
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """The front's attainment line (its points joined by steps through the corners they
    dominate), and the region it dominates up to the reference point (empty without one), in
    the objectives' own values."""
    costs = sorted({(_cost(p.x, x.mode), _cost(p.y, y.mode)) for p in front})
    kept: list[tuple[float, float]] = []
    for cx, cy in costs:  # the 2-D non-dominated ones, by the first objective
        if not kept or cy < kept[-1][1]:
            kept.append((cx, cy))
    line: list[tuple[float, float]] = []
    for i, (cx, cy) in enumerate(kept):
        if i:
            line.append((cx, kept[i - 1][1]))
        line.append((cx, cy))
    region: list[tuple[float, float]] = []
    if reference is not None and kept:
        rx, ry = _cost(reference[0], x.mode), _cost(reference[1], y.mode)
        inside = [(cx, cy) for cx, cy in line if cx < rx and cy < ry]
        if inside:
            region = [(inside[0][0], ry), *inside, (rx, inside[-1][1]), (rx, ry)]
    back = [(_cost(cx, x.mode), _cost(cy, y.mode)) for cx, cy in line]
    return back, [(_cost(cx, x.mode), _cost(cy, y.mode)) for cx, cy in region]


def _bounds(ax: Any, axis: Axis, vertical: bool) -> list[Any]:
    """Each constraint bound on this axis as a dashed line, its infeasible side lightly shaded;
    a bound far outside the trials' values would squash them into a corner, so it is named in
    the legend (off the axis) instead of drawn. Returns the legend handles."""
    from matplotlib.lines import Line2D

    get, set_ = (ax.get_xlim, ax.set_xlim) if vertical else (ax.get_ylim, ax.set_ylim)
    low, high = get()
    span = (high - low) or 1.0
    name = axis.label.split(" (")[0]
    drawn = [(op, v) for op, v in axis.bounds if low - span <= v <= high + span]
    handles = [
        Line2D([], [], color=_BOUND, linestyle="--", label=f"constraint {name} {op} {v:g} "
               "(off the axis)")
        for op, v in axis.bounds if (op, v) not in drawn
    ]  # fmt: skip
    if not drawn:
        return handles
    values = [v for _, v in drawn]
    low = min(low, min(values) - 0.04 * span)
    high = max(high, max(values) + 0.04 * span)
    line = ax.axvline if vertical else ax.axhline
    shade = ax.axvspan if vertical else ax.axhspan
    for op, value in drawn:
        label = f"constraint {name} {op} {value:g}"
        handles.append(line(value, color=_BOUND, linestyle="--", linewidth=1.2, label=label))
        side = (value, high) if op == "≤" else (low, value)
        shade(*side, color=_BOUND, alpha=0.05, linewidth=0)
    set_(low, high)
    return handles


def pareto_plot(
    points: list[Point],
    x: Axis,
    y: Axis,
    chosen: int | None,
    reference: tuple[float, float] | None,
    hypervolume: float | None,
    path: Path,
    title: str,
) -> Path:
    """Every scored trial on two objectives: the front strong and joined by its steps (the
    region it dominates up to the reference point shaded: its hypervolume, with two
    objectives), dominated trials faded, infeasible ones as crosses, the tested one a star.
    With one objective (and constraints), `x` is the trial number and there is no front line."""
    fig, ax = _figure((9.5, 5.4))
    handles: list[Any] = []
    front = [p for p in points if p.on_front]
    dominated = [p for p in points if not p.on_front and p.feasible and p.completed]
    early = [p for p in points if not p.on_front and p.feasible and not p.completed]
    infeasible = [p for p in points if not p.feasible]
    two = x.mode is not None
    if two and front:
        line, region = _staircase(front, x, y, reference)
        if region:
            handles.append(
                ax.fill(
                    *zip(*region, strict=True),
                    color=_FRONT,
                    alpha=0.12,
                    linewidth=0,
                    label=f"dominated by the front (hypervolume {hypervolume:.3g})"
                    if hypervolume is not None
                    else "dominated by the front",
                )[0]
            )
        if len(line) > 1:
            ax.plot(*zip(*line, strict=True), color=_FRONT, linewidth=1.8, alpha=0.9, zorder=3)
    if dominated:
        handles.append(
            ax.scatter([p.x for p in dominated], [p.y for p in dominated], s=28, color=_DOMINATED,
                       alpha=0.45, linewidths=0, label=f"dominated ({len(dominated)})", zorder=2)
        )  # fmt: skip
    if early:
        handles.append(
            ax.scatter([p.x for p in early], [p.y for p in early], s=28, facecolors="none",
                       edgecolors=_DOMINATED, alpha=0.6, linewidths=1.0, zorder=2,
                       label=f"stopped early, at its last rung ({len(early)})")
        )  # fmt: skip
    if infeasible:
        handles.append(
            ax.scatter([p.x for p in infeasible], [p.y for p in infeasible], s=34, marker="x",
                       color=_INFEASIBLE, alpha=0.75, linewidths=1.4, zorder=2,
                       label=f"infeasible ({len(infeasible)})")
        )  # fmt: skip
    if front:
        handles.append(
            ax.scatter([p.x for p in front], [p.y for p in front], s=56, color=_FRONT,
                       edgecolors="#0b3c61", linewidths=0.8, zorder=4,
                       label=f"Pareto front ({len(front)})")
        )  # fmt: skip
        if len(front) <= _NUMBERED:
            for p in front:
                ax.annotate(str(p.trial), (p.x, p.y), xytext=(6, -3), textcoords="offset points",
                            fontsize=8, color="#0b3c61", zorder=5, ha="left", va="top")  # fmt: skip
    tested = [p for p in points if p.trial == chosen]
    if tested:
        handles.append(
            ax.scatter([tested[0].x], [tested[0].y], s=260, marker="*", color=_TESTED,
                       edgecolors="black", linewidths=0.9, zorder=6,
                       label=f"tested (trial {chosen})")
        )  # fmt: skip
    if two and reference is not None:
        handles.append(
            ax.scatter([reference[0]], [reference[1]], s=50, marker="s", facecolors="none",
                       edgecolors="#444444", linewidths=1.2, zorder=3, label="reference point")
        )  # fmt: skip
    if not points:
        ax.text(0.5, 0.5, "no trial reported every objective", ha="center", va="center",
                transform=ax.transAxes, color="#555555")  # fmt: skip
    ax.margins(0.06)
    ax.autoscale_view()
    handles += _bounds(ax, x, vertical=True) + _bounds(ax, y, vertical=False)
    ax.set_xlabel(x.label)
    ax.set_ylabel(y.label)
    ax.set_title(title, loc="left", fontsize=11)
    _plain_ticks(ax)
    ax.grid(alpha=0.3)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8,
                  frameon=False)  # fmt: skip
    return _save(fig, path)


def front_over_time_plot(
    steps: list[tuple[float, float, int]],
    end: float | None,
    xlabel: str,
    path: Path,
    title: str,
) -> Path:
    """The front's hypervolume (from the run's final reference point, so it only rises) after
    each feasible trial completed, against what had been spent by then: (x, volume, trial)."""
    fig, ax = _figure((8, 4.2))
    if steps:
        xs = [0.0] + [x for x, _, _ in steps]
        ys = [0.0] + [v for _, v, _ in steps]
        if end is not None and end > xs[-1]:
            xs.append(end)
            ys.append(ys[-1])
        ax.step(xs, ys, where="post", color=_FRONT, linewidth=1.8)
        ax.fill_between(xs, ys, step="post", color=_FRONT, alpha=0.08, linewidth=0)
        ax.scatter([x for x, _, _ in steps], [v for _, v, _ in steps], s=22, color=_FRONT,
                   zorder=3)  # fmt: skip
        if len(steps) <= _NUMBERED:
            for x, v, trial in steps:
                ax.annotate(str(trial), (x, v), xytext=(3, 4), textcoords="offset points",
                            fontsize=8, color="#0b3c61")  # fmt: skip
    else:
        ax.text(0.5, 0.5, "no feasible trial completed", ha="center", va="center",
                transform=ax.transAxes, color="#555555")  # fmt: skip
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("hypervolume of the front so far")
    ax.set_title(title, loc="left", fontsize=11)
    _plain_ticks(ax)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def front_plot_jobs(summary: dict[str, Any], folder: Path, label: str) -> dict[str, PlotJob]:
    """The two plots of a run of several objectives (`summary` is the run's, with its
    `objectives`), read but not yet drawn; none for a run of one metric alone."""
    from basht.report.console import energy_source, objective_labels

    objectives = summary.get("objectives")
    if not objectives:
        return {}
    names = [o["metric"] for o in objectives["objectives"]]
    modes = [o["mode"] for o in objectives["objectives"]]
    labels = objective_labels(summary)

    def bounds(metric: str) -> tuple[tuple[str, float], ...]:
        out = []
        for c in objectives.get("constraints") or []:
            if c["metric"] == metric:
                out += [(op, c[k]) for k, op in (("max", "≤"), ("min", "≥")) if c[k] is not None]
        return tuple(out)

    trials = objectives["trials"]
    if len(names) >= 2:
        x = Axis(labels[0], modes[0], bounds(names[0]))
        y = Axis(labels[1], modes[1], bounds(names[1]))
    else:  # one objective and constraints: the objective by trial
        x = Axis("trial", None)
        y = Axis(labels[0], modes[0], bounds(names[0]))
    points = [
        Point(
            t["trial"],
            t["values"][names[0]] if len(names) >= 2 else float(t["trial"]),
            t["values"][names[min(1, len(names) - 1)]],
            completed=t["state"] == "completed",
            feasible=t["feasible"],
            on_front=t["on_front"],
        )
        for t in trials
    ]
    reference = objectives.get("reference")
    ref = (reference[names[0]], reference[names[1]]) if reference and len(names) == 2 else None
    if len(names) == 1:
        heading = f"{names[0]} by trial (one objective, and constraints)"
    else:
        more = f" (the first two of {len(names)} objectives)" if len(names) > 2 else ""
        heading = f"Pareto front on {' and '.join(names[:2])}{more}"
    hv = objectives.get("hypervolume") if len(names) == 2 else None
    over = objectives.get("over_time") or []
    by_energy = bool(over) and all(o.get("energy_kwh") is not None for o in over)
    if by_energy:
        steps = [(o["energy_kwh"], o["hypervolume"], o["trial"]) for o in over]
        spent = [t["energy_kwh"] for t in trials if t.get("energy_kwh") is not None]
        end = sum(spent) if spent else None
        source = energy_source(summary) or "source unknown"
        xlabel = f"energy spent by the trials so far (kWh, {source})"
        against = "the energy the trials spent"
    else:
        steps = [(o["at_s"], o["hypervolume"], o["trial"]) for o in over]
        end = max((t["at_s"] for t in trials), default=None)
        xlabel = "seconds since the first report"
        against = "time"
    paths = {name: folder / f"{name}.png" for name in FRONT_PLOTS}
    return {
        "pareto": PlotJob(
            paths["pareto"],
            partial(
                pareto_plot,
                points,
                x,
                y,
                objectives.get("chosen"),
                ref,
                hv,
                paths["pareto"],
                f"{heading}\n{label}",
            ),
        ),
        "front_over_time": PlotJob(
            paths["front_over_time"],
            partial(
                front_over_time_plot,
                steps,
                end,
                xlabel,
                paths["front_over_time"],
                f"Hypervolume of the front against {against}\n{label}",
            ),
        ),
    }
