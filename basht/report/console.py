"""Console tables: the final result of a run and the list of stored runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

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
    parts: list[Any] = [head, phases]
    if summary.get("cluster"):
        parts.append(cluster_tables(summary["cluster"]))
    if summary.get("ray_nodes"):
        parts.append(ray_nodes_table(summary["ray_nodes"]))
    if summary["metrics"]:
        parts.append(metrics)
    if summary.get("energy"):
        parts.append(energy_table(summary["energy"]))
    return Group(*parts)


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
        title=f"{first['workers']} simulated workers, curves recorded in {curves}, "
        f"medians over {seeds} seeds" + ("" if target is None else f", target {target:.4g}")
    )

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
    for column in ["pruner", *middle, "trained to max", "wall (s)"]:
        table.add_column(column, justify="left" if column == "pruner" else "right")
    for row in rows:
        table.add_row(
            row["pruner"],
            *timing(row),
            f"{row['median_trained_to_max']:g}",
            f"{row['median_wall_s']:.2f}",
        )
    return table
