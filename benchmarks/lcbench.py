"""LCBench: Basht's algorithms against Syne Tune's, on a surrogate benchmark everyone can check.

LCBench (Zimmer, Lindauer, Hutter 2021, "Auto-PyTorch: Multi-Fidelity Metalearning for
Efficient and Robust AutoDL", IEEE TPAMI 43(9)) through YAHPO Gym's surrogate (Pfisterer,
Schneider, Moosbauer, Binder, Bischl 2022, "YAHPO Gym — An Efficient Multi-Objective
Multi-Fidelity Benchmark for Hyperparameter Optimization", AutoML Conf; Apache-2.0, shipped in
`basht/workloads/data/lcbench/`): a funnel MLP's learning curves over 52 epochs on OpenML tasks,
with each epoch's predicted seconds.

Every job is simulated on a virtual clock, on `--workers` workers, for a budget of simulated time
per task (`--budget` times the median 52-epoch trial's seconds, from a sample of 1,000 random
configurations):

* Basht (`basht.tune.simulate`, the Tuner on the simulated executor): random search, SHA,
  Hyperband, ASHA, async Hyperband (promotion, as Basht runs them when trials checkpoint), ASHA
  in its stopping variant (as Basht runs it for a workload that cannot checkpoint, and the kind
  Syne Tune's ASHA is: the like-for-like pair), and TPE with ASHA;
* Syne Tune's own simulator backend (`UserBlackboxBackend` over the same surrogate, with its
  `SimulatorCallback`): its ASHA (one bracket) and Hyperband (ASHA with every bracket), both the
  stopping kind, which is what Syne Tune's ASHA is. Its clock steps while every worker is busy,
  here by 5 % of the task's median epoch (`--synetune-step`): at Syne Tune's default step, 5 s,
  longer than most LCBench epochs, its workers would stand idle between trials. Its simulated
  delays to start, stop and report a trial (0.05 s each by default) are 0, as in Basht's.

Regret: the best validation accuracy a large random sample of the surrogate reaches on the task
(`basht/workloads/data/lcbench/optima.json`, 100,000 configurations at epoch 52, written by
`--optima`) less the best accuracy of the trials trained to 52 epochs by a time; normalised by
the sample's best-to-worst span. Reported: the median normalised regret at 10 %, 50 % and 100 %
of the budget, each method's rank per task (by its median at 100 %), the tasks where Basht's ASHA
(each variant) is no worse than Syne Tune's, and the wall time each simulator took for the same
jobs. `--methods` runs some of the methods only (the ASHA comparison: `--methods ASHA "ASHA
(stopping)" "Syne Tune ASHA"`).

The grid is run in units (one task, worker count and seed: every method back to back in one
process, so the wall times compared are taken side by side), `--jobs` at a time. Each unit is
appended to `--runs` (one JSON line, default `results/lcbench.runs.jsonl`) as it ends; a run
killed or stopped by `--stop-after-s` goes on from there next time, also on another machine
(copy the file), and `--summarise-only` writes the table and JSON from the file as it is. A unit
may be run in parts: `--methods` some first (the ASHA comparison, say), and a later run without
it runs the rest only; the parts' lines merge into one unit. The per-method table is of the
units that ran every method; Basht's ASHA against Syne Tune's counts every unit that ran those
three.

    python benchmarks/lcbench.py [--tasks 34] [--seeds 10] [--workers 4,32] [--budget 20]
        [--methods NAME ...] [--jobs 1] [--stop-after-s S] [--summarise-only]
    python benchmarks/lcbench.py --optima      # the per-task optima, once (about 2 minutes)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

BASHT = {  # method -> (sampler, pruner, variant: promotion when trials checkpoint, or stopping)
    "random": ("random", "none", "promotion"),
    "SHA": ("random", "sha", "promotion"),
    "Hyperband": ("random", "hyperband", "promotion"),
    "ASHA": ("random", "asha", "promotion"),
    "ASHA (stopping)": ("random", "asha", "stopping"),
    "async Hyperband": ("random", "async-hyperband", "promotion"),
    "TPE+ASHA": ("tpe", "asha", "promotion"),
}
SYNE_TUNE = {"Syne Tune ASHA": 1, "Syne Tune Hyperband": 4}  # method -> brackets
# Syne Tune's simulator is time-stepped: while every worker is busy its clock moves on by the
# backend's `tuner_sleep_time` (5 s unless told), and a worker freed within a step waits for the
# step's end for its next trial. LCBench epochs take 1 to 4 s, so at that default Syne Tune's
# workers stood idle much of the time and its regret came out worse than its algorithm's. The
# step is this fraction of the task's median epoch: each new trial waits 2.5 % of an epoch on
# average. A finer step changed no result beyond Syne Tune's own run-to-run spread and costs
# wall time in proportion.
SYNE_TUNE_STEP = 0.05
FRACTIONS = (0.1, 0.5, 1.0)
ASHAS = ("ASHA", "ASHA (stopping)", "Syne Tune ASHA")  # the comparison the benchmark is for
EPOCHS = 52


def write_optima(samples: int) -> None:
    from basht.workloads.lcbench import OPTIMA, reference, tasks

    found = {}
    for task in tasks():
        found[task] = reference(task, samples)
        print(f"task {task}: best {found[task]['best']:.3f}", file=sys.stderr)
    OPTIMA.write_text(
        json.dumps(
            {
                "about": "per task, the best, worst and median val_accuracy (percent) at epoch 52 "
                "of a uniform (log-uniform where the space says) random sample of the surrogate; "
                "written by benchmarks/lcbench.py --optima",
                "tasks": found,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {OPTIMA}")


@functools.cache  # a process runs many units of one task
def median_trial_s(task: str) -> float:
    """The median seconds of a 52-epoch trial, over 1,000 random configurations."""
    import numpy as np

    from basht.tune.samplers import RandomSampler
    from basht.workloads.lcbench import OUTPUTS, predict, space

    sampler = RandomSampler(space(), 12345)
    curves = predict(task, [sampler.next() for _ in range(1000)])
    elapsed = np.maximum.accumulate(np.maximum(curves[:, :, OUTPUTS.index("time")], 0), axis=1)
    return float(np.median(elapsed[:, -1]))


def experiment(task: str, sampler: str, pruner: str, seed: int) -> dict[str, Any]:
    from basht.workloads.lcbench import space

    return {
        "name": "lcbench",
        "seed": seed,
        "workload": {"name": "lcbench", "params": {"task": task}},
        "space": space(),
        "search": {
            "sampler": sampler,
            "pruner": pruner,
            "metric": "val_accuracy",
            "mode": "max",
            "min_budget": 1,
            "max_budget": EPOCHS,
            "eta": 3,
            "max_trials": 1_000_000,  # the simulated time ends each job
        },
    }


def basht_job(task: str, method: str, seed: int, workers: int, budget_s: float) -> dict:
    """One Basht job: the completions (time, val_accuracy) within the budget, and its wall time."""
    from basht.experiment import Experiment
    from basht.tune.factory import make_algorithm
    from basht.tune.simulate import simulate
    from basht.workloads.lcbench import LCBenchCurve

    sampler, pruner, variant = BASHT[method]
    algorithm = make_algorithm(
        Experiment.from_dict(experiment(task, sampler, pruner, seed)),
        can_checkpoint=variant == "promotion",
    )
    start = time.perf_counter()
    result = simulate(
        algorithm,
        workers,
        LCBenchCurve(task),
        max_time_s=budget_s,
        seed=seed,
        record_completions=True,
    )
    wall_s = time.perf_counter() - start
    done = [(at, m["val_accuracy"]) for at, m in result.completed if at <= budget_s]
    return {"completed": done, "wall_s": wall_s}


def _blackbox(task: str) -> Any:
    """The surrogate as a Syne Tune blackbox: val_accuracy and cumulative seconds per epoch."""
    import numpy as np
    from syne_tune.blackbox_repository.blackbox import Blackbox
    from syne_tune.config_space import lograndint, loguniform, randint, uniform

    from basht.workloads.lcbench import OUTPUTS, predict, space

    def domain(spec: dict[str, Any]) -> Any:
        low, high, log = spec["low"], spec["high"], spec.get("log", False)
        if spec["type"] == "int":
            return lograndint(low, high) if log else randint(low, high)
        return loguniform(low, high) if log else uniform(low, high)

    class Surrogate(Blackbox):
        def __init__(self) -> None:
            super().__init__(
                configuration_space={k: domain(v) for k, v in space().items()},
                fidelity_space={"epoch": randint(1, EPOCHS)},
                objectives_names=["val_accuracy", "time"],
            )

        @property
        def fidelity_values(self) -> np.ndarray:
            return np.arange(1, EPOCHS + 1)

        def _objective_function(self, configuration, fidelity=None, seed=None):
            curve = predict(task, [configuration])[0]
            accuracy = curve[:, OUTPUTS.index("val_accuracy")].astype(float)
            # The same clock Basht's simulator runs on: time spent stays spent.
            elapsed = np.maximum.accumulate(np.maximum(curve[:, OUTPUTS.index("time")], 0.0))
            values = np.stack([accuracy, elapsed.astype(float)], axis=1)
            if fidelity is None:
                return values
            return dict(zip(self.objectives_names, values[int(fidelity["epoch"]) - 1], strict=True))

    return Surrogate()


def synetune_job(
    task: str, method: str, seed: int, workers: int, budget_s: float, step_s: float
) -> dict:
    """One Syne Tune job on its simulator backend, with the same budget and workers; its clock
    steps `step_s` at a time while every worker is busy (`SYNE_TUNE_STEP`)."""
    from syne_tune import StoppingCriterion, Tuner
    from syne_tune.backend.simulator_backend.simulator_backend import SimulatorConfig
    from syne_tune.backend.simulator_backend.simulator_callback import SimulatorCallback
    from syne_tune.blackbox_repository.simulated_tabular_backend import UserBlackboxBackend
    from syne_tune.optimizer.baselines import ASHA

    blackbox = _blackbox(task)
    backend = UserBlackboxBackend(
        blackbox=blackbox,
        elapsed_time_attr="time",
        seed=seed,
        tuner_sleep_time=step_s,
        # No start, stop or report delays: Basht's simulator models none on LCBench either.
        simulator_config=SimulatorConfig(0.0, 0.0, 0.0, 0.0, 0.0),
    )
    scheduler = ASHA(
        blackbox.configuration_space,
        metric="val_accuracy",
        do_minimize=False,
        time_attr="epoch",
        max_t=EPOCHS,
        grace_period=1,
        reduction_factor=3,
        brackets=SYNE_TUNE[method],
        random_seed=seed,
    )
    callback = SimulatorCallback()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        os.environ["SYNETUNE_FOLDER"] = folder
        tuner = Tuner(
            trial_backend=backend,
            scheduler=scheduler,
            stop_criterion=StoppingCriterion(max_wallclock_time=budget_s),
            n_workers=workers,
            sleep_time=0,
            callbacks=[callback],
            results_update_interval=1e9,
            print_update_interval=1e9,
            save_tuner=False,
        )
        with contextlib.redirect_stdout(io.StringIO()):  # its banners, not our table
            tuner.run()
        frame = callback.dataframe()
    wall_s = time.perf_counter() - start
    final = frame[frame["epoch"] == EPOCHS]
    done = sorted(
        (float(t), float(v))
        for t, v in zip(final["st_tuner_time"], final["val_accuracy"], strict=True)
        if t <= budget_s
    )
    return {"completed": done, "wall_s": wall_s}


def regret_at(done: list[tuple[float, float]], at: float, best: float, worst: float) -> float:
    """Normalised regret of the best trial trained to 52 epochs by `at` (1: none yet)."""
    reached = [v for t, v in done if t <= at]
    if not reached:
        return 1.0
    return (best - max(reached)) / (best - worst)


def run_unit(
    task: str, workers: int, seed: int, budget: float, methods: list[str], step: float
) -> dict:
    """Every method's job for one task, worker count and seed, run back to back in one process,
    so each simulator's wall time is taken on the same machine under the same load. `step`:
    Syne Tune's simulator step as a fraction of the task's median epoch (`SYNE_TUNE_STEP`)."""
    from basht.workloads.lcbench import optima

    known = optima()[task]
    budget_s = budget * median_trial_s(task)
    step_s = step * median_trial_s(task) / EPOCHS
    out: dict[str, Any] = {}
    for method in methods:
        if method in BASHT:
            run = basht_job(task, method, seed, workers, budget_s)
        else:
            run = synetune_job(task, method, seed, workers, budget_s, step_s)
        out[method] = {
            "regret": {
                str(f): regret_at(run["completed"], f * budget_s, known["best"], known["worst"])
                for f in FRACTIONS
            },
            "trained_to_max": len(run["completed"]),
            "wall_s": run["wall_s"],
        }
    return {
        "task": task,
        "workers": workers,
        "seed": seed,
        "budget_s": budget_s,
        "synetune_step": step,
        "synetune_step_s": step_s,
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "methods": out,
    }


def _prepare_worker(methods: list[str]) -> None:
    """Import both simulators before the first unit, so neither one's wall time holds imports."""
    logging.getLogger("syne_tune").setLevel(logging.WARNING)
    import basht.tune.simulate  # noqa: F401
    import basht.workloads.lcbench  # noqa: F401

    if any(m in SYNE_TUNE for m in methods):
        import syne_tune.backend.simulator_backend.simulator_callback  # noqa: F401
        import syne_tune.blackbox_repository.simulated_tabular_backend  # noqa: F401
        import syne_tune.optimizer.baselines  # noqa: F401


