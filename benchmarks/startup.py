"""What a user waits for: whole `basht` processes, start to exit, beside Optuna's.

Three measurements, each of a real process started as a user starts it (a subprocess of the
console scripts installed beside this interpreter, stdout to /dev/null, no BASHT_* settings):

* CLI start-up: `basht --help`, `basht validate examples/digits-asha.yaml` and, for reference,
  `optuna --help`; the median wall time of `--repeats` runs each, interleaved.
* The ends of a small run: `basht run examples/sleep-smoke.yaml` (8 trials, default progress and
  plots, a new store), timed from starting the process to the first trial starting and from the
  last trial ending to the process's exit; trial times come from the store (unix times), the
  process's own from this script. Median of `--runs` runs.
* The whole process, side by side: `--trials` (200) trials of the zero-cost 27-epoch curve of
  `benchmarks/peers_overhead.py` (the `sleep` workload with `epoch_s: 0`, ASHA min 1 max 27 eta 3,
  its search space), on 2 workers, as
  - Basht: `basht run FILE` of that experiment file in a new folder (a new store) with default
    plots and progress, so the time covers interpreter start, imports, starting the workers, the
    seven phases, results.json, the printed report, the four plots and the process's exit; and
    the same with the store made beforehand, as every run after a folder's first finds it
    (making a new store is shown by the difference);
  - Optuna: one `python` process that runs `peers_overhead.run_optuna`: a study in a new
    JournalStorage file, `SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)`, 2 spawned
    processes each running its share of the trials, reporting 27 epochs of the same curve. Its
    processes also import `peers_overhead` (and so rich, which Optuna does not need): what that
    import costs is measured and printed beside it, and counts against Optuna.
  Each is run `--runs` times, interleaved so that a burst of load on the machine hits both alike,
  and shown by its median. ms/trial is the whole wall time over the trials; the ratio is Basht's
  over Optuna's. CPU (s) is the user + system time of the process and all its children, a check
  on the wall times when the machine is shared.

    python benchmarks/startup.py [--repeats 7] [--runs 5] [--trials 200] [--workers 2]
        [--skip cli smoke whole]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _results import write_results
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from peers_overhead import EPOCHS, ETA, asha_experiment  # noqa: E402


def executable(name: str) -> str:
    """The console script installed beside this interpreter (not a shell shim in front of it)."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} is not installed")
    return found


