"""Per-trial overhead of a whole tuning system, side by side: basht, Optuna and Ray Tune.

Each system runs 200 trials of the same deterministic 27-epoch learning curve that does no work
(accuracy = (1 − e^(−epoch/2)) / (1 + |x| + |n|), the built-in `sleep` workload with `epoch_s=0`),
with ASHA-style early stopping (min 1, max 27, eta 3) on 2 workers, configurations drawn at random
from x ∈ [−1, 1] (float) and n ∈ {1..4} (int). So the time measured is the system's own: starting
and scheduling trials, passing every report to the scheduler and its answer back, and storing
results.

* basht: `basht.run` of an experiment dict (pruner asha, max_trials 200, 2 workers, a temporary
  SQLite store), once with the built-in `sleep` workload (a class that checkpoints, so ASHA runs
  its promotion variant: trials pause at rungs and resume) and once with the same curve as a plain
  function defined in this module (`peers_overhead:curve`, no checkpoint, so ASHA's stopping
  variant: the rule Optuna's and Ray's schedulers apply). "run" is the run phase
  (`result.phases["run"]`); "total" is all of `basht.run` (worker start-up, setup, test of the best
  configuration, metrics, store).
* Optuna: a study in one shared JournalStorage file (SQLite when the journal is not available),
  `SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)`, `RandomSampler` (seeded per
  process), 2 spawned processes each running `study.optimize(objective, n_trials=100)`; the
  objective reports 27 steps with `trial.report` / `trial.should_prune` and raises
  `optuna.TrialPruned`. "run" is from the moment both processes pass a barrier into `optimize`
  until the last one returns; "total" adds process start-up, imports and study creation.
* Ray Tune: a local Ray (2 CPUs, bound to 127.0.0.1), `tune.Tuner` of a function trainable
  reporting 27 times with `tune.report`, `ASHAScheduler(max_t=27, grace_period=1,
  reduction_factor=3)`, num_samples 200, at most 2 concurrent trials (a seeded
  `BasicVariantGenerator(max_concurrent=2)`, which is what `max_concurrent_trials=2` builds), 1 CPU
  per trial, results under a temporary `storage_path`, verbosity 0. Run twice: with Tune's
  default `reuse_actors=False` (a new actor process per trial) and with `reuse_actors=True`
  (Tune's advice for many short trials). "run" is `tuner.fit()`; "total" adds `ray.init` and
  `ray.shutdown` (measured once, counted in both runs, and printed on their own).

basht and Optuna are run `--repeats` times (3), interleaved, and shown by the run with the median
run time (every sample is in the JSON); the Ray runs take minutes and are run once.
ms/trial is the run-phase wall time divided by the number of trials, ms/report the same divided by
the number of epochs reported (schedulers stop different trials at different epochs, and ASHA's
promotion variant trains fewer epochs than the stopping rule). The ratios (peer ÷ basht)
are taken against basht's default, the promotion variant with the built-in `sleep` workload.

    python benchmarks/peers_overhead.py [--trials 200] [--workers 2] [--skip optuna ray]
        [--repeats 3] [--ray-reuse-actors both|false|true]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import logging
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from _results import write_results
from rich.console import Console
from rich.table import Table

EPOCHS, MIN_BUDGET, ETA = 27, 1, 3
SPACE = {
    "x": {"type": "float", "low": -1.0, "high": 1.0},
    "n": {"type": "int", "low": 1, "high": 4},
}

# `peers_overhead:curve` must import in basht's spawned workers, which inherit sys.path.
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
MODULE = Path(__file__).stem


def accuracy(config: dict[str, Any], epoch: int) -> float:
    """The `sleep` workload's curve (optimum 0): rises per epoch to a ceiling set by the config."""
    distance = sum(abs(float(v)) for v in config.values() if isinstance(v, (int, float)))
    return (1.0 - math.exp(-0.5 * epoch)) / (1.0 + distance)


def curve(config: dict[str, Any], trial: Any) -> None:
    """The same curve as a plain-function basht workload (no checkpoint: ASHA's stopping rule)."""
    for epoch in range(1, EPOCHS + 1):
        trial.report(epoch, accuracy=accuracy(config, epoch))


@dataclass
class Row:
    system: str
    scheduler: str
    run_s: float
    total_s: float
    trials: int
    completed: int
    stopped: int
    reports: int
    other: dict[str, Any] = field(default_factory=dict)

    @property
    def ms_per_trial(self) -> float:
        return self.run_s / self.trials * 1000 if self.trials else math.nan

    @property
    def ms_per_report(self) -> float:
        return self.run_s / self.reports * 1000 if self.reports else math.nan


