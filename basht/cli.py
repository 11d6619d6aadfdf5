"""The `basht` command line: parses arguments and prints; the work happens in the library."""

from __future__ import annotations

import functools
import importlib.machinery
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from basht.bso.cli import app as bso_app
from basht.errors import BashtError, RunInterrupted

if TYPE_CHECKING:
    from basht.bench import RunResult
    from basht.report.plotter import Plotter

app = typer.Typer(
    name="basht",
    help="Sustainable, resource-aware hyperparameter tuning, and the benchmark that measures it.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",  # paragraphs reflow to the terminal; `code` shows as code
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)
app.add_typer(bso_app, name="bso")

StoreOption = Annotated[
    str, typer.Option("--store", help="SQLAlchemy URL of the store.", show_default=True)
]


PlotsOption = Annotated[
    bool,
    typer.Option(
        "--plots/--no-plots",
        envvar="BASHT_PLOTS",
        help="Write the run's plots beside results.json (with matplotlib).",
    ),
]


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="Experiment file (YAML or JSON).")],
    results: Annotated[
        Path, typer.Option(help="Folder for the results: one subfolder per run, named by its id.")
    ] = Path("results"),
    store: Annotated[str | None, typer.Option(help="Override the file's `store` URL.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live progress.")] = False,
    plan: Annotated[
        Path | None,
        typer.Option(help="Run on an elastic cluster that follows this plan (basht plan --json)."),
    ] = None,
    replan: Annotated[
        bool,
        typer.Option(
            "--replan",
            help="With a plan: plan the remaining stages again at each barrier, from the time "
            "left and the trial times seen.",
        ),
    ] = False,
    plots: PlotsOption = True,
) -> None:
    """Run the whole benchmark lifecycle for FILE and print the results."""
    plotter = _start_plotter() if plots else None  # first: it imports while the run starts
    from basht.bench import run_benchmark
    from basht.experiment import load_experiment, with_plan

    try:
        _importable_next_to(file)
        experiment = load_experiment(file)
        if plan is not None or replan:
            experiment = with_plan(experiment, plan, replan=replan)
        if store is not None:
            experiment = experiment.model_copy(update={"store": store})
        go = functools.partial(run_benchmark, experiment, results_root=results)
        _lifecycle(go, experiment.store, quiet=quiet, plots=plots, plotter=plotter)
    finally:
        if plotter is not None:
            plotter.close()


def _lifecycle(
    go: Callable[..., RunResult],
    store_url: str,
    *,
    quiet: bool,
    plots: bool,
    plotter: Plotter | None,
) -> None:
    """`go` (a run, or a resumed one) with live progress, then its results and plots, as `run`
    and `resume` show them; exit code 1 unless it completed."""
    from basht.report import print_result
    from basht.report.progress import LiveProgress, QuietProgress

    stored = _plots_once_stored(plotter, store_url)
    try:
        if quiet:  # still says where live metrics are served (measure.prometheus_port)
            result = go(on_update=QuietProgress(console), on_stored=stored)
        else:
            with LiveProgress(console) as progress:
                # also prints `metrics: URL` once they are served
                result = go(on_update=progress, on_phase=progress.on_phase, on_stored=stored)
    except RunInterrupted as err:
        _interrupted(err)
    print_result(result.summary, console)  # while the plotter draws
    if plots:  # of the whole run, every attempt
        _write_plots(store_url, result.run_id, plotter)
        from basht.track import send_plots

        send_plots(store_url, result.run_id)  # to MLflow, when the run went there
    if plotter is not None:
        plotter.close()
    _done_and_closed()  # the runner closed the store; the workers and the plotter are gone
    if result.status != "completed":
        raise typer.Exit(1)


