"""The side-by-side table of a comparison: one column per system (or file), one row per result
or metric; with several files, first the experiment settings in which they differ.

With several seeds a cell is the median over them and, in brackets, their range (min–max). The
same rows feed the console table, the HTML report and `benchmarks/peers.py`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table
from rich.text import Text

from basht.report.comparison import Comparison
from basht.report.console import energy_source, fmt
from basht.report.results import build_summary
from basht.report.runstats import time_to_target
from basht.store import Store
from basht.tune.pareto import hypervolume

PHASES = ("deploy", "setup", "run", "collect_results", "test", "collect_metrics", "undeploy")
#: The seed's Table 2, then the totals it is built from, in this order.
TABLE2 = ("TWH", "CINT", "JCT", "OC", "WTT", "WTE", "WTC", "WR", "energy_total", "emissions_total")


@dataclass
class Row:
    """One line of the table: numbers per column (one per seed), or text where it is not a number."""

    label: str
    values: dict[str, list[float]] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    section: str = "result"

    def cell(self, system: str) -> str:
        if system in self.text:
            return self.text[system]
        values = self.values.get(system) or []
        if not values:
            return "-"
        middle = statistics.median(values)
        if len(values) == 1:
            return fmt(middle)
        return f"{fmt(middle)} ({fmt(min(values))}–{fmt(max(values))})"

    def median(self, system: str) -> float | None:
        values = self.values.get(system) or []
        return statistics.median(values) if values else None


def summaries(store: Store, comparison: Comparison) -> dict[str, list[dict[str, Any]]]:
    """Each column's run summaries (as results.json has them), in seed order."""
    out: dict[str, list[dict[str, Any]]] = {c: [] for c in comparison.columns}
    for column, run_id in comparison.pairs():
        out.setdefault(column, []).append(build_summary(store, run_id))
    return out


def compare_rows(store: Store, comparison: Comparison) -> list[Row]:
    by_system = summaries(store, comparison)
    rows: list[Row] = []

    def add(label: str, section: str, get: Any) -> None:
        row = Row(label, section=section)
        for system, runs in by_system.items():
            row.values[system] = [v for v in (get(s) for s in runs) if v is not None]
        if any(row.values.values()):
            rows.append(row)

    if len(comparison.columns) > len(comparison.systems):  # several files: what differs
        rows += _differences(by_system)
    status = Row("runs", section="result")
    algorithm = Row("algorithm", section="result")
    for column in comparison.columns:
        entries = [r for r in comparison.runs if r.label == column]
        done = sum(r.status == "completed" for r in entries)
        status.text[column] = f"{done}/{len(entries)} completed"
        runs = by_system.get(column) or []
        algorithm.text[column] = (runs[0].get("algorithm") or "-") if runs else "-"
    rows += [status, algorithm]
    errors = Row("error", section="result")
    for column in comparison.columns:
        failed = [r for r in comparison.runs if r.label == column and r.error]
        if failed:
            errors.text[column] = f"seed {failed[0].seed}: {failed[0].error}"
    if errors.text:
        rows.append(errors)
    ended = Row("search ended", section="result")  # a target, a budget, the trial limit...
    for column, runs in by_system.items():
        reasons = list(dict.fromkeys(s["stop_reason"] for s in runs if s.get("stop_reason")))
        if reasons:
            ended.text[column] = "; ".join(reasons)
    if ended.text:
        rows.append(ended)

    first = next((s for runs in by_system.values() for s in runs), None)
    metric = first["best"]["metric"] if first else "value"
    mode = first["best"]["mode"] if first else "max"
    add(f"best validation {metric} ({mode})", "result", lambda s: s["best"]["value"])
    tests = list(
        dict.fromkeys(k for runs in by_system.values() for s in runs for k in s["test_metrics"])
    )
    for name in tests:
        add(f"test {name}", "result", lambda s, n=name: s["test_metrics"].get(n))
    if comparison.target is not None:
        rows.append(_time_to_target(store, comparison.target, metric, mode, by_system))
    rows += objective_rows(by_system)

    states = sorted({k for runs in by_system.values() for s in runs for k in s["trial_counts"]})
    add("trials", "trials", lambda s: float(sum(s["trial_counts"].values())))
    for state in states:
        add(f"trials {state}", "trials", lambda s, st=state: float(s["trial_counts"].get(st, 0)))

    for phase in PHASES:
        add(f"{phase} (s)", "phases", lambda s, p=phase: _phase(s, p))

    for name in TABLE2:
        unit = next(
            (
                s["metrics"][name]["unit"]
                for r in by_system.values()
                for s in r
                if name in s["metrics"]
            ),
            "",
        )
        add(f"{name} ({unit})" if unit else name, "metrics", lambda s, n=name: _metric(s, n))
    return rows


def _time_to_target(
    store: Store,
    target: float,
    metric: str,
    mode: str,
    by_system: dict[str, list[dict[str, Any]]],
) -> Row:
    """Always shown when there is a target: a run that never got there says "not reached" (and
    with several seeds, how many did), rather than the row going missing."""
    row = Row(f"time to {metric} {'≥' if mode == 'max' else '≤'} {target:g} (s)", section="result")
    for system, runs in by_system.items():
        times = [time_to_target(store, s["run_id"], target, mode) for s in runs]
        row.values[system] = [t for t in times if t is not None]
        if not runs:
            continue  # no run got as far as the store: "-", as in every other row
        if not row.values[system]:
            row.text[system] = "not reached"
        elif len(row.values[system]) < len(runs):
            row.text[system] = f"{row.cell(system)}, {len(row.values[system])}/{len(runs)} reached"
    return row