# -- basht -------------------------------------------------------------------------------------


def asha_experiment(
    name: str, trials: int, workers: int, seed: int, workload: str = "sleep"
) -> dict[str, Any]:
    """The benchmark's job as an experiment: `workload` (the sleep workload at 0 s an epoch, or
    the zero-cost curve) over SPACE, ASHA from MIN_BUDGET to EPOCHS epochs with ETA."""
    params = {"epoch_s": 0.0} if workload == "sleep" else {}
    return {
        "name": name,
        "seed": seed,
        "workload": {"name": workload, "params": params},
        "space": SPACE,
        "search": {
            "pruner": "asha",
            "min_budget": MIN_BUDGET,
            "max_budget": EPOCHS,
            "eta": ETA,
            "max_trials": trials,
        },
        "resources": {"workers": workers},
    }


def run_basht(workload: str, trials: int, workers: int, seed: int) -> Row:
    import basht
    from basht.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/bench.db"
        experiment = {
            **asha_experiment("peers-overhead", trials, workers, seed, workload),
            "store": store,
        }
        start = time.perf_counter()
        result = basht.run(experiment, results_root=Path(tmp) / "results")
        total_s = time.perf_counter() - start
        if result.status != "completed":
            raise RuntimeError(f"basht run ended {result.status}")
        reports = len(Store(store).reports(result.run_id))
    counts = dict(result.trial_counts)
    variant = "promotion" if workload == "sleep" else "stopping"
    return Row(
        system=f"basht ({'sleep workload' if workload == 'sleep' else 'function workload'})",
        scheduler=f"ASHA ({variant})",
        run_s=result.phases["run"],
        total_s=total_s,
        trials=sum(counts.values()),
        completed=counts.get("completed", 0),
        stopped=sum(v for k, v in counts.items() if k != "completed"),
        reports=reports,
        other={"phases_s": result.phases, "trial_counts": counts, "workload": workload},
    )


# -- Optuna ------------------------------------------------------------------------------------


def _optuna_storage(kind: str, path: str) -> Any:
    import optuna

    if kind == "journal":
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(path))
    return optuna.storages.RDBStorage(f"sqlite:///{path}")


def _optuna_objective(trial: Any) -> float:
    import optuna

    config = {"x": trial.suggest_float("x", -1.0, 1.0), "n": trial.suggest_int("n", 1, 4)}
    value = math.nan
    for epoch in range(1, EPOCHS + 1):
        value = accuracy(config, epoch)
        trial.report(value, epoch)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return value


def _optuna_worker(
    kind: str, path: str, study_name: str, n_trials: int, seed: int, barrier: Any, out: Any
) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(
        study_name=study_name,
        storage=_optuna_storage(kind, path),
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner(
            min_resource=MIN_BUDGET, reduction_factor=ETA
        ),
    )
    barrier.wait()
    start = time.time()
    study.optimize(_optuna_objective, n_trials=n_trials)
    out.put((start, time.time()))


