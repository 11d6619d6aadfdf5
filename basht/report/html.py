"""One self-contained HTML file per run or comparison: its tables and its plots, images inline.

Nothing is fetched when the file is opened (no scripts, fonts or images from elsewhere), so it
can be mailed, archived or attached to a CI run as it is. A run's page also has the interactive
charts of `basht dashboard` (`basht.report.charts`): their data, the charting library and the
code that draws them are written into the page. Its plots (PNG) stay below them, for a reader
without JavaScript and for printing. Without matplotlib the tables are written alone, with a note
saying how to get the plots.
"""

from __future__ import annotations

import base64
import html
import json
import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from basht.report.charts import run_charts, script
from basht.report.compare import Row, compare_rows
from basht.report.comparison import Comparison
from basht.report.console import (
    ENERGY_COLUMNS,
    RAY_NODE_COLUMNS,
    SCHEDULE_NOTES,
    describe_workload,
    energy_rows,
    energy_source,
    fmt,
    front_columns,
    front_notes,
    front_rows,
    objective_labels,
    ray_node_rows,
    schedule_rows,
    trial_errors,
)
from basht.report.front_plots import FRONT_PLOTS
from basht.report.paths import check_writable
from basht.report.plan import (
    CLUSTER_TOTAL_COLUMNS,
    cluster_notes,
    cluster_stage_columns,
    cluster_stage_rows,
    cluster_title,
    cluster_total_rows,
)
from basht.report.results import build_summary
from basht.report.schedule_plots import SCHEDULE_PLOTS
from basht.store import Store