def run_units(
    units: list[tuple[str, int, int]],
    budget: float,
    methods: list[str],
    runs_file: Path,
    jobs: int,
    stop_after_s: float | None,
    step: float,
) -> None:
    """Run the units not yet in `runs_file`, appending each as one JSON line when it ends: a
    killed or time-boxed run keeps every unit it finished, and the next one goes on from there.
    `stop_after_s`: start no unit after this many seconds (the ones running still end). A unit
    some of whose methods ran already runs the others only."""
    ran = {
        (u["task"], u["workers"], u["seed"]): set(u["methods"])
        for u in read_unit_parts(runs_file, step)
    }
    todo = [
        (unit, [m for m in methods if m not in ran.get(unit, set())])
        for unit in units
        if not set(methods) <= ran.get(unit, set())
    ]
    print(f"{len(units) - len(todo)} of {len(units)} units already in {runs_file}", file=sys.stderr)
    began = time.monotonic()
    runs_file.parent.mkdir(parents=True, exist_ok=True)
    with (
        runs_file.open("a") as sink,
        ProcessPoolExecutor(jobs, initializer=_prepare_worker, initargs=(methods,)) as pool,
    ):
        if sink.tell() and not runs_file.read_bytes().endswith(b"\n"):
            sink.write("\n")  # a line cut short by a kill stays on its own (and is skipped)
        pending = set()
        queue = iter(todo)
        while True:
            while len(pending) < jobs and (
                stop_after_s is None or time.monotonic() - began < stop_after_s
            ):
                unit, missing = next(queue, (None, None))
                if unit is None:
                    break
                pending.add(pool.submit(run_unit, *unit, budget, missing, step))
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                record = future.result()
                sink.write(json.dumps(record) + "\n")
                sink.flush()
                print(
                    f"task {record['task']} x {record['workers']} workers, seed "
                    f"{record['seed']} done",
                    file=sys.stderr,
                )


