"""The runner: the seven phases in order, each timed and stored; undeploy whatever happens."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from basht.bench.driver import DRIVER, POINTER, driver_state, with_driver, write_pointer
from basht.bench.lifecycle import BestTrial, RunContext, SystemUnderTest
from basht.bench.measurement import run_intensity, start_exporter, start_monitor
from basht.bench.timing import Timing, timed
from basht.energy.billing import operating_cost_usd
from basht.errors import BashtError, ExperimentError, RunInterrupted, SpecError
from basht.experiment import DERIVED_KEYS, Experiment, SearchSpec
from basht.failpoints import failpoint
from basht.metrics import compute_metrics
from basht.report.paths import path_problem
from basht.report.results import build_summary, write_results_json
from basht.store import Store
from basht.workloads.base import about_workload

log = logging.getLogger(__name__)

#: How long a run's driver must have written nothing before `resume` takes the run over. A live
#: driver writes power samples every 5 s (the monitor's flush); six missed flushes is a dead one.
DRIVER_SILENT_S = 30.0


@dataclass
class RunResult:
    """What `basht.run` returns; everything in it is also in the store and results.json."""

    run_id: str
    status: str
    best_config: dict[str, Any] | None
    best_value: float | None
    test_metrics: dict[str, float]
    metrics: dict[str, Any]
    phases: dict[str, float]
    trial_counts: dict[str, int]
    results_dir: Path
    summary: dict[str, Any] = field(repr=False, default_factory=dict)


def make_system(ctx: RunContext) -> SystemUnderTest:
    system = ctx.experiment.system
    if system == "native":
        if ctx.experiment.executor not in ("local", "ray"):
            raise BashtError(
                f"executor: {ctx.experiment.executor!r} is not available in this version"
            )
        from basht.bench.native import NativeSystem

        return NativeSystem(ctx)
    if system == "optuna":
        from basht.bench.systems.optuna_system import OptunaSystem

        return OptunaSystem(ctx)
    if system == "raytune":
        from basht.bench.systems.raytune_system import RayTuneSystem

        return RayTuneSystem(ctx)
    if system == "synetune":
        from basht.bench.systems.synetune_system import SyneTuneSystem

        return SyneTuneSystem(ctx)
    raise BashtError(f"system: {system!r} is not available in this version")


def search_ended(reason: str | None, trials: int, search: SearchSpec) -> str:
    """Why the search ended: the limit that ended it (a target, a budget), or else its trial
    limit reached, or else the algorithm out of trials (a bracket or a grid done)."""
    if reason is not None:
        return reason
    if search.max_trials is not None and trials >= search.max_trials:
        return f"max_trials ({search.max_trials}) reached"
    return "the algorithm had no more trials to run"


def run_benchmark(
    experiment: Experiment,
    *,
    results_root: Path | str = "results",
    on_update: Callable[[Any], None] | None = None,
    on_phase: Callable[[Timing], None] | None = None,
    system_factory: Callable[[RunContext], SystemUnderTest] | None = None,
    on_stored: Callable[[str, str], None] | None = None,
) -> RunResult:
    """Run the whole Basht lifecycle for one experiment and return its result.

    Phases run in order; the first failure skips the rest but undeploy, which always runs (also
    on Ctrl-C). Every phase timing, trial and metric is written to the store as it happens.
    `system_factory` benchmarks a system under test of the caller's own instead of `system:`.
    `on_stored` is told the run's id and status once its records are final, before results.json
    is written (the CLI starts drawing the plots of a completed run then).
    A file that would fail for a reason `preflight` can see fails first, with nothing stored.
    """
    from basht.bench.carbon_schedule import check_deadline
    from basht.bench.preflight import preflight

    workload = preflight(experiment)
    _make_results_root(Path(results_root))
    store = Store(experiment.store)
    try:
        check_deadline(experiment, store, time.time())
    except SpecError as err:
        raise ExperimentError(f"{experiment.source}: {err}") from None
    spec = experiment.to_dict()
    spec["space_size"] = experiment.space_size
    spec["workload_about"] = _about(experiment, workload)
    experiment_id = store.add_experiment(experiment.name, spec)
    run = store.create_run(
        experiment_id,
        experiment.name,
        experiment.system,
        experiment.executor,
        Path(results_root),
        host=with_driver(None),
    )
    ctx = RunContext(experiment, store, run.id, Path(run.results_dir), on_update)
    return _execute(
        ctx, attempt=1, on_phase=on_phase, system_factory=system_factory, on_stored=on_stored
    )


def last_attempt(store: Store, run_id: str) -> int:
    """The latest attempt any record of the run names (0 if none). A phase is stored when it
    ends, so a driver killed during deploy left none, but may have launched a plan's instances
    or joined Ray nodes: a resumed attempt must not take their attempt's number."""
    from basht.energy.billing import ray_nodes

    attempts = [p.attempt for p in store.phases(run_id)]
    attempts += [row.attempt for row in store.instances(run_id)]
    attempts += [row.attempt for row in store.stages(run_id)]
    attempts += [node["attempt"] for node in ray_nodes(store, run_id)]
    return max(attempts, default=0)