def _importable_next_to(file: Path) -> None:
    """Modules next to an experiment file (a LightningModule, a data loader) import as the file
    names them, wherever basht runs from: its folder goes on the import path, here and (through
    PYTHONPATH) in every worker and Ray process the run starts."""
    import os

    folder = str(Path(file).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([folder, *filter(None, paths)])


def _say_path(line: str) -> None:
    """A line that ends in a path to copy: whole, never wrapped (nor read as markup)."""
    console.print(escape(line), soft_wrap=True, highlight=False)


def _start_plotter() -> Plotter | None:
    """The process that draws the run's plots, started now so that it has imported matplotlib
    by the time the run ends (None without matplotlib, or if it cannot start: then the plots
    are drawn here, after the run)."""
    from basht.report.plotter import Plotter

    try:
        return Plotter.start()
    except Exception as err:
        logging.getLogger(__name__).debug("no plotter process (%s): plots drawn here", err)
        return None


def _plots_once_stored(plotter: Plotter | None, store_url: str) -> Callable[[str, str], None]:
    """The runner's `on_stored`: what a completed run's plots show is read from the store as
    soon as the run is stored, and the plotter draws them while the results are written and
    printed (if it cannot, `_write_plots` draws them here, or says why not)."""

    def stored(run_id: str, status: str) -> None:
        if plotter is None or status != "completed":
            return
        from basht.report.plots import run_plot_jobs
        from basht.store import Store

        try:
            store = Store(store_url, create=False)
            try:
                plotter.request(run_plot_jobs(store, run_id))
            finally:
                store.close()
        except Exception as err:  # `_write_plots` tries here, and says what is wrong
            logging.getLogger(__name__).debug("plots not handed to the plotter: %s", err)

    return stored


def _write_plots(store_url: str, run_id: str, plotter: Plotter | None = None) -> None:
    """The run's plots beside its results.json, when matplotlib is there; never fails the run.
    Drawn by `plotter` when it was asked for them, else here."""
    import importlib.util

    try:
        if plotter is not None and plotter.asked:
            plots = plotter.result()
        elif importlib.util.find_spec("matplotlib") is None:
            return
        else:
            from basht.report.plots import write_run_plots
            from basht.store import Store

            opened = Store(store_url)
            try:
                plots = write_run_plots(opened, run_id)
            finally:
                opened.close()
    except Exception as err:  # a plot is a view; the run and its records are what matter
        logging.getLogger(__name__).warning("plots not written: %s", err)
        return
    console.print(f"[dim]plots: {', '.join(p.name for p in plots.values())}[/dim]")


@app.command()
def compare(
    files: Annotated[
        list[Path],
        typer.Argument(help="Experiment files (YAML or JSON); several compare what differs."),
    ],
    systems: Annotated[
        str | None,
        typer.Option(
            help="Systems to run, comma-separated: native, optuna, raytune, synetune "
            "(default: native, optuna and raytune for one file, native for several)."
        ),
    ] = None,
    repeat: Annotated[
        int,
        typer.Option(
            min=1,
            max=1000,  # each is a whole run per system; more is a typo, and its seeds a list
            help="Seeds per system (seed, seed+1, ...); cells show median (range).",
        ),
    ] = 1,
    target: Annotated[
        float | None,
        typer.Option(help="Report each run's time to reach this value (default: search.target)."),
    ] = None,
    results: Annotated[
        Path, typer.Option(help="Folder for the results: one subfolder per run and per comparison.")
    ] = Path("results"),
    store: Annotated[str | None, typer.Option(help="Override the file's `store` URL.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live progress.")] = False,
) -> None:
    """Run FILE(s) on each system and compare them side by side.

    Each run is fully undeployed before the next. With several files the table shows the
    settings they differ in, and the outcome."""
    import math

    from basht.bench import run_benchmark
    from basht.bench.preflight import preflight
    from basht.bench.systems.compare import parse_systems, run_comparison
    from basht.experiment import Experiment, load_experiment
    from basht.report.compare import compare_rows, compare_table
    from basht.report.html import write_comparison_report
    from basht.report.progress import LiveProgress, QuietProgress
    from basht.store import Store

    for file in files:
        _importable_next_to(file)
    experiments = [load_experiment(file) for file in files]
    if store is not None:
        experiments = [e.model_copy(update={"store": store}) for e in experiments]
    if systems is None:
        systems = "native" if len(experiments) > 1 else "native,optuna,raytune"
    chosen = parse_systems(systems)
    # What would fail every run fails now, in one line, before any run starts or is stored.
    if target is not None and not math.isfinite(target):
        raise BashtError(f"--target: must be a finite number, got {target}")
    for experiment in experiments:
        preflight(experiment)

    def run_one(exp: Experiment, root: Path) -> RunResult:
        name = f"{exp.name} · " if len(experiments) > 1 else ""
        console.rule(f"{name}{exp.system} · seed {exp.seed}")
        if quiet:
            return run_benchmark(exp, results_root=root, on_update=QuietProgress(console))
        with LiveProgress(console) as progress:
            return run_benchmark(
                exp, results_root=root, on_update=progress, on_phase=progress.on_phase
            )

    comparison = run_comparison(
        experiments, chosen, repeat=repeat, target=target, results_root=results, run_one=run_one
    )
    stored = Store(experiments[0].store)
    console.print(compare_table(comparison, compare_rows(stored, comparison)))
    page = write_comparison_report(stored, comparison)
    _say_path(f"comparison {comparison.id}\nreport: {page}")
    if any(r.status != "completed" for r in comparison.runs):
        raise typer.Exit(1)


@app.command()
def resume(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN", help="Run id, a unique prefix, or `latest`.")
    ],
    store: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL of the store [default: the one the run's results folder names, "
            "else sqlite:///basht.db]."
        ),
    ] = None,
    results: Annotated[
        Path, typer.Option(help="Folder the run's results folder is in (where its store is named).")
    ] = Path("results"),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live progress.")] = False,
    plots: PlotsOption = True,
) -> None:
    """Continue an interrupted run: finished trials are kept, the algorithm picks up where it was.

    RUN may also be the run's results folder. Without `--store`, the store is the one the run
    was started with (its results folder names it)."""
    plotter = _start_plotter() if plots else None  # first: it imports while the run starts
    from basht.bench import resume_benchmark
    from basht.bench.driver import locate_run

    run_id, found = locate_run(run_id, results)
    store = store or found or "sqlite:///basht.db"
    try:
        go = functools.partial(resume_benchmark, run_id, store)
        _lifecycle(go, store, quiet=quiet, plots=plots, plotter=plotter)
    finally:
        if plotter is not None:
            plotter.close()