def read_runs(runs_file: Path, methods: list[str], step: float) -> list[dict]:
    """The units in `runs_file` that ran every one of `methods`, Syne Tune's at `step`. A unit may
    have been run in parts (`--methods`, then the rest): its lines merge, a later method's result
    replacing an earlier one."""
    return with_methods(read_unit_parts(runs_file, step), methods)


def with_methods(units: list[dict], methods: list[str]) -> list[dict]:
    """The units that ran every one of `methods`."""
    return [u for u in units if set(methods) <= set(u["methods"])]


def read_unit_parts(runs_file: Path, step: float) -> list[dict]:
    """Every unit in `runs_file` with the methods it ran so far (Syne Tune's at `step` only)."""
    if not runs_file.exists():
        return []
    units: dict[tuple[str, int, int], dict] = {}
    for line in runs_file.read_text().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill: that unit runs again
        ran = {
            m: r
            for m, r in record["methods"].items()
            if m not in SYNE_TUNE or record.get("synetune_step") == step
        }
        key = (record["task"], record["workers"], record["seed"])
        unit = units.setdefault(key, {**record, "methods": {}})
        unit["methods"].update(ran)
        if ran.keys() & SYNE_TUNE.keys():
            unit["synetune_step"], unit["synetune_step_s"] = step, record.get("synetune_step_s")
    return list(units.values())