def clean_env() -> dict[str, str]:
    """This environment without settings that change what `basht` does (BASHT_PLOTS, say)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("BASHT_")}


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_process(cmd: list[str], cwd: Path | None = None) -> dict[str, Any]:
    """Run `cmd` to its exit: its unix start and exit, wall and CPU seconds, and its stdout."""
    cpu, start_unix, start = children_cpu_s(), time.time(), time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")
    return {
        "started": start_unix,
        "exited": start_unix + seconds,
        "wall_s": seconds,
        "cpu_s": children_cpu_s() - cpu,
        "stdout": done.stdout,
    }


# -- CLI start-up --------------------------------------------------------------------------------


def cli_startup(repeats: int) -> dict[str, list[float]]:
    basht, optuna = executable("basht"), executable("optuna")
    commands = {
        "basht --help": [basht, "--help"],
        "basht validate examples/digits-asha.yaml": [
            basht,
            "validate",
            str(ROOT / "examples" / "digits-asha.yaml"),
        ],
        "optuna --help": [optuna, "--help"],
    }
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, cmd in commands.items():
            samples[name].append(timed_process(cmd, cwd=ROOT)["wall_s"])
    return samples


# -- basht run: its ends, and its whole --------------------------------------------------------


def basht_run(experiment: Path, folder: Path, *, store_there: bool = False) -> dict[str, Any]:
    """`basht run` of `experiment` in `folder`, with a new store there (or, with `store_there`,
    one made beforehand, as every run after a folder's first finds it); the process's times,
    and the run's from the store."""
    from basht.store import Store

    store = f"sqlite:///{folder / 'basht.db'}"
    if store_there:
        Store(store).close()
    results = folder / "results"
    cmd = [executable("basht"), "run", str(experiment), "--results", str(results), "--store", store]
    process = timed_process(cmd, cwd=folder)
    db = Store(store, create=False)
    try:
        run = db.list_runs(1)[0]
        trials = db.trials(run.id)
        phases = {p.name: (p.start, p.end) for p in db.phases(run.id)}
        first = min(t.started_at for t in trials if t.started_at is not None)
        last = max(t.ended_at for t in trials if t.ended_at is not None)
        status, results_dir = run.status, Path(run.results_dir)
    finally:
        db.close()
    if status != "completed":
        raise SystemExit(f"basht run of {experiment} ended {status}")
    return {
        "wall_s": process["wall_s"],
        "cpu_s": process["cpu_s"],
        "to_first_trial_s": first - process["started"],
        "trials_s": last - first,
        "after_last_trial_s": process["exited"] - last,
        "to_deploy_s": phases["deploy"][0] - process["started"],
        "after_undeploy_s": process["exited"] - phases["undeploy"][1],
        "phases_s": {name: end - start for name, (start, end) in phases.items()},
        "trials": len(trials),
        "files": sorted(p.name for p in results_dir.iterdir() if p.is_file()),
    }


def zero_cost_experiment(path: Path, trials: int, workers: int, seed: int) -> Path:
    """peers_overhead's workload as an experiment file: its curve, space and ASHA settings."""
    experiment = asha_experiment("startup-zero-cost", trials, workers, seed)
    path.write_text(json.dumps(experiment, indent=2) + "\n")
    return path


# -- Optuna: the same work, one process with two spawned ones ------------------------------------

OPTUNA_DRIVER = """
import json, sys, time
sys.path.insert(0, {here!r})
from peers_overhead import run_optuna
row = run_optuna({trials}, {workers}, {seed})
print(json.dumps({{"run_s": row.run_s, "total_s": row.total_s, "trials": row.trials,
                  "completed": row.completed, "storage": row.other["storage"],
                  "done": time.time()}}))
"""


def optuna_run(trials: int, workers: int, seed: int, folder: Path) -> dict[str, Any]:
    code = OPTUNA_DRIVER.format(here=str(HERE), trials=trials, workers=workers, seed=seed)
    process = timed_process([sys.executable, "-c", code], cwd=folder)
    inner = json.loads(process["stdout"].strip().splitlines()[-1])
    if inner["trials"] != trials:
        raise SystemExit(f"Optuna ran {inner['trials']} trials, not {trials}")
    return {
        "wall_s": process["wall_s"],
        "cpu_s": process["cpu_s"],
        "run_s": inner["run_s"],
        "in_process_total_s": inner["total_s"],
        "after_optimize_s": process["exited"] - inner["done"],
        "trials": inner["trials"],
        "completed": inner["completed"],
        "storage": inner["storage"],
    }


def harness_import_s(repeats: int) -> float:
    """What importing `peers_overhead` adds to a process that imports Optuna (median)."""
    plain: list[float] = []
    harness: list[float] = []
    with_harness = f"import sys; sys.path.insert(0, {str(HERE)!r}); import optuna, peers_overhead"
    for _ in range(repeats):
        plain.append(timed_process([sys.executable, "-c", "import optuna"])["wall_s"])
        harness.append(timed_process([sys.executable, "-c", with_harness])["wall_s"])
    return statistics.median(harness) - statistics.median(plain)


# -- report --------------------------------------------------------------------------------------


def median_by(samples: list[dict[str, Any]], key: str = "wall_s") -> dict[str, Any]:
    """The sample with the median `key`, with every sample's `key` beside it."""
    ordered = sorted(samples, key=lambda s: s[key])
    return ordered[(len(ordered) - 1) // 2] | {f"{key}_samples": [s[key] for s in samples]}


def new_folder(tmp: Path, name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs of each CLI command")
    parser.add_argument("--runs", type=int, default=5, help="runs of each `run` measurement")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="*", choices=("cli", "smoke", "whole"), default=[])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "startup.json")
    args = parser.parse_args()
    console = Console(width=160)
    record: dict[str, Any] = {}

    if "cli" not in args.skip:
        cli = cli_startup(args.repeats)
        table = Table(title="start-up: wall time of the whole process", title_justify="left")
        table.add_column("command")
        table.add_column("median (s)", justify="right")
        table.add_column("samples (s)")
        for name, got in cli.items():
            table.add_row(name, f"{statistics.median(got):.3f}", " ".join(f"{s:.2f}" for s in got))
        console.print(table)
        record["cli_s"] = {
            name: {"median": statistics.median(got), "samples": got} for name, got in cli.items()
        }

    with tempfile.TemporaryDirectory() as tmp:
        if "smoke" not in args.skip:
            smoke_runs = [
                basht_run(ROOT / "examples" / "sleep-smoke.yaml", new_folder(Path(tmp), "smoke"))
                for _ in range(args.runs)
            ]
            smoke = median_by(smoke_runs)
            table = Table(
                title="basht run examples/sleep-smoke.yaml (8 trials, default progress and "
                f"plots; median of {args.runs})",
                title_justify="left",
            )
            for column in (
                "whole (s)",
                "to first trial (s)",
                "trials (s)",
                "after last trial (s)",
                "CPU (s)",
            ):
                table.add_column(column, justify="right")
            table.add_row(
                f"{smoke['wall_s']:.3f}",
                f"{smoke['to_first_trial_s']:.3f}",
                f"{smoke['trials_s']:.3f}",
                f"{smoke['after_last_trial_s']:.3f}",
                f"{smoke['cpu_s']:.2f}",
            )
            console.print(table)
            record["sleep_smoke"] = smoke | {"samples": smoke_runs}

        if "whole" not in args.skip:
            record["whole_process"] = whole_process(args, Path(tmp), console)

    import optuna

    import basht

    write_results(
        args.out,
        "startup",
        {"versions": {"basht": basht.__version__, "optuna": optuna.__version__}, **record},
    )


def whole_process(args: argparse.Namespace, tmp: Path, console: Console) -> dict[str, Any]:
    """Basht's `basht run` (a new store, and one already there) and Optuna's process on the
    same work, interleaved; the table."""
    ours_runs: list[dict[str, Any]] = []
    there_runs: list[dict[str, Any]] = []
    theirs_runs: list[dict[str, Any]] = []
    for i in range(args.runs):
        for runs, store_there in ((ours_runs, False), (there_runs, True)):
            folder = new_folder(tmp, "basht")
            experiment = zero_cost_experiment(
                folder / "zero-cost.json", args.trials, args.workers, args.seed
            )
            runs.append(basht_run(experiment, folder, store_there=store_there))
        theirs_runs.append(
            optuna_run(args.trials, args.workers, args.seed, new_folder(tmp, "optuna"))
        )
        console.log(
            f"repeat {i + 1}: basht {ours_runs[-1]['wall_s']:.2f} s (store there: "
            f"{there_runs[-1]['wall_s']:.2f} s), Optuna {theirs_runs[-1]['wall_s']:.2f} s"
        )
    ours, there, theirs = median_by(ours_runs), median_by(there_runs), median_by(theirs_runs)
    extra_import_s = harness_import_s(args.repeats)
    ratio = ours["wall_s"] / theirs["wall_s"]
    table = Table(
        title=f"{args.trials} trials x up to {EPOCHS} epochs of a zero-cost curve, ASHA eta {ETA}, "
        f"{args.workers} workers: the whole process, median of {args.runs}",
        title_justify="left",
    )
    for column in (
        "system",
        "whole (s)",
        "ms/trial",
        "vs Optuna",
        "to first trial (s)",
        "trials (s)",
        "after last trial (s)",
        "CPU (s)",
    ):
        table.add_column(column, justify="left" if column == "system" else "right")
    for label, row in (("basht run (a new store)", ours), ("basht run (its store there)", there)):
        table.add_row(
            label,
            f"{row['wall_s']:.2f}",
            f"{row['wall_s'] / args.trials * 1000:.1f}",
            f"{row['wall_s'] / theirs['wall_s']:.2f}x",
            f"{row['to_first_trial_s']:.2f}",
            f"{row['trials_s']:.2f}",
            f"{row['after_last_trial_s']:.2f}",
            f"{row['cpu_s']:.2f}",
        )
    table.add_row(
        f"Optuna ({args.workers} processes, {theirs['storage']} storage)",
        f"{theirs['wall_s']:.2f}",
        f"{theirs['wall_s'] / args.trials * 1000:.1f}",
        "1.00x",
        "",
        f"{theirs['run_s']:.2f}",
        f"{theirs['after_optimize_s']:.2f}",
        f"{theirs['cpu_s']:.2f}",
    )
    console.print(table)
    phases = ", ".join(f"{k} {v:.3f}" for k, v in ours["phases_s"].items())
    console.print(
        f"basht's phases (s): {phases}; before deploy {ours['to_deploy_s']:.3f}, after undeploy "
        f"{ours['after_undeploy_s']:.3f}. Optuna's `trials` is the span of its optimize calls, "
        f"and its processes each import peers_overhead too: +{extra_import_s * 1000:.0f} ms a "
        "process, counted in Optuna's time.",
        soft_wrap=True,
    )
    return {
        "trials": args.trials,
        "workers": args.workers,
        "epochs": EPOCHS,
        "eta": ETA,
        "seed": args.seed,
        "basht": ours | {"ms_per_trial": ours["wall_s"] / args.trials * 1000},
        "basht_store_there": there
        | {
            "ms_per_trial": there["wall_s"] / args.trials * 1000,
            "ratio_over_optuna": there["wall_s"] / theirs["wall_s"],
        },
        "optuna": theirs
        | {
            "ms_per_trial": theirs["wall_s"] / args.trials * 1000,
            "harness_import_s": extra_import_s,
        },
        "ratio_basht_over_optuna": ratio,
        "basht_samples": ours_runs,
        "basht_store_there_samples": there_runs,
        "optuna_samples": theirs_runs,
    }


if __name__ == "__main__":
    main()