def _make_results_root(root: Path) -> None:
    """The folder runs keep their results under, made before a run is stored: one that cannot
    be is the user's to fix, with nothing stored."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BashtError(f"results: cannot create {root} ({path_problem(err)})") from None


def resume_benchmark(
    run_id: str,
    store_url: str = "sqlite:///basht.db",
    *,
    on_update: Callable[[Any], None] | None = None,
    on_phase: Callable[[Timing], None] | None = None,
    on_stored: Callable[[str, str], None] | None = None,
) -> RunResult:
    """Continue an interrupted or failed run: finished trials stay, the algorithm is replayed from
    its decision log, trials that were running start again (from their last pause if any).
    `on_stored` as for `run_benchmark`."""
    store = Store(store_url, create=False)
    run = store.get_run(run_id)
    if run.status == "completed":
        raise BashtError(f"run {run.id} completed; there is nothing to resume")
    if run.system != "native":
        raise BashtError(f"run {run.id} ran on {run.system}; `basht resume` continues native runs")
    if run.status == "running":
        _check_driver_gone(store, run.id, run.host)
    spec = dict(store.get_experiment(run.experiment_id).spec)
    for derived in DERIVED_KEYS:
        spec.pop(derived, None)
    experiment = Experiment.from_dict(spec, f"run {run.id}")
    attempt = 1 + last_attempt(store, run.id)
    store.update_run(
        run.id, status="running", error=None, ended_at=None, host=with_driver(run.host)
    )
    ctx = RunContext(experiment, store, run.id, Path(run.results_dir), on_update, resume=True)
    return _execute(ctx, attempt=attempt, on_phase=on_phase, on_stored=on_stored)


def _check_driver_gone(store: Store, run_id: str, host: dict[str, Any] | None) -> None:
    """Refuse to take over a run whose driver may live: two drivers on one run would interleave
    their decision logs. On this host the driver's process tells at once; elsewhere (or for a run
    that recorded none) its silence does: a live driver writes power samples every few seconds."""
    state = driver_state(host)
    if state == "gone":
        return
    if state == "alive":
        pid = host[DRIVER]["pid"] if host else "?"
        raise BashtError(
            f"run {run_id} is still running: its driver (pid {pid}) lives; stop it first"
        )
    last = store.last_sample_at(run_id)
    quiet_s = time.time() - last if last is not None else math.inf
    if quiet_s < DRIVER_SILENT_S:
        raise BashtError(
            f"run {run_id} is still running: its driver wrote {quiet_s:.0f} s ago (on another "
            f"host, or it recorded no pid); stop it first, or if it was killed, resume once it has been silent "
            f"{DRIVER_SILENT_S:.0f} s"
        )


def _execute(
    ctx: RunContext,
    *,
    attempt: int,
    on_phase: Callable[[Timing], None] | None = None,
    system_factory: Callable[[RunContext], SystemUnderTest] | None = None,
    on_stored: Callable[[str, str], None] | None = None,
) -> RunResult:
    store, run_id, results_dir = ctx.store, ctx.run_id, ctx.results_dir
    ctx.attempt = attempt
    log.info("run %s (attempt %d): results in %s", run_id, attempt, results_dir)

    def record(timing: Timing) -> None:
        store.add_phase(
            run_id, timing.name, timing.start, timing.end, timing.aborted, timing.error, attempt
        )
        if on_phase is not None:
            on_phase(timing)

    status, error = "failed", None
    sut: SystemUnderTest | None = None
    tracking = None  # the experiment trackers following the run from the store (basht.track)
    metric_rows: list[tuple[str, float | None, str, str | None]] = []
    try:
        try:
            # Owner-only: checkpoints are loaded from it, and a pointer in it names the store.
            results_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not (results_dir / POINTER).exists():
                write_pointer(results_dir, run_id, store.url)
        except OSError as err:
            raise BashtError(
                f"results: cannot create {results_dir} ({path_problem(err)})"
            ) from None
        ctx.intensity = run_intensity(ctx.experiment, time.time())
        ctx.monitor = start_monitor(ctx.experiment, store, run_id, ctx.resume, ctx.intensity)
        if ctx.experiment.measure.prometheus_port is not None:
            ctx.exporter = start_exporter(ctx, ctx.experiment.measure.prometheus_port)
        if ctx.experiment.measure.trackers:
            from basht.track import start_tracking

            tracking = start_tracking(store, run_id, ctx.experiment.measure.trackers)
        sut = (system_factory or make_system)(ctx)
        with timed("deploy", record):
            sut.deploy()
            failpoint("deploy")
        with timed("setup", record):
            sut.setup()
        with timed("run", record):
            sut.run()
        reason = search_ended(
            ctx.notes.get("stop_reason"), len(store.trials(run_id)), ctx.experiment.search
        )
        ctx.notes["stop_reason"] = reason
        store.update_run(run_id, stop_reason=reason)
        with timed("collect_results", record):
            failpoint("collect")
            best: BestTrial = sut.collect_results()
            store.update_run(
                run_id, best_trial=best.trial_id, best_value=best.value, best_config=best.config
            )
        with timed("test", record):
            failpoint("test")
            test_metrics = sut.test(best)
            store.update_run(run_id, test_metrics=test_metrics)
        ctx.monitor.close()  # the energy accounts cover deploy to the end of test, as JCT does
        with timed("collect_metrics", record):
            extra = sut.collect_metrics()
            metrics = compute_metrics(store, run_id, tuple(ctx.experiment.measure.wasted_states))
            metric_rows = [(m.name, m.value, m.unit, m.source) for m in metrics]
            metric_rows += [(k, float(v), "", None) for k, v in extra.items()]
            store.replace_metrics(run_id, metric_rows)
        status = "completed"
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted by the user (SIGINT)"
        raise RunInterrupted(run_id, store.url, ctx.experiment.system) from None
    except BashtError as err:
        error = str(err)
        raise
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
        raise
    finally:
        try:
            if ctx.monitor is not None:
                ctx.monitor.close()
            if sut is not None:
                with timed("undeploy", record):
                    sut.undeploy()
        except Exception as err:  # never hide the first failure behind an undeploy failure
            log.error("undeploy failed: %s", err)
            error = error or f"undeploy failed: {err}"
        finally:
            if ctx.exporter is not None:
                ctx.exporter.stop()
            if metric_rows:  # the bill runs until the resources are released: undeploy's end
                _bill_to_undeploy(store, run_id, ctx.experiment, metric_rows)
            elif sut is not None:  # failed or interrupted: what it used until then still counts
                _metrics_so_far(store, run_id, ctx.experiment)
                _best_so_far(ctx)
            store.finish_run(run_id, status, error)
            if on_stored is not None:
                _tell_stored(on_stored, run_id, status)
            summary = build_summary(store, run_id)
            try:
                write_results_json(summary, results_dir)
            except OSError as err:  # the store has it all; the file is a copy
                if results_dir.is_dir():  # else the error says the folder could not be made
                    log.error("results.json not written to %s: %s", results_dir, err.strerror)
            if tracking is not None:  # the end, Table 2 and results.json, to each tracker
                tracking.finish()
            store.close()
    return _result(summary, results_dir)


def _tell_stored(on_stored: Callable[[str, str], None], run_id: str, status: str) -> None:
    """`on_stored`, which must not hide the run's own outcome behind an error of its own."""
    try:
        on_stored(run_id, status)
    except Exception as err:
        log.error("after storing run %s: %s", run_id, err)