REPORT = "report.html"

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1100px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
h3 { font-size: 1rem; margin-bottom: .2rem; }
.meta { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { padding: .25rem .7rem; border-bottom: 1px solid #e3e3e3; text-align: left;
         vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; } tr.section td { border-top: 2px solid #bbb; }
figure { margin: 1rem 0 2rem; } figure img { max-width: 100%; height: auto; display: block; }
figcaption { color: #555; font-size: .9rem; }
details { margin: 1rem 0; border: 1px solid #ddd; border-radius: 4px; padding: .5rem 1rem; }
summary { cursor: pointer; font-weight: 600; }
.note { background: #fff8e1; padding: .5rem 1rem; border-left: 3px solid #f0b400; }
code { background: #f4f4f4; padding: 0 .2rem; }
"""

_CAPTIONS = {
    "best_so_far": "Best validation value reported so far, against seconds since the run phase "
    "began (one line per run).",
    "timeline": "Trials on their workers over time: white space is an idle worker; the colour is "
    "the state the trial ended in (light blue: a segment that ended in a pause; grey: one that "
    "an interruption cut short, run again when the run was resumed).",
    "energy": "Energy attributed to each trial, by the state it ended in.",
    "phases": "Latency of each of the seven Basht phases.",
}
_COMPARISON_CAPTIONS = {
    "best_so_far": "Best validation value so far against seconds since each run's run phase "
    "began, one colour per system (one line per seed).",
    "phases": "Latency of each phase, by system.",
    "energy": "Where the node's energy went, by system: trials by the state they ended in, the "
    "test, and idle energy (baseline, allocation, overhead).",
}


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _image(path: Path, alt: str, caption: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{_e(alt)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _table(
    head: Sequence[str],
    rows: Iterable[Sequence[Any]],
    numeric_from: int = 1,
    numeric_to: int | None = None,
) -> str:
    """Columns numeric_from up to (not including) numeric_to are numbers, aligned right; the
    text after them (a unit, a source) reads from the left, as on the console."""
    numeric = range(numeric_from, len(head) if numeric_to is None else numeric_to)
    out = ["<table>"]
    if any(head):  # a table of labels and values has no headings: no empty grey row either
        out += ["<thead><tr>", *(f"<th>{_e(h)}</th>" for h in head), "</tr></thead>"]
    out.append("<tbody>")
    for row in rows:
        cells = [
            f'<td class="num">{_e(c)}</td>' if i in numeric else f"<td>{_e(c)}</td>"
            for i, c in enumerate(row)
        ]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _page(title: str, meta: str, body: list[str]) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{_e(title)}</h1><p class="meta">{_e(meta)} · written {stamp}</p>'
        + "".join(body)
        + "</body></html>"
    )


def _plots_or_note(plots: dict[str, Path] | None, captions: dict[str, str], what: str) -> str:
    if plots is None:
        return (
            "<p class=\"note\">Plots need matplotlib: <code>pip install 'basht[plots]'</code>, "
            "then write this report again.</p>"
        )
    return "".join(
        _image(p, f"{what}: {name}", captions.get(name, name)) for name, p in plots.items()
    )


def charts_section(data: dict[str, Any]) -> list[str]:
    """The run's interactive charts: their data and the script that draws them, inline. A
    `<` in the data is escaped, so no value (a configuration's string) can end the script."""
    payload = json.dumps(data, allow_nan=False).replace("<", "\\u003c")
    code = script()
    if "</script" in code.lower():  # it would end the element early: a library update to check
        raise ValueError("the chart script holds '</script': it cannot be inlined")
    return [
        "<h2>Charts</h2>",
        '<div id="basht-charts"><p class="note">The interactive charts need JavaScript; the '
        "plots below show the same figures as images.</p></div>",
        f'<script type="application/json" id="basht-chart-data">{payload}</script>',
        f"<script>{code}</script>",
        "<script>BashtCharts.mount(document.getElementById('basht-charts'), "
        "JSON.parse(document.getElementById('basht-chart-data').textContent));</script>",
    ]


def run_sections(
    summary: dict[str, Any], plots: dict[str, Path] | None, charts: Sequence[str] = ()
) -> list[str]:
    """A run's result, phases, metrics and plots, as HTML sections; `charts` (the interactive
    charts' section) goes right after the result."""
    best = summary["best"]
    counts = summary["trial_counts"]
    head = [
        ("status", summary["status"] + (f" ({summary['error']})" if summary["error"] else "")),
        ("system", f"{summary['system']} / {summary['executor']}"),
        ("algorithm", fmt(summary.get("algorithm"))),
        ("workload", describe_workload(summary.get("workload"))),
        ("search space pS", fmt(summary.get("space_size"))),
        ("best trial", fmt(best["trial"])),
        ("best config", fmt(best["config"])),
        (f"best validation {best['metric']} ({best['mode']})", fmt(best["value"])),
        *((f"test {k}", fmt(v)) for k, v in summary["test_metrics"].items()),
        ("trials", ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"),
        *trial_errors(summary.get("trials", [])),
    ]
    if summary.get("stop_reason"):
        head.append(("search ended", summary["stop_reason"]))
    if live := (summary.get("measurement") or {}).get("prometheus"):
        head.append(("live metrics", live))
    # As on the console: a resumed run lists each attempt's phases, so say which were cut short.
    aborted = any(p["aborted"] for p in summary["phases"])
    phases = [
        (p["name"], f"{p['duration_s']:.3f}", *(["aborted" if p["aborted"] else "done"] * aborted))
        for p in summary["phases"]
    ]
    metrics = [
        (name, fmt(m["value"]), m["unit"], m["source"] or "")
        for name, m in summary["metrics"].items()
    ]
    own = (*FRONT_PLOTS, *SCHEDULE_PLOTS)  # shown in their sections
    front = None if plots is None else {k: p for k, p in plots.items() if k in FRONT_PLOTS}
    others = None if plots is None else {k: p for k, p in plots.items() if k not in own}
    return [
        "<h2>Result</h2>",
        _table(("", ""), head, numeric_from=2),
        *charts,
        *objectives_section(summary, front),
        *schedule_section(summary, None if plots is None else plots.get("schedule")),
        "<h2>Phases</h2>",
        _table(("phase", "duration (s)", *["ended"] * aborted), phases, numeric_to=2),
        *_cluster_sections(summary),
        "<h2>Metrics</h2>",
        _table(("metric", "value", "unit", "source"), metrics, numeric_to=2),
        "<h2>Energy by node</h2>",
        _table(ENERGY_COLUMNS, energy_rows(summary.get("energy", [])), numeric_from=3),
        "<h2>Plots</h2>",
        _plots_or_note(others, _CAPTIONS, summary["run_id"]),
    ]


def objectives_section(summary: dict[str, Any], plots: dict[str, Path] | None) -> list[str]:
    """A run of several objectives: its trials against the first two with the Pareto front, the
    front's table with its hypervolume, and the hypervolume as energy (or time) was spent.
    Nothing for a run of one metric alone."""
    objectives = summary.get("objectives")
    if not objectives:
        return []
    labels = objective_labels(summary)
    count = len(labels)
    plots = plots or {}
    out = [
        "<h2>Objectives</h2>",
        f"<p>{_e(count)} objective{'s' * (count != 1)}: {_e('; '.join(labels))}.</p>",
    ]
    if "pareto" in plots:
        out.append(_image(plots["pareto"], "Pareto front", _pareto_caption(labels)))
    rows = front_rows(objectives, config_chars=160)  # a page has room for more of it
    out.append("<h3>Pareto front</h3>")
    if rows:
        out.append(_table(front_columns(summary), rows, numeric_from=0, numeric_to=count + 1))
    else:
        out.append("<p>Empty: no completed trial kept the constraints.</p>")
    out += [f"<p>{_e(note[:1].upper() + note[1:])}.</p>" for note in front_notes(summary)]
    if "front_over_time" in plots:
        over = objectives.get("over_time") or []
        by_energy = bool(over) and all(o.get("energy_kwh") is not None for o in over)
        spent = (
            f"the energy all trials had spent by then (kWh, "
            f"{energy_source(summary) or 'source unknown'}); a flat stretch is energy that "
            "did not improve the front"
            if by_energy
            else "seconds since the first report (no energy was measured)"
        )
        caption = (
            "The front's hypervolume after each feasible trial completed (from the run's final "
            f"reference point, so it only rises), against {spent}."
        )
        out.append(_image(plots["front_over_time"], "hypervolume over time", caption))
    return out


_SCHEDULE_CAPTION = (
    "The grid's carbon intensity over the run's window (grey, left axis) and the workers the "
    "schedule allowed (green step line, right axis), each decision marked by its reason; grey "
    "bands are held stretches, where running trials paused at their next report (those that "
    "can checkpoint) and none started. The dashed red line is the deadline, the dotted blue one the end of the run "
    "phase (the work ended by then). Series time, UTC."
)


def schedule_section(summary: dict[str, Any], plot: Path | None) -> list[str]:
    """A carbon-aware run: its schedule drawn against the grid, and the console's table of its
    deadline, forecast, emissions and holds. Nothing for any other run."""
    rows = schedule_rows(summary)
    if not rows:
        return []
    out = ["<h2>Carbon-aware schedule</h2>"]
    if plot is not None:
        out.append(_image(plot, "carbon-aware schedule", _SCHEDULE_CAPTION))
    out += [_table(("", ""), rows, numeric_from=2), f"<p>{_e(SCHEDULE_NOTES)}</p>"]
    return out


def _pareto_caption(labels: list[str]) -> str:
    if len(labels) == 1:
        return (
            f"Every trial that reported {labels[0]}, by trial number: blue, the best feasible "
            "completed trial; grey, the others (hollow: stopped early, at the last rung they "
            "reached); red crosses, trials that broke a constraint; the star, the trial tested."
        )
    caption = (
        f"Every trial that reported all objectives, on {labels[0]} and {labels[1]}. Blue: the "
        "Pareto front of the feasible completed trials, joined by its steps; grey: dominated "
        "trials (hollow: stopped early, their values those of the last rung they reached, a "
        "measured cost projected to the full budget); red crosses: trials that broke a "
        "constraint; the star: the trial tested; dashed red: a constraint's bound."
    )
    if len(labels) == 2:
        return caption + (
            " The shaded region is what the front dominates up to the reference point (the "
            "square): its area is the hypervolume."
        )
    return caption + (
        f" The run has {len(labels)} objectives and this plots the first two: a front trial "
        "may look dominated here by one that is worse in an objective not shown, and no "
        f"region is shaded, as the hypervolume is over all {len(labels)}."
    )


def _cluster_sections(summary: dict[str, Any]) -> list[str]:
    """What the run's instances were billed: a plan's elastic cluster, or Ray's nodes."""
    sections = []
    if cluster := summary.get("cluster"):
        notes = "".join(f"<p>{_e(note)}</p>" for note in cluster_notes(cluster))
        sections += [
            f"<h2>{_e(cluster_title(cluster)).capitalize()}</h2>",
            _table(cluster_stage_columns(cluster), cluster_stage_rows(cluster), numeric_from=0),
            _table(CLUSTER_TOTAL_COLUMNS, cluster_total_rows(cluster)),
            notes,
        ]
    if nodes := summary.get("ray_nodes"):
        sections += [
            "<h2>Ray nodes billed (OC)</h2>",
            _table(RAY_NODE_COLUMNS, ray_node_rows(nodes)),
        ]
    return sections


def run_html(store: Store, run_id: str, plots: dict[str, Path] | None) -> str:
    summary = build_summary(store, run_id)
    meta = f"experiment {summary['experiment'].get('name')} · system {summary['system']}"
    charts = charts_section(run_charts(store, summary["run_id"]))
    return _page(f"Basht run {summary['run_id']}", meta, run_sections(summary, plots, charts))


def comparison_html(
    store: Store,
    comparison: Comparison,
    plots: dict[str, Path] | None,
    run_plots: dict[str, dict[str, Path]] | None,
) -> str:
    rows = compare_rows(store, comparison)
    seeds = ", ".join(str(s) for s in comparison.seeds)
    body = [
        "<h2>Side by side</h2>",
        _compare_table(comparison, rows),
        "<p>With several seeds a cell is the median and, in brackets, the range over seeds.</p>"
        if len(comparison.seeds) > 1
        else "",
        "<h2>Plots</h2>",
        _plots_or_note(plots, _COMPARISON_CAPTIONS, comparison.id),
        "<h2>Runs</h2>",
    ]
    for entry in comparison.runs:
        title = f"{entry.label}, seed {entry.seed}: {entry.run_id or '-'} ({entry.status})"
        if entry.run_id is None:
            body.append(f"<p>{_e(title)}: {_e(entry.error or '')}</p>")
            continue
        summary = build_summary(store, entry.run_id)
        own = None if run_plots is None else run_plots.get(entry.run_id)
        body.append(
            f"<details><summary>{_e(title)}</summary>"
            + "".join(run_sections(summary, own))
            + "</details>"
        )
    meta = f"experiment {comparison.experiment} · {', '.join(comparison.columns)}"
    meta += f" · seeds {seeds}"
    return _page(f"Basht comparison {comparison.id}", meta, body)


def _compare_table(comparison: Comparison, rows: list[Row]) -> str:
    out = ["<table><thead><tr><th></th>"]
    out += [f"<th>{_e(c)}</th>" for c in comparison.columns]
    out.append("</tr></thead><tbody>")
    section = None
    for row in rows:
        css = ' class="section"' if section is not None and row.section != section else ""
        section = row.section
        cells = "".join(f'<td class="num">{_e(row.cell(c))}</td>' for c in comparison.columns)
        out.append(f"<tr{css}><td>{_e(row.label)}</td>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _try_plots(write: Any, *args: Any) -> dict[str, Path] | None:
    """The plots, or None when matplotlib is not installed (the report says so)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    return write(*args)


def write_run_report(store: Store, run_id: str, out: Path | None = None) -> Path:
    """Plots into the run's folder, then `report.html` with everything inline; or, given `out`,
    the page there alone (its plots drawn in a scratch folder: the page holds them)."""
    from basht.report.plots import write_run_plots

    run = store.get_run(run_id)
    path = check_writable(Path(out or Path(run.results_dir) / REPORT))
    with tempfile.TemporaryDirectory(prefix="basht-plots-") as scratch:
        folder = Path(scratch) if out is not None else None
        plots = _try_plots(write_run_plots, store, run.id, folder)
        path.write_text(run_html(store, run.id, plots), encoding="utf-8")
    return path


def write_comparison_report(store: Store, comparison: Comparison, out: Path | None = None) -> Path:
    """Plots for the comparison and for each run, then the comparison's `report.html`."""
    from basht.report.plots import write_comparison_plots, write_run_plots

    folder = Path(comparison.folder)
    path = check_writable(Path(out or folder / REPORT))
    plots = _try_plots(write_comparison_plots, store, comparison.pairs(), folder, comparison.target)
    run_plots = None
    if plots is not None:
        run_plots = {run_id: write_run_plots(store, run_id) for _, run_id in comparison.pairs()}
    path.write_text(comparison_html(store, comparison, plots, run_plots), encoding="utf-8")
    return path