def case_rows(units: list[dict], methods: list[str]) -> list[dict]:
    """One row per task, worker count and method: medians over the seeds run, and the rank of
    each method within its task and worker count (by its median regret at the end)."""
    cases: dict[tuple[str, int], list[dict]] = {}
    for unit in units:
        cases.setdefault((unit["task"], unit["workers"]), []).append(unit)
    rows = []
    for (task, workers), runs in sorted(cases.items(), key=lambda c: (c[0][1], c[0][0])):
        mine = []
        for method in methods:
            results = [r["methods"][method] for r in runs]
            mine.append(
                {
                    "task": task,
                    "workers": workers,
                    "method": method,
                    "seeds": len(results),
                    "budget_s": runs[0]["budget_s"],
                    "median_normalised_regret": {
                        str(f): statistics.median(r["regret"][str(f)] for r in results)
                        for f in FRACTIONS
                    },
                    "median_trained_to_max": statistics.median(
                        r["trained_to_max"] for r in results
                    ),
                    "wall_s": sum(r["wall_s"] for r in results),
                }
            )
        ranked = sorted(mine, key=lambda r: r["median_normalised_regret"]["1.0"])
        for rank, row in enumerate(ranked, start=1):
            row["rank"] = rank
        rows += mine
    return rows


def summarise(rows: list[dict], compared_rows: list[dict]) -> dict[str, Any]:
    """Each method's medians over the tasks (`rows`: units that ran every method), and Basht's
    ASHA against Syne Tune's (`compared_rows`: every unit that ran those three, a grid whose
    other methods are not all run yet included)."""
    by = {(r["task"], r["workers"], r["method"]): r for r in rows}
    cases = sorted({(r["task"], r["workers"]) for r in rows})
    summary: dict[str, Any] = {"methods": {}}
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [by[c + (method,)] for c in cases if c + (method,) in by]
        summary["methods"][method] = {
            "median_regret_at": {
                str(f): statistics.median(r["median_normalised_regret"][str(f)] for r in mine)
                for f in FRACTIONS
            },
            "median_rank": statistics.median(r["rank"] for r in mine),
            "wall_s": sum(r["wall_s"] for r in mine),
        }
    summary.update(compare_ashas(compared_rows))
    return summary