def _bill_to_undeploy(
    store: Store,
    run_id: str,
    experiment: Experiment,
    rows: list[tuple[str, float | None, str, str | None]],
) -> None:
    """OC as DESIGN defines it, over the job's provisioned time: collect_metrics computed it
    before undeploy had run, so it is computed again once undeploy has released everything."""
    try:
        bill = operating_cost_usd(store, run_id, experiment)
    except Exception as err:  # the metrics stored at collect_metrics stand
        log.error("OC not brought up to the end of undeploy: %s", err)
        return
    store.replace_metrics(run_id, [(n, bill if n == "OC" else v, u, src) for n, v, u, src in rows])


def _metrics_so_far(store: Store, run_id: str, experiment: Experiment) -> None:
    """Table 2 for a run that ended early, up to its undeploy: the energy, emissions and bill of
    a failed or interrupted attempt are spent all the same (JCT, which ends at the test, stays
    empty). A resumed run replaces them with its own when it completes."""
    try:
        metrics = compute_metrics(store, run_id, tuple(experiment.measure.wasted_states))
    except Exception as err:  # the run's own error is the one to report
        log.error("metrics of the run so far not computed: %s", err)
        return
    store.replace_metrics(run_id, [(m.name, m.value, m.unit, m.source) for m in metrics])