def objective_rows(by_column: dict[str, list[dict[str, Any]]]) -> list[Row]:
    """Runs of several objectives: the front's size, its hypervolume, and the energy the
    trials spent to reach it, so the table says which system spent what for which front.

    A run's own hypervolume is measured from its own reference point (the worst of its own
    trials), so two runs' are not comparable; here every run's front is measured from one
    point, each objective's worst among the runs' reference points, which the label states.
    """
    runs = [s["objectives"] for r in by_column.values() for s in r if s.get("objectives")]
    if not runs:
        return []
    kinds = {tuple((o["metric"], o["mode"]) for o in run["objectives"]) for run in runs}
    common = _common_reference(next(iter(kinds)), runs) if len(kinds) == 1 else None
    if len(kinds) > 1:
        label = "hypervolume (each run's own reference point: the objectives differ)"
    elif common is None:
        label = "hypervolume (no run completed a trial)"
    else:
        at = ", ".join(f"{metric} {fmt(value)}" for metric, value in common.items())
        own = {tuple(sorted(run["reference"].items())) for run in runs if run["reference"]}
        whose = "the runs' own" if len(own) == 1 else "the worst of the runs', for all"
        label = f"hypervolume (reference point {at}: {whose})"
    size = Row("Pareto front (trials)", section="objectives")
    volume = Row(label, section="objectives")
    spent = Row(_spent_label(by_column), section="objectives")
    for column, summaries_ in by_column.items():
        for summary in summaries_:
            objectives = summary.get("objectives")
            if not objectives:
                continue
            size.values.setdefault(column, []).append(float(len(objectives["front"])))
            value = (
                objectives["hypervolume"] if common is None else _front_volume(objectives, common)
            )
            volume.values.setdefault(column, []).append(value)
            energies = [
                t["energy_kwh"] for t in objectives["trials"] if t.get("energy_kwh") is not None
            ]
            if energies:
                spent.values.setdefault(column, []).append(sum(energies))
    return [row for row in (size, volume, spent) if row.values]


def _common_reference(
    kind: tuple[tuple[str, str], ...], runs: list[dict[str, Any]]
) -> dict[str, float] | None:
    """Each objective's worst value among the runs' reference points (None: no run has one)."""
    references = [o["reference"] for o in runs if o.get("reference")]
    if not references:
        return None
    worst = {}
    for metric, mode in kind:
        values = [r[metric] for r in references]
        worst[metric] = min(values) if mode == "max" else max(values)
    return worst


def _front_volume(objectives: dict[str, Any], reference: dict[str, float]) -> float:
    """The hypervolume of a run's front from `reference`, the objectives signed to minimise."""
    signs = {o["metric"]: -1.0 if o["mode"] == "max" else 1.0 for o in objectives["objectives"]}
    costs = [[signs[m] * p["values"][m] for m in signs] for p in objectives["front"]]
    if not costs:
        return 0.0
    return hypervolume(costs, [signs[m] * reference[m] for m in signs])


def _spent_label(by_column: dict[str, list[dict[str, Any]]]) -> str:
    sources = list(
        dict.fromkeys(
            energy_source(s) or "source unknown"
            for r in by_column.values()
            for s in r
            if s.get("objectives")
        )
    )
    return f"energy spent by trials (kWh, {', '.join(sources)}; Σ train_energy_kwh_spent)"


#: Keys of a stored experiment that differ between compared files by construction.
_NOT_SETTINGS = frozenset(("name", "seed", "system", "store"))


def _differences(by_column: dict[str, list[dict[str, Any]]]) -> list[Row]:
    """The experiment settings (key paths, Table 1's variables) in which the files differ."""
    flat = {
        column: _flatten({k: v for k, v in runs[0]["experiment"].items() if k not in _NOT_SETTINGS})
        for column, runs in by_column.items()
        if runs
    }
    keys = list(dict.fromkeys(k for settings in flat.values() for k in settings))
    rows = []
    for key in keys:
        shown = {column: _show(settings.get(key)) for column, settings in flat.items()}
        if len(set(shown.values())) > 1:
            rows.append(Row(key, text=shown, section="experiment"))
    return rows


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out |= _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return out
    return {prefix: value}


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(_show(v) for v in value)
    return fmt(value) if isinstance(value, float) else str(value)


def _phase(summary: dict[str, Any], name: str) -> float | None:
    durations = [p["duration_s"] for p in summary["phases"] if p["name"] == name]
    return sum(durations) if durations else None


def _metric(summary: dict[str, Any], name: str) -> float | None:
    entry = summary["metrics"].get(name)
    return None if entry is None else entry["value"]


def compare_table(comparison: Comparison, rows: list[Row]) -> Table:
    seeds = len(comparison.seeds)
    spread = f"; {seeds} seeds: median (min–max)" if seeds > 1 else ""
    table = Table(
        title=f"{comparison.id}: {comparison.experiment}{spread}",
        title_justify="left",
    )
    table.add_column("")
    for column in comparison.columns:
        table.add_column(column, justify="right")
    section = None
    for row in rows:
        if section is not None and row.section != section:
            table.add_section()
        section = row.section
        # Text, not markup: a setting or a run's error may hold "[/x]".
        table.add_row(Text(row.label), *(Text(row.cell(c)) for c in comparison.columns))
    return table