@app.command()
def validate(file: Annotated[Path, typer.Argument(help="Experiment file (YAML or JSON).")]) -> None:
    """Check FILE without running anything; exit code 2 with one line on the first problem.

    Checks the schema and what a run would resolve: workload, params and space keys, carbon
    zone, price, store URL."""
    from basht.bench.preflight import preflight
    from basht.experiment import load_experiment

    _importable_next_to(file)
    experiment = load_experiment(file)
    preflight(experiment)
    s = experiment.search
    if experiment.plan is None:
        resources = f"{experiment.resources.workers} workers"
    else:  # the plan, not resources.workers, sets the cluster
        stages = " ".join(str(n) for n in experiment.plan.plan)
        plan = experiment.plan
        ways = [
            ", re-planned at each barrier" * plan.replan,
            ", pre-provisioned" * plan.preprovision,
        ]
        resources = f"plan {stages} (instances per stage{''.join(ways)})"
    console.print(
        f"{file}: ok — {experiment.name}: workload {experiment.workload.name}, "
        f"{len(experiment.search_space)} parameters, pS = {experiment.space_size}, "
        f"sampler {s.sampler}, pruner {s.pruner}, {resources}",
        soft_wrap=True,  # one line, also when piped
    )


@app.command("runs")
def list_runs(
    store: StoreOption = "sqlite:///basht.db",
    limit: Annotated[
        # A database's LIMIT takes a 64-bit integer; a larger one was a traceback.
        int, typer.Option(min=1, max=1_000_000, help="Show at most this many.")
    ] = 50,
) -> None:
    """List the runs in the store, newest first."""
    from basht.report import runs_table
    from basht.store import Store

    console.print(runs_table(Store(store, create=False).list_runs(limit)))