def compare_ashas(rows: list[dict]) -> dict[str, Any]:
    """In how many task x workers cases each of Basht's ASHAs has a median regret no higher than
    Syne Tune's ASHA at the end of the budget, and Syne Tune's wall time over Basht's."""
    by = {(r["task"], r["workers"], r["method"]): r for r in rows}
    cases = sorted({(r["task"], r["workers"]) for r in rows})
    methods: dict[str, float] = {}
    for r in rows:
        methods[r["method"]] = methods.get(r["method"], 0.0) + r["wall_s"]
    summary: dict[str, Any] = {}
    if "Syne Tune ASHA" not in methods:
        return summary
    summary["asha_comparison_units"] = sum(
        r["seeds"] for r in rows if r["method"] == "Syne Tune ASHA"
    )
    for mine, key in (("ASHA", "basht_asha"), ("ASHA (stopping)", "basht_stopping_asha")):
        if mine not in methods:
            continue
        no_worse = [
            f"{task}@{workers}"
            for task, workers in cases
            if by[(task, workers, mine)]["median_normalised_regret"]["1.0"]
            <= by[(task, workers, "Syne Tune ASHA")]["median_normalised_regret"]["1.0"]
        ]
        summary[f"{key}_no_worse_than_synetune_asha"] = {
            "cases": len(no_worse),
            "of": len(cases),
            "which": no_worse,
        }
        basht_s, syne_s = methods[mine], methods["Syne Tune ASHA"]
        ratio = syne_s / basht_s if basht_s else None
        summary[f"{key}_wall_time_ratio_synetune_over_basht"] = ratio
    return summary


