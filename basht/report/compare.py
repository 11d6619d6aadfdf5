"""The side-by-side table of a comparison: one column per system, one row per result or metric.

With several seeds a cell is the median over them and, in brackets, their range (min–max). The
same rows feed the console table, the HTML report and `benchmarks/peers.py`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from basht.report.comparison import Comparison
from basht.report.console import fmt
from basht.report.results import build_summary
from basht.report.runstats import time_to_target
from basht.store import Store

PHASES = ("deploy", "setup", "run", "collect_results", "test", "collect_metrics", "undeploy")
#: The seed's Table 2, then the totals it is built from, in this order.
TABLE2 = ("TWH", "CINT", "JCT", "OC", "WTT", "WTE", "WTC", "WR", "energy_total", "emissions_total")


@dataclass
class Row:
    """One line of the table: numbers per system (one per seed), or text where it is not a number."""

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
    """Each system's run summaries (as results.json has them), in seed order."""
    out: dict[str, list[dict[str, Any]]] = {s: [] for s in comparison.systems}
    for system, run_id in comparison.pairs():
        out.setdefault(system, []).append(build_summary(store, run_id))
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

    status = Row("runs", section="result")
    algorithm = Row("algorithm", section="result")
    for system in comparison.systems:
        entries = [r for r in comparison.runs if r.system == system]
        done = sum(r.status == "completed" for r in entries)
        status.text[system] = f"{done}/{len(entries)} completed"
        runs = by_system.get(system) or []
        algorithm.text[system] = (runs[0].get("algorithm") or "-") if runs else "-"
    rows += [status, algorithm]
    errors = Row("error", section="result")
    for system in comparison.systems:
        failed = [r for r in comparison.runs if r.system == system and r.error]
        if failed:
            errors.text[system] = f"seed {failed[0].seed}: {failed[0].error}"
    if errors.text:
        rows.append(errors)

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
    for system in comparison.systems:
        table.add_column(system, justify="right")
    section = None
    for row in rows:
        if section is not None and row.section != section:
            table.add_section()
        section = row.section
        table.add_row(row.label, *(row.cell(s) for s in comparison.systems))
    return table