@app.command()
def report(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="Run id, a unique prefix of it, or `latest`; or a comparison (`compare-…`).",
        ),
    ],
    store: StoreOption = "sqlite:///basht.db",
    as_json: Annotated[bool, typer.Option("--json", help="Print results.json instead.")] = False,
    as_html: Annotated[
        bool, typer.Option("--html", help="Write one self-contained HTML file with the plots.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Where --html writes (default: beside the results).")
    ] = None,
    results: Annotated[Path, typer.Option(help="Where comparisons are kept.")] = Path("results"),
) -> None:
    """Print the stored results of RUN, or write them as HTML (--html)."""
    from basht.report import build_summary, print_result
    from basht.report.comparison import is_comparison_ref
    from basht.store import Store

    if as_json and as_html:
        raise BashtError("--json and --html: give one (--json prints, --html writes a page)")
    if out is not None and not as_html:
        raise BashtError(f"--out {out}: only --html writes a file; give --html too")
    if is_comparison_ref(run_id):
        _report_comparison(run_id, store, results, as_json, as_html, out)
        return
    if as_html:
        from basht.report.html import write_run_report

        _say_path(f"report: {write_run_report(Store(store, create=False), run_id, out)}")
        return
    summary = build_summary(Store(store, create=False), run_id)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        print_result(summary, console)


@app.command()
def dashboard(
    store: StoreOption = "sqlite:///basht.db",
    port: Annotated[int, typer.Option(help="Port to serve on (0: any free port).")] = 8765,
    host: Annotated[
        str, typer.Option(help="Address to bind; 127.0.0.1 keeps it to this machine.")
    ] = "127.0.0.1",
    results: Annotated[
        Path, typer.Option(help="Where comparisons are kept (they are listed too).")
    ] = Path("results"),
) -> None:
    """Serve a local web page of the store's runs, each drawn live while it runs, until Ctrl-C.

    Read-only: the store is never written. Interactive charts of a run's trials, best value so
    far, workers, energy and carbon against its budgets, Pareto front and Table 2 metrics."""
    import contextlib

    from basht.dashboard import open_dashboard
    from basht.store.urls import shown_url

    served = open_dashboard(store, host, port, results)
    local = host in ("127.0.0.1", "localhost", "::1")
    reach = "this machine only" if local else "reachable from other machines: all can see every run"
    console.print(
        f"basht dashboard: {served.url} ({reach}); store {shown_url(store)}, read-only; "
        "Ctrl-C to stop",
        highlight=False,
        soft_wrap=True,
    )
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn stops, then raises Ctrl-C again
        served.serve()
    console.print("dashboard stopped")


@app.command()
def curves(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN", help="Run id, a unique prefix of it, or `latest`.")
    ],
    out: Annotated[
        Path, typer.Option(help="The table to write (JSON; gzipped when it ends in .gz).")
    ],
    store: StoreOption = "sqlite:///basht.db",
) -> None:
    """Write RUN's measured learning curves as a table the simulator replays.

    Every trial that reported each epoch up to max_budget is one row: record with `pruner: none`
    (examples/digits-curves.yaml), then replay with `RecordedCurves.load(path)` or
    `python benchmarks/asha_scale.py --curves path`.
    """
    from basht.engine.recorded import RecordedCurves

    table = RecordedCurves.from_run(store, run_id)
    path = table.save(out)
    left = table.source["left_out"]
    console.print(
        f"{path}: {len(table)} configurations x {table.epochs} epochs of {table.metric} "
        f"(mode {table.mode}) from run {table.source['run']}"
        + (f"; {left} trials without a full curve left out" if left else "")
        + f"; median load {table.load_s:.4g} s"
    )


