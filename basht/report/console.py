"""Console tables: the final result of a run and the list of stored runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from basht.energy.shifting import iso_utc
from basht.report.plan import cluster_tables
from basht.store import RunRow


def fmt(value: Any, digits: int = 4) -> str:
    """A value as the tables show it: 4 significant digits, thousands grouped, `-` for none."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:,.0f}"
    return str(value)


_fmt = fmt


def result_tables(summary: dict[str, Any]) -> Group:
    """The final table: best configuration and value, test metrics, trials, phases and metrics."""
    best = summary["best"]
    head = Table(title=f"run {summary['run_id']}", show_header=False, title_justify="left")
    head.add_column(style="bold")
    head.add_column()

    def add(label: str, value: str | Text) -> None:
        # Text, not markup: a config value, a metric's name or an error may hold "[/x]".
        head.add_row(Text(label), value if isinstance(value, Text) else Text(value))

    add("status", summary["status"] + (f" ({summary['error']})" if summary["error"] else ""))
    add("system", f"{summary['system']} / {summary['executor']}")
    add("algorithm", _fmt(summary.get("algorithm")))
    add("workload", describe_workload(summary.get("workload")))
    add("search space pS", _fmt(summary.get("space_size")))
    add("best trial", _fmt(best["trial"]))
    add("best config", _fmt(best["config"]))
    add(f"best validation {best['metric']} ({best['mode']})", _fmt(best["value"]))
    for name, value in summary["test_metrics"].items():
        add(f"test {name}", _fmt(value))
    counts = summary["trial_counts"]
    add("trials", ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none")
    for label, reason in trial_errors(summary.get("trials", [])):
        add(label, reason)
    if summary.get("stop_reason"):
        add("search ended", summary["stop_reason"])
    # Paths and URLs are there to be copied: folded onto the next line, never cut short.
    add("results", Text(summary["results_dir"], overflow="fold"))
    if live := (summary.get("measurement") or {}).get("prometheus"):
        add("live metrics", Text(live, overflow="fold"))

    phases = Table(title="phases", title_justify="left")
    phases.add_column("phase")
    phases.add_column("duration (s)", justify="right")
    aborted = any(p["aborted"] for p in summary["phases"])
    if aborted:
        phases.add_column("ended")
    for p in summary["phases"]:
        ended = ["aborted" if p["aborted"] else "done"] if aborted else []
        phases.add_row(p["name"], f"{p['duration_s']:.3f}", *ended)

    metrics = Table(title="metrics", title_justify="left")
    metrics.add_column("metric")
    metrics.add_column("value", justify="right")
    metrics.add_column("unit")
    metrics.add_column("source")
    for name, m in summary["metrics"].items():
        metrics.add_row(name, _fmt(m["value"]), m["unit"], m["source"] or "")
    parts: list[Any] = [head]
    if summary.get("objectives"):
        parts.append(front_table(summary))
    if schedule_of(summary):
        parts.append(schedule_table(summary))
    parts.append(phases)
    if summary.get("cluster"):
        parts.append(cluster_tables(summary["cluster"]))
    if summary.get("ray_nodes"):
        parts.append(ray_nodes_table(summary["ray_nodes"]))
    if summary["metrics"]:
        parts.append(metrics)
    if summary.get("energy"):
        parts.append(energy_table(summary["energy"]))
    return Group(*parts)


# -- several objectives: the Pareto front --------------------------------------------------------

#: The unit of each metric Basht measures (a `_spent` one has its projection's unit).
_MEASURED_UNITS = {
    "train_energy_kwh": "kWh",
    "train_carbon_g": "gCO2eq",
    "train_cost_usd": "USD",
    "train_time_s": "s",
}
#: Measured metrics whose numbers come from the energy monitor, so carry its source.
_ENERGY_MEASURED = ("train_energy_kwh", "train_carbon_g")
#: A configuration is summed up in at most this many characters (results.json has it whole).
_CONFIG_CHARS = 72


def energy_source(summary: dict[str, Any]) -> str | None:
    """The run's energy sources as one label (`estimate`, `rapl+nvml`), or None if unrecorded."""
    sources = (summary.get("measurement") or {}).get("energy_sources") or []
    return "+".join(sources) or None


def objective_label(metric: str, mode: str | None, source: str | None) -> str:
    """An objective as tables and plots name it: its metric, its direction, and for a metric
    Basht measures its unit and, for energy and carbon, where the energy figure came from
    (an estimate is never shown as if measured): `train_energy_kwh (min; kWh, estimate)`."""
    base = metric.removesuffix("_spent")
    about = [_MEASURED_UNITS[base]] if base in _MEASURED_UNITS else []
    if base in _ENERGY_MEASURED:
        about.append(source or "source unknown")
    inner = "; ".join(x for x in (mode, ", ".join(about)) if x)
    return f"{metric} ({inner})" if inner else metric


def objective_labels(summary: dict[str, Any]) -> list[str]:
    source = energy_source(summary)
    return [
        objective_label(o["metric"], o["mode"], source) for o in summary["objectives"]["objectives"]
    ]


def short_config(config: dict[str, Any] | None, limit: int = _CONFIG_CHARS) -> str:
    """`lr=0.0238, hidden=71, optimizer=adam`: 3 significant digits, cut at `limit` chars."""
    if not config:
        return "-"
    text = ", ".join(f"{k}={fmt(v, 3)}" for k, v in config.items())
    return text if len(text) <= limit else text[: limit - 1].rstrip(", ") + "…"


def front_columns(summary: dict[str, Any]) -> tuple[str, ...]:
    return ("trial", *objective_labels(summary), "config")


def front_rows(
    objectives: dict[str, Any], config_chars: int = _CONFIG_CHARS
) -> list[tuple[str, ...]]:
    """The front's trials, best in the first objective first (so the rows read along the
    trade-off), the tested one said so."""
    names = [o["metric"] for o in objectives["objectives"]]
    first = objectives["objectives"][0]
    sign = -1.0 if first["mode"] == "max" else 1.0
    ordered = sorted(objectives["front"], key=lambda p: (sign * p["values"][names[0]], p["trial"]))
    return [
        (
            f"{p['trial']} (tested)" if p["trial"] == objectives["chosen"] else str(p["trial"]),
            *(fmt(p["values"][n]) for n in names),
            short_config(p["config"], config_chars),
        )
        for p in ordered
    ]


def _rule(objectives: dict[str, Any]) -> str:
    """The `choose` rule in words."""
    choose = objectives.get("choose") or "first"
    if isinstance(choose, dict):
        weights = ", ".join(fmt(w) for w in choose.get("weights") or [])
        return (
            f"choose: weights [{weights}] (the smallest weighted sum of the objectives, each "
            "normalised over the feasible completed trials)"
        )
    if objectives.get("scalarize"):
        return "choose: first (the lowest scalarised cost among the feasible completed trials)"
    first = objectives["objectives"][0]["metric"]
    return f"choose: first (the best {first} among the feasible completed trials)"


def hypervolume_line(objectives: dict[str, Any]) -> str:
    """The front's hypervolume and the point it is measured from."""
    reference = objectives.get("reference")
    if not reference:
        return "hypervolume 0: no completed trial to measure a front from"
    at = ", ".join(f"{name} {fmt(value)}" for name, value in reference.items())
    return (
        f"hypervolume {fmt(objectives['hypervolume'])}, from the reference point {at} "
        "(each objective's worst value among the completed trials, 10 % of their range further)"
    )


def front_notes(summary: dict[str, Any]) -> list[str]:
    """What the front table's caption says: its hypervolume and reference point, the trial
    tested and by which rule, and the constraints kept."""
    objectives = summary["objectives"]
    chosen = objectives.get("chosen")
    on_front = any(p["trial"] == chosen for p in objectives["front"])
    if chosen is None:
        tested = "no trial was tested"
    else:
        tested = f"tested: trial {chosen}, by the rule {_rule(objectives)}"
        if not on_front:
            tested += "; not on the front, as no completed trial kept the constraints"
    notes = [hypervolume_line(objectives), tested]
    bounds = [
        " and ".join(
            f"{c['metric']} {op} {fmt(c[key])}"
            for key, op in (("min", "≥"), ("max", "≤"))
            if c.get(key) is not None
        )
        for c in objectives.get("constraints") or []
    ]
    if bounds:
        notes.append(f"constraints: {'; '.join(bounds)}")
    return notes


def front_table(summary: dict[str, Any]) -> Table:
    """The Pareto front of a run of several objectives, with its hypervolume below."""
    objectives = summary["objectives"]
    rows = front_rows(objectives)
    empty = "" if rows else " (empty: no completed trial kept the constraints)"
    table = Table(
        title=f"Pareto front{empty}",
        title_justify="left",
        caption=Text("\n".join(front_notes(summary))),  # Text: a metric may hold "[/x]"
        caption_justify="left",
    )
    *numbers, config = front_columns(summary)
    for i, column in enumerate(numbers):
        # Headings as Text, not markup (a metric may hold "[/x]"); a heading may wrap, a number
        # never does (nor is it squeezed out by the config).
        widest = max((len(row[i]) for row in rows), default=1)
        table.add_column(Text(column), justify="right", min_width=min(max(widest, 6), 14))
    # One line a trial, in what room is left: the configuration is a reminder of the trial
    # (results.json has it whole).
    table.add_column(Text(config), min_width=10)
    for *values, described in rows:
        cut = Text(described, no_wrap=True, overflow="ellipsis")
        table.add_row(*(Text(cell) for cell in values), cut)
    return table


# -- a carbon-aware schedule ---------------------------------------------------------------------

#: The gate's reason for a decision that holds the work back (`basht.energy.shifting.Decision`).
HELD = "dirty: held"


def schedule_of(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The run's carbon-aware schedule (`measurement.schedule`), or None for any other run."""
    schedule = (summary.get("measurement") or {}).get("schedule")
    return schedule if isinstance(schedule, dict) and schedule.get("carbon_aware") else None


def span(seconds: float) -> str:
    """A length of (series) time in the unit that reads best: `45 s`, `12 min`, `3.2 h`, `2.5 d`."""
    seconds = abs(seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 86400:.3g} d"


def schedule_end(summary: dict[str, Any]) -> float | None:
    """When the run's work ended, in series time: the end of the run phase of the attempt that
    wrote the schedule (the last), mapped onto the series from the schedule's `start` (the
    series time when that run phase began) at `time_scale` series seconds a second. None when
    the summary has no such phase. Its last trial ended at the latest then, so a deadline this
    meets was met by the work."""
    schedule = schedule_of(summary)
    runs = [p for p in summary.get("phases") or [] if p.get("name") == "run"]
    if schedule is None or not runs or schedule.get("start") is None:
        return None
    last = max(runs, key=lambda p: (p.get("attempt") or 0, p["start"]))
    scale = schedule.get("time_scale") or 1.0
    return schedule["start"] + (last["end"] - last["start"]) * scale


def held_periods(schedule: dict[str, Any], end: float | None) -> list[tuple[float, float]]:
    """The stretches of series time the gate held the work back: from each hold decision to
    the next decision (or the work's end)."""
    decisions = schedule.get("decisions") or []
    periods = []
    for i, d in enumerate(decisions):
        if d.get("reason") != HELD:
            continue
        until = decisions[i + 1]["at"] if i + 1 < len(decisions) else end
        if until is not None and until > d["at"]:
            periods.append((d["at"], until))
    return periods


def deadline_met(summary: dict[str, Any]) -> str:
    """Whether the work ended by the deadline, in words, with when it ended (series time)."""
    schedule = schedule_of(summary)
    end = schedule_end(summary)
    if schedule is None or end is None or schedule.get("deadline") is None:
        return "unknown (no run phase recorded)"
    left = schedule["deadline"] - end
    if left >= 0:
        return f"yes: the work ended {iso_utc(end)}, {span(left)} early"
    return f"no: the work ended {iso_utc(end)}, {span(left)} late"


def _g(value: Any) -> str:
    return "-" if value is None else f"{fmt(value)} gCO2eq"


def _percent(value: Any) -> str:
    return "-" if value is None else f"{value:.1f} %"


def schedule_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The schedule as (label, value) rows, the console's and the HTML report's; none for a
    run that was not carbon-aware. Times are the series' (UTC), as the deadline is."""
    schedule = schedule_of(summary)
    if schedule is None:
        return []
    source = energy_source(summary) or "source unknown"
    decisions = schedule.get("decisions") or []
    end = schedule_end(summary)
    held = held_periods(schedule, end)
    holds = sum(d.get("reason") == HELD for d in decisions)
    held_s = sum(b - a for a, b in held)
    forecast = str(schedule.get("forecast") or "-").split(" of ", 1)[0]
    scale = schedule.get("time_scale") or 1.0
    start = schedule.get("start")
    window = "-" if start is None else f"from {iso_utc(start)}"
    if scale != 1.0:
        window += f", replayed at {scale:g} series seconds a second"
    saving = schedule.get("saving_percent")
    saved = "-" if saving is None else f"{_percent(saving)} ({_g(schedule.get('saving_g'))})"
    deadline = schedule.get("deadline")
    return [
        ("deadline", "-" if deadline is None else iso_utc(deadline)),
        ("deadline met", deadline_met(summary)),
        ("series time", window),
        ("workers", f"up to {fmt(schedule.get('max_workers'))}"),
        ("forecast", forecast),
        ("carbon intensity", str(schedule.get("intensity") or "-")),
        (f"emissions as run ({source})", _g(schedule.get("emissions_g"))),
        (
            "carbon-agnostic",
            f"- ({schedule['accounting']})"
            if schedule.get("accounting")
            else _g(schedule.get("agnostic_emissions_g")),
        ),
        ("oracle", _g(schedule.get("oracle_emissions_g"))),
        ("saving against carbon-agnostic", saved),
        ("share of the oracle's saving", _percent(schedule.get("oracle_share_percent"))),
        (
            "hold decisions",
            f"{holds} of {len(decisions)} decisions"
            + (f", held {span(held_s)} of series time" if held else ""),
        ),
    ]


#: What the schedule table's figures mean (`basht.bench.carbon_schedule.schedule_summary`).
SCHEDULE_NOTES = (
    "Emissions are the trials' own, over the carbon series. Carbon-agnostic: the same work "
    "started at once at full width. Oracle: the least any schedule knowing the series could "
    "emit with the same work, deadline and workers. Times are series time (UTC)."
)


def schedule_table(summary: dict[str, Any]) -> Table:
    """A carbon-aware run's schedule: its deadline and whether it was met, the forecast, the
    emissions as run against carbon-agnostic and the oracle, and how often it held back."""
    table = Table(
        title="carbon-aware schedule",
        show_header=False,
        title_justify="left",
        caption=Text(SCHEDULE_NOTES),
        caption_justify="left",
    )
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in schedule_rows(summary):
        table.add_row(Text(label), Text(value))  # Text: a file name may hold "[/x]"
    return table


#: Reasons shown at most; results.json keeps every trial's.
_REASONS_SHOWN = 5
#: Trial numbers shown at most beside one reason.
_TRIALS_SHOWN = 8


def trial_errors(trials: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Why trials failed (or were cut short), a row per reason with the trials it ended: a count
    of failed trials alone sends the user to results.json to learn why."""
    ended: dict[tuple[str, str], list[int]] = {}
    for trial in trials:
        if trial.get("error"):
            ended.setdefault((trial["state"], trial["error"]), []).append(trial["trial"])
    rows = [
        (f"{state} ({_trial_numbers(numbers)})", why) for (state, why), numbers in ended.items()
    ]
    if len(rows) > _REASONS_SHOWN:
        more = len(rows) - _REASONS_SHOWN + 1
        rows[_REASONS_SHOWN - 1 :] = [("…", f"{more} more reasons, in results.json")]
    return rows


def _trial_numbers(numbers: list[int]) -> str:
    """`trial 3`, `trials 0, 4`, or the first few of many and how many more."""
    shown = ", ".join(str(n) for n in numbers[:_TRIALS_SHOWN])
    if (more := len(numbers) - _TRIALS_SHOWN) > 0:
        shown += f" and {more} more"
    return f"trial {shown}" if len(numbers) == 1 else f"trials {shown}"


def describe_workload(workload: dict[str, Any] | None) -> str:
    """Table 1's t, ts, m, ta in one line: `digits-mlp: dataset (0.9 MB); model; training`."""
    if not workload:
        return "-"
    parts = [workload.get("dataset"), workload.get("model"), workload.get("training")]
    size = workload.get("dataset_mb")
    if parts[0] and size:
        parts[0] = f"{parts[0]} ({size:.3g} MB)"
    described = "; ".join(p for p in parts if p)
    return f"{workload['name']}: {described}" if described else workload["name"]


RAY_NODE_COLUMNS = ("node", "attempt", "CPUs", "GPUs", "seconds", "USD")


def ray_node_rows(nodes: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """The Ray nodes OC bills, each one instance for its time in the job, as tables show them."""
    return [
        (n["node"], str(n["attempt"]), _fmt(n["cpus"]), _fmt(n["gpus"]),
         f"{n['lifetime_s']:.1f}", _fmt(n["billed_usd"]))
        for n in nodes
    ]  # fmt: skip


def ray_nodes_table(nodes: list[dict[str, Any]]) -> Table:
    table = Table(title="Ray nodes billed (OC)", title_justify="left")
    for column in RAY_NODE_COLUMNS:
        table.add_column(column, justify="left" if column == "node" else "right")
    for row in ray_node_rows(nodes):
        table.add_row(*row)
    return table


ENERGY_COLUMNS = ("node", "component", "source", "trials (kWh)", "idle (kWh)", "test (kWh)")


def energy_rows(energy: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """Each node's components, as the energy tables show them."""
    return [
        (e["node"], e["component"], e["source"])
        + tuple(_fmt(e[k]) for k in ("trials_kwh", "idle_kwh", "test_kwh"))
        for e in energy
    ]


def energy_table(energy: list[dict[str, Any]]) -> Table:
    table = Table(title="energy by node", title_justify="left")
    for i, column in enumerate(ENERGY_COLUMNS):
        table.add_column(column, justify="right" if i >= 3 else "left")
    for row in energy_rows(energy):
        table.add_row(*row)
    return table


def runs_table(runs: Sequence[RunRow]) -> Table:
    # No rules and short headers, so that a run id fits whole in 80 columns: it is there to
    # be copied. (The id holds the full start time; the column gives it at a glance.)
    table = Table(
        title="stored runs (times in UTC)",
        title_justify="left",
        box=None,
        pad_edge=False,
        collapse_padding=True,  # one space between columns
        header_style="bold underline",
    )
    table.add_column("run", no_wrap=True, min_width=max((len(r.id) for r in runs), default=3))
    for column in ("system", "status", "started", "best", "trial"):
        table.add_column(column, no_wrap=True)
    for run in runs:
        table.add_row(
            run.id,
            run.system,
            run.status,
            f"{run.started_at:%m-%d %H:%M}",
            _fmt(run.best_value),
            _fmt(run.best_trial),
        )
    return table


def print_result(summary: dict[str, Any], console: Console | None = None) -> None:
    (console or Console()).print(result_tables(summary))


def simulation_table(rows: list[dict[str, Any]], curves: str) -> Table:
    """`basht simulate`: one row per pruner, virtual seconds, medians over the seeds. With a
    target, how many seeds reached it and when; without, when the runs ended."""
    first = rows[0]
    target, seeds = first["target"], len(first["seeds"])
    table = Table(
        title=f"{first['workers']} simulated workers, curves from {curves}, "
        f"medians over {seeds} seeds" + ("" if target is None else f", target {target:.4g}")
    )
    with_regret = "median_regret" in first

    def timing(row: dict[str, Any]) -> list[str]:
        if target is None:
            return [fmt(row["median_best_value"]), fmt(row["median_makespan_s"])]
        to_target = row["median_time_to_target_s"]
        reached = "never" if to_target is None else fmt(to_target)
        return [f"{row['reached']}/{seeds}", reached, fmt(row["median_best_value"])]

    middle = (
        ["best value", "run ends (virtual s)"]
        if target is None
        else ["reached", "to target (virtual s)", "best value"]
    )
    regret = ["regret", "normalised regret"] if with_regret else []
    for column in ["pruner", *middle, *regret, "trained to max", "wall (s)"]:
        table.add_column(column, justify="left" if column == "pruner" else "right")
    for row in rows:
        regrets = (
            [fmt(row["median_regret"]), fmt(row["median_normalised_regret"])] if with_regret else []
        )
        table.add_row(
            row["pruner"],
            *timing(row),
            *regrets,
            f"{row['median_trained_to_max']:g}",
            f"{row['median_wall_s']:.2f}",
        )
    if with_regret:
        table.caption = (
            f"regret: below the best val_accuracy of {first['optimum']:.4g} that a large random "
            "sample of the surrogate reaches; normalised by that sample's best-to-worst span"
        )
    return table