def run_optuna(trials: int, workers: int, seed: int) -> Row:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        from optuna.storages.journal import JournalFileBackend  # noqa: F401

        kind = "journal"
    except ImportError:
        kind = "sqlite"
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / ("optuna.log" if kind == "journal" else "optuna.db"))
        start = time.perf_counter()
        storage = _optuna_storage(kind, path)
        study = optuna.create_study(
            study_name="peers-overhead", storage=storage, direction="maximize"
        )
        barrier, out = ctx.Barrier(workers), ctx.Queue()
        shares = [trials // workers + (1 if i < trials % workers else 0) for i in range(workers)]
        processes = [
            ctx.Process(
                target=_optuna_worker,
                args=(kind, path, study.study_name, share, seed + i, barrier, out),
            )
            for i, share in enumerate(shares)
        ]
        for p in processes:
            p.start()
        spans = [out.get() for _ in processes]
        for p in processes:
            p.join()
        total_s = time.perf_counter() - start
        if any(p.exitcode for p in processes):
            raise RuntimeError(f"optuna workers exited {[p.exitcode for p in processes]}")
        done = study.get_trials(deepcopy=False)
        states = [t.state for t in done]
        reports = sum(len(t.intermediate_values) for t in done)
    completed = sum(1 for s in states if s == optuna.trial.TrialState.COMPLETE)
    pruned = sum(1 for s in states if s == optuna.trial.TrialState.PRUNED)
    return Row(
        system=f"Optuna {optuna.__version__} ({workers} processes, {kind} storage)",
        scheduler="SuccessiveHalvingPruner",
        run_s=max(end for _, end in spans) - min(begin for begin, _ in spans),
        total_s=total_s,
        trials=len(done),
        completed=completed,
        stopped=pruned,
        reports=reports,
        other={
            "storage": kind,
            "trials_per_process": shares,
            "other_states": len(done) - completed - pruned,
        },
    )


# -- Ray Tune ----------------------------------------------------------------------------------


def _ray_trainable(config: dict[str, Any]) -> None:
    from ray import tune

    for epoch in range(1, EPOCHS + 1):
        tune.report({"accuracy": accuracy(config, epoch)})


def run_ray(
    trials: int, workers: int, seed: int, reuse_modes: tuple[bool, ...] = (False, True)
) -> tuple[list[Row], dict[str, float]]:
    """Both Ray runs on one local Ray; returns their rows and the init/shutdown times."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # verbose=0 then prints nothing per run
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search import BasicVariantGenerator

    from basht.engine.ray.session import ray_on_loopback

    start = time.perf_counter()
    with ray_on_loopback():  # also when something imported Ray before the variable was set
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
    init_s = time.perf_counter() - start
    rows = []
    try:
        for reuse in reuse_modes:
            with tempfile.TemporaryDirectory() as tmp:
                tuner = tune.Tuner(
                    tune.with_resources(_ray_trainable, {"cpu": 1}),
                    param_space={"x": tune.uniform(-1.0, 1.0), "n": tune.randint(1, 5)},
                    tune_config=tune.TuneConfig(
                        metric="accuracy",
                        mode="max",
                        num_samples=trials,
                        # What max_concurrent_trials=2 builds inside Tune, plus a seed (Tune
                        # ignores max_concurrent_trials when given a search_alg).
                        search_alg=BasicVariantGenerator(max_concurrent=workers, random_state=seed),
                        scheduler=ASHAScheduler(
                            max_t=EPOCHS, grace_period=MIN_BUDGET, reduction_factor=ETA
                        ),
                        reuse_actors=reuse,
                    ),
                    run_config=tune.RunConfig(name="peers-overhead", storage_path=tmp, verbose=0),
                )
                fit_start = time.perf_counter()
                grid = tuner.fit()
                run_s = time.perf_counter() - fit_start
                iterations = [int(r.metrics.get("training_iteration", 0)) for r in grid]
            rows.append(
                Row(
                    system=f"Ray Tune {ray.__version__} (reuse_actors={reuse})",
                    scheduler="ASHAScheduler",
                    run_s=run_s,
                    total_s=math.nan,  # filled in once shutdown is timed
                    trials=len(grid),
                    completed=sum(1 for i in iterations if i >= EPOCHS),
                    stopped=sum(1 for i in iterations if i < EPOCHS),
                    reports=sum(iterations),
                    other={"errors": grid.num_errors, "reuse_actors": reuse},
                )
            )
    finally:
        stop = time.perf_counter()
        ray.shutdown()
        shutdown_s = time.perf_counter() - stop
    for row in rows:
        row.total_s = init_s + row.run_s + shutdown_s
        row.other.update(init_s=init_s, shutdown_s=shutdown_s)
    return rows, {"init_s": init_s, "shutdown_s": shutdown_s}


# -- report ------------------------------------------------------------------------------------


def median_row(samples: list[Row]) -> Row:
    """The sample with the median run time, carrying every sample's times along."""
    ordered = sorted(samples, key=lambda r: r.run_s)
    row = ordered[(len(ordered) - 1) // 2]
    row.other["samples"] = len(samples)
    row.other["run_s_samples"] = [r.run_s for r in samples]
    row.other["total_s_samples"] = [r.total_s for r in samples]
    row.other["reports_samples"] = [r.reports for r in samples]
    row.other["completed_samples"] = [r.completed for r in samples]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="*", choices=("optuna", "ray"), default=[])
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of basht and Optuna (the median is shown)"
    )
    parser.add_argument(
        "--ray-reuse-actors",
        choices=("both", "false", "true"),
        default="both",
        help="which Ray runs: Tune's default reuse_actors=False, True, or both",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "peers_overhead.json")
    args = parser.parse_args()
    console = Console(width=200)

    # The cheap systems run --repeats times, round-robin so that a burst of load on the machine
    # hits them alike; each is reported by its median run (all samples go to the JSON).
    cheap: list[Callable[[], Row]] = [
        partial(run_basht, "sleep", args.trials, args.workers, args.seed),
        partial(run_basht, f"{MODULE}:curve", args.trials, args.workers, args.seed),
    ]
    if "optuna" not in args.skip:
        cheap.append(partial(run_optuna, args.trials, args.workers, args.seed))
    samples: list[list[Row]] = [[] for _ in cheap]
    for rep in range(args.repeats):
        for run, got in zip(cheap, samples, strict=True):
            got.append(run())
            console.log(f"{got[-1].system}, repeat {rep + 1}: run {got[-1].run_s:.2f} s")
    rows = [median_row(got) for got in samples]
    ray_fixed: dict[str, float] = {}
    if "ray" not in args.skip:
        modes = {"both": (False, True), "false": (False,), "true": (True,)}
        ray_rows, ray_fixed = run_ray(
            args.trials, args.workers, args.seed, modes[args.ray_reuse_actors]
        )
        rows.extend(ray_rows)
        for row in ray_rows:
            console.log(f"{row.system}: run {row.run_s:.2f} s")

    ours = rows[0]
    table = Table(
        title=f"{args.trials} trials × up to {EPOCHS} epochs of a no-op curve, ASHA eta {ETA}, "
        f"{args.workers} workers"
    )
    columns = (
        "system",
        "scheduler",
        "run (s)",
        "total (s)",
        "ms/trial",
        "ms/report",
        "trials",
        "completed",
        "stopped",
        "reports",
        "vs basht (run)",
        "vs basht (total)",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("system", "scheduler") else "right")
    records = []
    for row in rows:
        ratio_run = row.run_s / ours.run_s
        ratio_total = row.total_s / ours.total_s
        record = asdict(row) | {
            "ms_per_trial": row.ms_per_trial,
            "ms_per_report": row.ms_per_report,
            "ratio_run_vs_basht": ratio_run,
            "ratio_total_vs_basht": ratio_total,
        }
        records.append(record)
        table.add_row(
            row.system,
            row.scheduler,
            f"{row.run_s:.2f}",
            f"{row.total_s:.2f}",
            f"{row.ms_per_trial:.1f}",
            f"{row.ms_per_report:.2f}",
            f"{row.trials}",
            f"{row.completed}",
            f"{row.stopped}",
            f"{row.reports:,}",
            f"{ratio_run:.1f}x",
            f"{ratio_total:.1f}x",
        )
    console.print(table)
    if ray_fixed:
        console.print(
            f"ray.init {ray_fixed['init_s']:.2f} s and "
            f"ray.shutdown {ray_fixed['shutdown_s']:.2f} s "
            "are counted in both Ray rows' total."
        )

    def ratio(prefix: str, of: str = "run", reuse: bool = False) -> float | None:
        """`of` ("run" per trial, or "total") of the row named `prefix`, over basht's."""
        found = [
            r
            for r in rows
            if r.system.startswith(prefix) and r.other.get("reuse_actors", False) == reuse
        ]
        if not found:
            return None
        row = found[0]
        return row.ms_per_trial / ours.ms_per_trial if of == "run" else row.total_s / ours.total_s

    ratios: dict[str, Any] = {
        "baseline": f"{ours.system}, {ours.scheduler}",
        "meaning": "peer / basht; per_trial = run-phase ms per trial, total = whole wall time",
        "optuna_over_ours_per_trial": ratio("Optuna"),
        "optuna_over_ours_total": ratio("Optuna", "total"),
        "ray_over_ours_per_trial": ratio("Ray Tune", "run"),
        "ray_over_ours_total": ratio("Ray Tune", "total"),
        "ray_reuse_actors_over_ours_per_trial": ratio("Ray Tune", "run", reuse=True),
        "ray_reuse_actors_over_ours_total": ratio("Ray Tune", "total", reuse=True),
        "basht_stopping_over_ours_per_trial": ratio("basht (function"),
    }
    for key, label in (
        ("optuna_over_ours_per_trial", "Optuna"),
        ("ray_over_ours_per_trial", "Ray Tune (reuse_actors=False, the default)"),
        ("ray_reuse_actors_over_ours_per_trial", "Ray Tune (reuse_actors=True)"),
    ):
        if ratios[key] is not None:
            console.print(f"per-trial overhead {label} / basht: {ratios[key]:.1f}x")

    import basht

    versions: dict[str, str] = {"basht": basht.__version__}
    for name in ("optuna", "ray"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    write_results(
        args.out,
        "peers_overhead",
        {
            "versions": versions,
            "trials": args.trials,
            "workers": args.workers,
            "epochs": EPOCHS,
            "eta": ETA,
            "seed": args.seed,
            "ray_fixed_s": ray_fixed,
            "ratios": ratios,
            "results": records,
        },
    )


if __name__ == "__main__":
    main()