def _best_so_far(ctx: RunContext) -> None:
    """The best trial of a run that ended before collect_results (Ctrl-C, a failure), so its
    report shows what the search had found, as the live line did; a resumed run replaces it."""
    from basht.bench.native import best_trial_from_store

    if ctx.store.get_run(ctx.run_id).best_trial is not None:
        return  # collect_results ran: the failure came later (the test, say)
    try:
        best = best_trial_from_store(ctx)
    except Exception as err:  # the run's own error is the one to report
        log.error("best trial of the run so far not recorded: %s", err)
        return
    if best.trial_id is not None:
        ctx.store.update_run(
            ctx.run_id, best_trial=best.trial_id, best_value=best.value, best_config=best.config
        )


def _about(experiment: Experiment, workload: Any) -> dict[str, Any] | None:
    """Table 1's dataset, its size, model and training algorithm, as the workload the preflight
    built says (a plain-function workload says nothing)."""
    if workload is None:
        return None
    try:
        return about_workload(workload)
    except Exception as err:  # a description is not worth failing a run over
        log.warning("workload %s: no description (%s)", experiment.workload.name, err)
        return None


def _result(summary: dict[str, Any], results_dir: Path) -> RunResult:
    return RunResult(
        run_id=summary["run_id"],
        status=summary["status"],
        best_config=summary["best"]["config"],
        best_value=summary["best"]["value"],
        test_metrics=summary["test_metrics"],
        metrics=summary["metrics"],
        phases={p["name"]: p["duration_s"] for p in summary["phases"]},
        trial_counts=summary["trial_counts"],
        results_dir=results_dir,
        summary=summary,
    )