@app.command()
def export(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN", help="Run id, a unique prefix of it, or `latest`.")
    ],
    to: Annotated[str, typer.Option(help="The tracker: mlflow, tensorboard or wandb.")],
    uri: Annotated[
        str | None,
        typer.Option(
            help="MLflow's tracking URI [default: the run's, MLFLOW_TRACKING_URI, else mlflow.db "
            "beside the run folders]; for tensorboard and wandb, the folder to write in "
            "[default: the run's results folder]."
        ),
    ] = None,
    store: StoreOption = "sqlite:///basht.db",
) -> None:
    """Write a stored RUN to an experiment tracker: its trials, reports, energy, phases and
    Table 2, as `measure.trackers` does while a run goes (W&B: offline files)."""
    from basht.track import export_run

    done = export_run(store, run_id, to, uri)
    _say_path(f"run {done.run_id} exported to {done.tracker}: {done.where}")


@app.command()
def simulate(
    file: Annotated[Path, typer.Argument(help="Experiment file (YAML or JSON).")],
    curves: Annotated[
        Path | None,
        typer.Option(
            help="Measured curves to replay (a `basht curves` table); an lcbench experiment "
            "needs none: its surrogate gives the curves."
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=1_000_000,  # a million take a second; a billion, minutes and gigabytes
            help="Simulated workers (default: the file's).",
        ),
    ] = None,
    pruners: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated pruners to compare (default: every early-stopping one)."
        ),
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, max=1000, help="Runs per pruner, seeds 0..N-1.")] = 3,
    target: Annotated[
        float | None, typer.Option(help="The value to reach (default: search.target).")
    ] = None,
    target_top: Annotated[
        float | None,
        typer.Option(help="The target that this fraction of the recorded configurations reach."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """What FILE's search would take with each pruner at WORKERS workers, on a virtual clock.

    Replays measured curves (record them with `pruner: none` and `basht curves`), or the LCBench
    surrogate's for an lcbench experiment (with each pruner's regret against the task's optimum),
    so 500 workers and 100,000 trials take seconds; times are virtual, medians over the seeds.
    """
    from basht.engine.recorded import RecordedCurves
    from basht.experiment import load_experiment
    from basht.report.console import simulation_table
    from basht.tune.simulate import SIMULATED_PRUNERS, simulate_experiment

    if target is not None and target_top is not None:
        raise BashtError("--target and --target-top: give one")
    experiment = load_experiment(file)
    table: Any
    if curves is not None:
        table = RecordedCurves.load(curves)
    elif experiment.workload.name == "lcbench":
        from basht.workloads.lcbench import LCBenchCurve

        task = experiment.workload.params.get("task", "3945")
        table = LCBenchCurve(task, experiment.search.metric)
    else:
        raise BashtError(
            "--curves: give the measured curves to replay (`basht curves` writes them); only an "
            "lcbench experiment brings its own"
        )
    if target_top is not None:
        if not hasattr(table, "target"):
            raise BashtError("--target-top: needs recorded curves (--curves)")
        target = table.target(target_top)
    rows = simulate_experiment(
        experiment,
        table,
        pruners=SIMULATED_PRUNERS
        if pruners is None
        else [p.strip() for p in pruners.split(",") if p.strip()],
        workers=workers,
        seeds=range(seeds),
        target=target,
    )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        console.print(simulation_table(rows, curves.name if curves else "the LCBench surrogate"))


@app.command()
def plan(
    file: Annotated[Path, typer.Argument(help="Experiment file: its `search` is the SHA job.")],
    deadline: Annotated[str, typer.Option(help="When the job must be done: 5400, 90m, 1h30m.")],
    profile: Annotated[
        Path | None, typer.Option(help="Profile file: instance, epoch_s per GPU count, startup_s.")
    ] = None,
    from_run: Annotated[
        str | None,
        typer.Option(
            help="Or profile from a stored run: its epochs, one GPU each (with --instance)."
        ),
    ] = None,
    instance: Annotated[
        str | None,
        typer.Option(help="With --from-run: the instance it ran on, e.g. aws:p3.8xlarge."),
    ] = None,
    scaling: Annotated[
        float | None,
        typer.Option(help="With --from-run: b in t(k) = t(1)·k^-b for more GPUs (1 = linear)."),
    ] = None,
    startup: Annotated[
        float | None,
        typer.Option(
            min=0, help="With --from-run: seconds from request to a ready instance [120]."
        ),
    ] = None,
    store: StoreOption = "sqlite:///basht.db",
    confidence: Annotated[
        str, typer.Option(help="What must meet the deadline: the p95 or the mean JCT.")
    ] = "p95",
    max_instances: Annotated[
        int | None,
        typer.Option(min=1, help="At most this many instances (default: one GPU per trial)."),
    ] = None,
    runs: Annotated[int, typer.Option(min=1, help="Simulated runs per plan.")] = 200,
    seed: Annotated[int, typer.Option(min=0, help="Seeds the simulated stragglers.")] = 0,
    preprovision: Annotated[
        str,
        typer.Option(
            help="Request a stage's new instances before its barrier: off, on, or auto "
            "(plan both ways, keep the cheaper)."
        ),
    ] = "off",
    objective: Annotated[
        str,
        typer.Option(
            help="What the plan keeps least: cost (USD), energy (kWh, needs the profile's "
            "power_w), or carbon (gCO2eq on measure.carbon's csv series from schedule.start or "
            "now: each stage may wait for a cleaner grid)."
        ),
    ] = "cost",
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write it here.")] = None,
) -> None:
    """RubberBand: the cheapest cloud allocation plan that meets DEADLINE (greedy, simulated)."""
    import time

    from basht.experiment import load_experiment
    from basht.plan import ShaJob, plan_job
    from basht.plan.carbon import experiment_grid
    from basht.plan.profile import choose_profile, parse_duration
    from basht.report.plan import (
        emissions_line,
        job_note,
        plan_intensity,
        plan_json,
        plan_summary,
        plan_tables,
    )
    from basht.store import Store

    experiment = load_experiment(file)
    job = ShaJob.from_experiment(experiment)
    note = job_note(job, experiment.search.pruner)
    if note:
        console.print(f"[dim]{escape(note)}[/dim]", soft_wrap=True)
    measured = choose_profile(
        profile,
        from_run,
        lambda: Store(store, create=False),
        instance=instance,
        scaling=scaling,
        startup_s=startup,
    )
    if json_out is not None:  # a folder that cannot be made fails now, not after the planning
        json_out.parent.mkdir(parents=True, exist_ok=True)
    result = plan_job(
        job,
        measured,
        parse_duration(deadline),
        confidence=confidence,
        max_instances=max_instances,
        runs=runs,
        seed=seed,
        preprovision=preprovision,
        objective=objective,
        grid=experiment_grid(experiment, time.time()) if objective == "carbon" else None,
    )
    console.print(plan_tables(result, job, measured))
    static = result.static_estimate
    if (static.jct_p95_s if result.confidence == "p95" else static.jct_s) > result.deadline_s:
        # Only a plan that scales meets it: a saving against a late cluster would mislead.
        console.print(
            "no static cluster meets the deadline, only a plan that scales; the best static one "
            f"shown is the fastest, which is late; {result.simulations} plans simulated",
            soft_wrap=True,
        )
    else:
        console.print(plan_summary(result), soft_wrap=True)
    intensity = plan_intensity(experiment.measure.carbon)
    if line := emissions_line(result, intensity):
        console.print(line, soft_wrap=True)
    if json_out is not None:
        saved = plan_json(result, job, measured, intensity)
        json_out.write_text(json.dumps(saved, indent=2) + "\n")
        console.print(f"wrote {json_out}")


@app.command("profile")
def profile_cmd(
    file: Annotated[
        Path, typer.Argument(help="Experiment file: its workload, and its space's middle config.")
    ],
    instance: Annotated[
        str, typer.Option(help="The instance type to plan for, e.g. aws:p3.8xlarge.")
    ],
    out: Annotated[Path, typer.Option(help="Where to write the profile (YAML).")] = Path(
        "profile.yaml"
    ),
    gpus: Annotated[
        str,
        typer.Option(
            help="GPUs per trial to time, comma-separated (1 GPU = cpus_per_worker cores here)."
        ),
    ] = "1,2",
    epochs: Annotated[int, typer.Option(min=1, help="Epochs timed at each GPU count.")] = 5,
    startups: Annotated[int, typer.Option(min=1, help="Instance launches timed.")] = 2,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Time each GPU count with the instance full (as many trials at once as it "
            "holds), as a stage runs them, not one trial alone.",
        ),
    ] = False,
    scaling: Annotated[
        float | None,
        typer.Option(help="b in t(k) = t(1)·k^-b, when only one GPU count is timed."),
    ] = None,
) -> None:
    """RubberBand's offline profiling: write a profile for `basht plan --profile`.

    Times one trial's epochs at several GPU counts, and an instance's start-up, on this
    machine."""
    import yaml
    from rich.table import Table

    from basht.experiment import load_experiment
    from basht.plan.profiling import check_request, measure, power_label, profile_dict

    experiment = load_experiment(file)
    try:
        counts = sorted({int(g) for g in gpus.split(",") if g.strip()})
    except ValueError:
        raise BashtError(f"--gpus: expected whole numbers, comma-separated, got {gpus!r}") from None
    if not counts:
        raise BashtError("--gpus: give at least one GPU count")
    price = check_request(experiment, instance, counts, scaling)  # before minutes of measuring
    measured = measure(experiment, counts, price.gpus, epochs=epochs, startups=startups, full=full)
    data = profile_dict(experiment, instance, measured, scaling)
    table = Table(
        title=f"profile of {experiment.name} for {price.describe()}", title_justify="left"
    )
    table.add_column("GPUs per trial", justify="right")
    table.add_column("epochs timed", justify="right")
    table.add_column("mean s per epoch", justify="right")
    for count, samples in measured.epoch_s.items():
        table.add_row(str(count), str(len(samples)), f"{sum(samples) / len(samples):.4g}")
    console.print(table)
    startup = ", ".join(f"{s:.2f}" for s in measured.startup_s)
    console.print(f"instance start-up (s): {startup}", soft_wrap=True)
    if measured.power_w is not None:
        idle, busy = measured.power_w
        console.print(
            f"power (this whole machine, by {power_label(measured.power_source)}): "
            f"idle {idle:.0f} W, instance full {busy:.0f} W",
            soft_wrap=True,
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    console.print(f"wrote {out}; plan with: basht plan {file} --profile {out} --deadline ...")


def _report_comparison(
    ref: str, store: str, results: Path, as_json: bool, as_html: bool, out: Path | None
) -> None:
    from dataclasses import asdict

    from basht.report.compare import compare_rows, compare_table
    from basht.report.comparison import load_comparison
    from basht.report.html import write_comparison_report
    from basht.store import Store

    comparison = load_comparison(ref, results)
    # The comparison knows its store; an explicit --store (another copy of it) wins.
    stored = Store(comparison.store if store == "sqlite:///basht.db" else store, create=False)
    if as_html:
        _say_path(f"report: {write_comparison_report(stored, comparison, out)}")
        return
    rows = compare_rows(stored, comparison)
    if as_json:
        table = [asdict(r) | {"cells": {c: r.cell(c) for c in comparison.columns}} for r in rows]
        typer.echo(json.dumps({"comparison": asdict(comparison), "rows": table}, indent=2))
    else:
        console.print(compare_table(comparison, rows))


def _spare_workers_the_cli() -> None:
    """A spawned trial worker first imports its parent's `__main__` (a user's script may define
    its workload there). The CLI's is of no use to a worker: named as a package's `__main__`,
    which multiprocessing does not import in the child, it costs a worker nothing (no typer,
    rich, store or reports)."""
    main_module = sys.modules["__main__"]
    if getattr(main_module.__spec__, "name", "").endswith(".__main__"):
        return  # `python -m basht`: skipped already
    main_module.__spec__ = importlib.machinery.ModuleSpec("basht.__main__", None)


@functools.cache
def _command() -> Any:
    """The click command typer makes of `app`, made once per process. `app()` makes it anew at
    every call, reading the type hints of every command (about 30 ms): a process that runs the
    CLI more than once (the test suite runs it in-process thousands of times) paid that each
    time. With `pretty_exceptions_enable=False`, calling it is what `app()` does."""
    return typer.main.get_command(app)


def main() -> None:
    """Entry point: a BashtError is the user's to fix, so one line and exit code 2, no traceback."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # `package.module:attr` workloads are found in the current folder, as with `python -m`
    # (spawned workers inherit the path).
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    _spare_workers_the_cli()
    try:
        # Outside standalone mode typer returns the exit code of Ctrl-C (130) and typer.Exit.
        code = _command()(standalone_mode=False)
    except BashtError as err:
        _error(str(err))
    except OSError as err:  # a path that cannot be written or read: the user's to fix as well
        from basht.report.paths import path_problem

        _error(path_problem(err))
    except (KeyboardInterrupt, typer.Abort):
        _interrupted(None)
    except typer.TyperException as err:  # a bad option or argument: typer's own click says why
        _usage_error(err)
    if code == 130:
        _interrupted(None)
    if _all_closed:
        _exit_without_collecting()
    sys.exit(code if isinstance(code, int) else 0)


#: Set by a command that has closed everything with an effect outside this process (its store,
#: files and workers) once it is done: the process may then end without collecting its objects.
_all_closed = False


def _done_and_closed() -> None:
    global _all_closed
    _all_closed = True


def _exit_without_collecting() -> None:
    """Leave what this process built to the OS instead of the garbage collector.

    At exit the interpreter collects every object graph it ever made (the ORM's, the schema's,
    the experiment model's, the run's): a fifth of a second after the work is done and the
    results are printed. A command that closed its store, files and workers (an open SQLite
    connection is closed, and its write-ahead log folded back in, only when collected) says so,
    and its objects are then frozen out of the collector's reach: the process just ends.
    """
    import gc

    gc.freeze()


def _interrupted(run: RunInterrupted | None) -> NoReturn:
    """Ctrl-C: say which run keeps its trials and how to go on with it."""
    if run is not None:
        from basht.store.urls import shown_url

        # Quoted for a shell (a path with spaces), its password hidden (it is printed).
        shown = shlex.quote(shown_url(run.store))
        store = "" if run.store == "sqlite:///basht.db" else f" --store {shown}"
        message = f"interrupted: run {run.run_id} keeps its finished trials; " + (
            f"continue it with `basht resume {run.run_id}{store}`"
            if run.system == "native"
            else f"`basht resume` continues native runs only, so run the {run.system} file again"
        )
    else:
        message = "interrupted: finished trials are kept in the store"
    err_console.print(escape(message), highlight=False, soft_wrap=True)
    sys.exit(130)


def _usage_error(err: typer.TyperException) -> NoReturn:
    """A bad option or argument is one line too: click's reason and where the usage is (its
    usage text is `--help`'s). A command given no arguments still shows its help."""
    if type(err).__name__ == "NoArgsIsHelpError":  # typer checks it so too: the class is private
        err.show()
        sys.exit(2)
    ctx = getattr(err, "ctx", None)
    command = ctx.command_path if ctx is not None else "basht"
    _error(f"{err.format_message().rstrip('.')} (see {command} --help)")


def _error(message: str) -> NoReturn:
    # The message is text, not markup: "pip install 'basht[ray]'" keeps its brackets. One line
    # even when it quotes something of the user's with a line break in it.
    line = " ".join(message.splitlines())
    err_console.print(f"[red]error:[/red] {escape(line)}", highlight=False, soft_wrap=True)
    sys.exit(2)


if __name__ == "__main__":
    main()