def print_tables(summary: dict[str, Any], title: str) -> None:
    table = Table(title=f"LCBench: median normalised regret, {title}")
    for column in ("method", *(f"regret @{int(f * 100)}%" for f in FRACTIONS), "rank", "wall (s)"):
        table.add_column(column, justify="left" if column == "method" else "right")
    for method, s in summary["methods"].items():
        table.add_row(
            method,
            *(f"{s['median_regret_at'][str(f)]:.4f}" for f in FRACTIONS),
            f"{s['median_rank']:g}",
            f"{s['wall_s']:.1f}",
        )
    Console().print(table)
    for key, name in (("basht_asha", "ASHA (promotion)"), ("basht_stopping_asha", "stopping ASHA")):
        c = summary.get(f"{key}_no_worse_than_synetune_asha")
        if c is None:
            continue
        print(
            f"Basht's {name}: median regret no higher than Syne Tune's ASHA in {c['cases']} of "
            f"{c['of']} task x workers cases ({summary['asha_comparison_units']} units); Syne "
            f"Tune's simulator took {summary[f'{key}_wall_time_ratio_synetune_over_basht']:.1f}x "
            "its wall time for the same jobs"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--optima", action="store_true", help="write the per-task optima")
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=34, help="the first N of the 34 tasks")
    parser.add_argument(
        "--task-ids", default=None, help="comma-separated task ids instead (e.g. 3945,7593)"
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", default="4,32")
    parser.add_argument("--budget", type=float, default=20.0)
    parser.add_argument("--no-synetune", action="store_true")
    parser.add_argument(
        "--synetune-step",
        type=float,
        default=SYNE_TUNE_STEP,
        help="Syne Tune's simulator step, a fraction of the task's median epoch",
    )
    parser.add_argument(
        "--methods", nargs="+", choices=[*BASHT, *SYNE_TUNE], default=None, help="default: all"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "lcbench.json")
    parser.add_argument(
        "--runs", type=Path, default=None, help="one JSON line per unit run (default: beside --out)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="units run at once, one process each")
    parser.add_argument(
        "--stop-after-s", type=float, default=None, help="start no unit after this many seconds"
    )
    parser.add_argument(
        "--summarise-only", action="store_true", help="run nothing: summarise --runs as it is"
    )
    args = parser.parse_args()
    if args.optima:
        write_optima(args.samples)
        return
    from basht.workloads.lcbench import optima, tasks

    methods = args.methods or [*BASHT, *SYNE_TUNE]
    if args.no_synetune:
        methods = [m for m in methods if m in BASHT]
    syne = any(m in SYNE_TUNE for m in methods)
    logging.getLogger("syne_tune").setLevel(logging.WARNING)
    if syne:
        try:
            import syne_tune  # noqa: F401
        except ImportError:
            raise SystemExit("Syne Tune is not installed: pip install 'basht[peers]'") from None
    chosen = list(tasks()[: args.tasks])
    if args.task_ids:
        chosen = args.task_ids.split(",")
        unknown = [t for t in chosen if t not in tasks()]
        if unknown:
            raise SystemExit(f"--task-ids: {unknown[0]} is not an LCBench task")
    missing = [t for t in chosen if t not in optima()]
    if missing:
        raise SystemExit(f"no optimum stored for task {missing[0]}: run lcbench.py --optima")
    workers = [int(w) for w in args.workers.split(",")]
    units = [(task, n, seed) for n in workers for task in chosen for seed in range(args.seeds)]
    runs_file = args.runs or args.out.with_suffix(".runs.jsonl")
    if not args.summarise_only:
        run_units(
            units, args.budget, methods, runs_file, args.jobs, args.stop_after_s, args.synetune_step
        )
    wanted = set(units)
    parts = [
        u
        for u in read_unit_parts(runs_file, args.synetune_step)
        if (u["task"], u["workers"], u["seed"]) in wanted
    ]
    ran = with_methods(parts, methods)
    if not ran:
        raise SystemExit(f"no unit of this grid in {runs_file} yet")
    rows = case_rows(ran, methods)
    compared_rows = []
    ashas = [m for m in ASHAS if m in methods]  # Syne Tune's and Basht's run here
    if "Syne Tune ASHA" in ashas and len(ashas) > 1:
        compared_rows = case_rows(with_methods(parts, ashas), ashas)
    setting = {
        "tasks": len(chosen),
        "task_ids": chosen,
        "seeds": args.seeds,
        "workers": workers,
        "methods": methods,
        "budget": f"{args.budget:g} x the task's median 52-epoch trial seconds",
        "synetune_step": f"{args.synetune_step:g} x the task's median epoch seconds",
        "regret": "normalised: (sample best - best trained to 52 epochs) / (best - worst)",
        "machines": sorted({u["machine"] for u in ran}),
    }
    summary = {}
    for n in workers:
        mine = [r for r in rows if r["workers"] == n]
        if not mine:
            continue
        units_run = sum(u["workers"] == n for u in ran)
        units_all = len(chosen) * args.seeds
        tasks_run = len({r["task"] for r in mine})
        key = f"{n} workers"
        summary[key] = {
            "units": f"{units_run} of {units_all} (task x seed) run, on {tasks_run} tasks",
            **summarise(mine, [r for r in compared_rows if r["workers"] == n]),
        }
        print_tables(summary[key], f"{n} workers: {summary[key]['units']}")
    write_results(args.out, "lcbench", {"setting": setting, "summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
