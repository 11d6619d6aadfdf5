"""Crash consistency, tried: a real ASHA run killed with SIGKILL again and again, resumed each time
and checked against an uninterrupted run; and a run whose trials kill, abort or starve their
workers.

Coordinator kills. `basht run` of a deterministic ASHA experiment (the `sleep` curve, one worker,
a checkpoint at every pause) is killed with SIGKILL `--kills` times in one run: at failpoints
(`BASHT_FAILPOINTS`: during deploy, as a trial is dispatched or promoted, at a report, while a
pause's checkpoint is being recorded, as a trial finishes, during result collection and the test;
one armed per attempt, in turn, see `IN_SEARCH`) and at random moments from outside. After each kill `basht resume latest` runs in the same folder
without `--store`, at once. After every kill it checks that

* no process of the run is left (its workers end once their driver is gone);
* every trial the store held as finished (completed, stopped, failed) after an earlier kill is
  still there, once, with the same state, value, budget and reports, and no trial number or (trial, epoch) report is there twice;
* every checkpoint the store holds as live is a whole file that loads;

and at the end that the run completed, that its decision log replays on a fresh algorithm to the
same decisions, and that its best configuration and value and every trial's outcome equal those
of an uninterrupted run of the same file.

Worker faults. A run on two workers whose every k-th trial faults in its first epoch (SIGKILL of
its worker, `os.abort()`, an allocation past `resources.limit_memory`, an exception; see
`chaos_workload.py`): each faulted trial fails with a reason that says how, a new worker takes the
dead one's place, every other trial completes, the run completes, and no process is left.

Both on SQLite and on PostgreSQL (a throwaway server on 127.0.0.1, `tests/postgres.py`), where the
server is also stopped mid-run and started again: the run ends with one line (exit code 2) and is
resumed like the killed ones.

    python benchmarks/chaos.py [--kills 20] [--trials 60] [--fault-every 4] [--seed 0]
        [--stores sqlite postgres] [--out benchmarks/results/chaos.json]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for where in (HERE, ROOT):
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))

from _results import write_results  # noqa: E402
from chaos_workload import fault_of  # noqa: E402

from basht.engine.checkpoints import load_state  # noqa: E402
from basht.errors import StoreError  # noqa: E402
from basht.experiment import DERIVED_KEYS, Experiment  # noqa: E402
from basht.store import Store  # noqa: E402
from basht.tune import replay  # noqa: E402
from basht.tune.factory import make_algorithm  # noqa: E402
from basht.tune.tuner import trial_seed  # noqa: E402

#: The kills, in turn: each attempt arms one failpoint (or none: killed from outside at a random
#: moment), with the chance that it kills the process each time it is reached, so that the
#: attempt gets some way first. `collect` is armed in every attempt but the last two, so that one
#: that gets past the search dies there; the last two kills are at collect and at the test.
IN_SEARCH = {
    "outside": 0.0,
    "deploy": 1.0,
    "dispatch": 0.2,
    "report": 0.05,
    "promotion": 0.3,
    "checkpoint": 0.3,
    "finish": 1.0,
}
AT_THE_END = ("collect", "test")


def aimed_at(kill: int, kills: int) -> tuple[str, dict[str, float]]:
    """Where the attempt that is to make kill number `kill` (0-based) aims, and the failpoints
    it arms for that."""
    last = kills - len(AT_THE_END)
    if kill >= last:
        point = AT_THE_END[kill - last]
        return point, {point: 1.0}
    point = list(IN_SEARCH)[kill % len(IN_SEARCH)]
    return point, {"collect": 1.0} | ({} if point == "outside" else {point: IN_SEARCH[point]})


#: States a trial ends in for good: once stored, they must stay as they are.
FINISHED = ("completed", "stopped", "failed")


class ChaosFailure(AssertionError):
    """A promise broken: something lost, changed, left behind, or a run that did not end well."""


@dataclass
class Outcome:
    """What one chaos run tried and what survived."""

    store: str
    kills: int = 0
    moments: collections.Counter[str] = field(default_factory=collections.Counter)
    attempts: int = 0
    server_restarts: int = 0
    trials: int = 0
    completed_seen: int = 0
    checkpoints_checked: int = 0
    leftovers: int = 0
    same_result: bool = False
    replayed: int = 0
    seconds: float = 0.0


def experiment(store_url: str, trials: int, *, workers: int = 1, **params: Any) -> dict[str, Any]:
    """A deterministic ASHA run on the sleep curve: one worker, so an uninterrupted run of the
    same file decides exactly as a killed and resumed one must."""
    return {
        "name": "chaos",
        "seed": 7,
        "workload": {
            "name": "chaos_workload:FaultyCurve",
            "params": {"epoch_s": 0.05, **params},
        },
        "space": {"x": {"type": "float", "low": -1.0, "high": 1.0}},
        "search": {
            "sampler": "random",
            "pruner": "asha",
            "metric": "accuracy",
            "mode": "max",
            "min_budget": 1,
            "max_budget": 9,
            "eta": 3,
            "max_trials": trials,
        },
        "resources": {"workers": workers, "memory_per_worker_mb": 512, "limit_memory": True},
        "store": store_url,
    }


def cli_env(tag: str, **extra: str) -> dict[str, str]:
    """The CLI's environment: Basht and the chaos workload importable, a tag that finds every
    process of the run (workers inherit it), no plots."""
    path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "PYTHONPATH": path,
        "BASHT_PLOTS": "0",
        "BASHT_CHAOS_TAG": tag,
        **extra,
    }


def tagged(tag: str) -> list[psutil.Process]:
    """The live processes that carry `tag` (the run's driver and workers)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("BASHT_CHAOS_TAG") == tag and process.status() not in (
                psutil.STATUS_ZOMBIE,
                psutil.STATUS_DEAD,
            ):
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def wait_gone(tag: str, timeout_s: float = 20.0) -> int:
    """How many processes of the run were still there `timeout_s` after it ended (killed then)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = tagged(tag)
        if not left:
            return 0
        time.sleep(0.1)
    left = tagged(tag)
    for process in left:
        process.kill()
    return len(left)


def basht(args: list[str], cwd: Path, env: dict[str, str], kill_after: float | None = None):
    """The CLI as a user runs it; SIGKILLed after `kill_after` seconds if still running then."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "basht.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kill_after is not None:
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=900)
    return proc.returncode, out, err


def the_run(store: Store):
    runs = store.list_runs()
    if len(runs) != 1:
        raise ChaosFailure(f"expected one run in the store, found {len(runs)}")
    return runs[0]


def snapshot(store_url: str) -> dict[int, tuple[Any, ...]]:
    """The finished trials the store holds now, by number: state, value, budget, reports. Checks that
    no trial number and no (trial, epoch) report is there twice."""
    store = Store(store_url, create=False)
    try:
        run = the_run(store)
        trials = store.trials(run.id)
        numbers = [t.number for t in trials]
        if len(numbers) != len(set(numbers)):
            twice = sorted(n for n, c in collections.Counter(numbers).items() if c > 1)
            raise ChaosFailure(f"trial numbers stored twice: {twice}")
        reports: dict[int, list[tuple[int, float | None]]] = collections.defaultdict(list)
        for r in store.reports(run.id):
            reports[r.trial_id].append((r.epoch, r.value))
        for trial_id, rows in reports.items():
            epochs = [e for e, _ in rows]
            if len(epochs) != len(set(epochs)):
                raise ChaosFailure(f"trial row {trial_id}: an epoch reported twice: {epochs}")
        return {
            t.number: (t.state, t.value, t.budget, tuple(sorted(reports[t.id])))
            for t in trials
            if t.state in FINISHED
        }
    finally:
        store.close()


def check_checkpoints(store_url: str) -> int:
    """Every checkpoint the store names as live is a whole file that loads; how many."""
    store = Store(store_url, create=False)
    try:
        run = the_run(store)
        checked = 0
        for trial in store.trials(run.id):
            for row in store.checkpoints(trial.id):
                if row.deleted:
                    continue
                if not Path(row.path).is_file():
                    raise ChaosFailure(f"trial {trial.number}: checkpoint {row.path} is gone")
                try:
                    load_state(row.path)
                except Exception as err:
                    raise ChaosFailure(f"checkpoint {row.path} does not load: {err}") from None
                checked += 1
        return checked
    finally:
        store.close()


def run_stored(store_url: str) -> bool:
    """Whether the store holds the run yet."""
    try:
        store = Store(store_url, create=False)
    except StoreError:
        return False
    try:
        return bool(store.list_runs())
    finally:
        store.close()


def phase_reached(store_url: str) -> str:
    """Where a run killed from outside was: the phase after the last one its attempt stored."""
    order = ["deploy", "setup", "run", "collect_results", "test", "collect_metrics", "undeploy"]
    store = Store(store_url, create=False)
    try:
        phases = store.phases(the_run(store).id)
    finally:
        store.close()
    if not phases:
        return "deploy"
    attempt = max(p.attempt for p in phases)
    done = {p.name for p in phases if p.attempt == attempt}
    return next((name for name in order if name not in done), "undeploy")


def outcomes(store_url: str) -> tuple[dict[str, Any], dict[int, tuple[Any, ...]]]:
    """The run's best configuration and value, and each trial's config, state, value, budget."""
    store = Store(store_url, create=False)
    try:
        run = the_run(store)
        if run.status != "completed":
            raise ChaosFailure(f"run {run.id} ended {run.status}: {run.error}")
        trials = {t.number: (t.config, t.state, t.value, t.budget) for t in store.trials(run.id)}
        return {"config": run.best_config, "value": run.best_value}, trials
    finally:
        store.close()


def check_replay(store_url: str) -> int:
    """The whole decision log replays on a fresh algorithm (ReplayError at the first
    difference); how many decisions it holds."""
    store = Store(store_url, create=False)
    try:
        run = the_run(store)
        spec = dict(store.get_experiment(run.experiment_id).spec)
        for key in DERIVED_KEYS:
            spec.pop(key, None)
        algorithm = make_algorithm(Experiment.from_dict(spec, "the stored experiment"))
        decisions = store.decisions(run.id)
        replay(algorithm, decisions)
        if algorithm.suggest() is not None:
            raise ChaosFailure("the replayed algorithm has trials left to run")
        return len(decisions)
    finally:
        store.close()


def killed_run(
    store_url: str,
    folder: Path,
    *,
    trials: int,
    kills: int,
    seed: int,
    restart_server: Callable[[], None] | None = None,
    say: Callable[[str], None] = print,
) -> Outcome:
    """Kill a run `kills` times, resuming it after each; check after each kill and at the end."""
    outcome = Outcome(store=store_url.split(":")[0])
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "chaos.yaml"
    file.write_text(yaml.safe_dump(experiment(store_url, trials)))
    seen: dict[int, tuple[Any, ...]] = {}
    args = ["run", "-q", "--no-plots", str(file)]
    start = time.monotonic()
    restart_at = kills // 2 if restart_server is not None else None
    while True:
        tag = uuid.uuid4().hex
        env, kill_after = cli_env(tag), None
        stop_server = outcome.kills == restart_at and outcome.server_restarts == 0
        if outcome.kills < kills and not stop_server:
            aim, points = aimed_at(outcome.kills, kills)
            if aim == "outside":
                kill_after = rng.uniform(0.5, 2.5)
            env["BASHT_FAILPOINTS"] = ",".join(f"{k}={v}" for k, v in points.items())
            env["BASHT_FAILPOINTS_SEED"] = str(rng.getrandbits(32))
        if stop_server:
            code, out, err = _with_server_restart(args, folder, env, restart_server, rng, store_url)
            outcome.server_restarts += 1
        else:
            code, out, err = basht(args, folder, env, kill_after)
        outcome.attempts += 1
        outcome.leftovers += wait_gone(tag)
        if code == 0:
            break
        if code == -signal.SIGKILL and not run_stored(store_url):
            # Killed before the run was stored (a slow start on a busy machine): nothing to
            # resume or check yet, so it starts again.
            outcome.kills += 1
            outcome.moments["outside, before the run was stored"] += 1
            say(f"  kill {outcome.kills:2d}: before the run was stored")
            continue
        if code == -signal.SIGKILL:
            moment = _failpoint_in(err) or f"outside, in {phase_reached(store_url)}"
            outcome.kills += 1
            outcome.moments[moment] += 1
            say(f"  kill {outcome.kills:2d}: {moment}")
        elif not stop_server:
            raise ChaosFailure(f"attempt {outcome.attempts} exited {code}: {err.strip()[-2000:]}")
        else:
            say(f"  server restart: the run ended {code}: {_last_line(err)}")
        now = snapshot(store_url)
        for number, before in seen.items():
            if now.get(number) != before:
                raise ChaosFailure(
                    f"trial {number} was completed as {before}, now {now.get(number)}"
                )
        seen.update(now)
        outcome.checkpoints_checked += check_checkpoints(store_url)
        args = ["resume", "latest", "-q", "--no-plots"]
    outcome.seconds = time.monotonic() - start
    if outcome.kills < kills:
        raise ChaosFailure(
            f"the run completed after {outcome.kills} of {kills} kills: give it more trials"
        )
    final = snapshot(store_url)
    for number, before in seen.items():
        if final.get(number) != before:
            raise ChaosFailure(f"trial {number} was completed as {before}, now {final.get(number)}")
    outcome.completed_seen = len(seen)
    outcome.replayed = check_replay(store_url)
    best, trials_after = outcomes(store_url)
    outcome.trials = len(trials_after)

    reference = folder / "reference"
    reference.mkdir(exist_ok=True)
    ref_url = f"sqlite:///{reference / 'reference.db'}"
    ref_file = reference / "chaos.yaml"
    ref_file.write_text(yaml.safe_dump(experiment(ref_url, trials)))
    code, _, err = basht(["run", "-q", "--no-plots", str(ref_file)], reference, cli_env("ref"))
    if code != 0:
        raise ChaosFailure(f"the uninterrupted run failed: {err.strip()[-2000:]}")
    ref_best, ref_trials = outcomes(ref_url)
    if (best, trials_after) != (ref_best, ref_trials):
        differ = sorted(n for n in ref_trials if trials_after.get(n) != ref_trials[n])
        raise ChaosFailure(
            f"not the uninterrupted run's result: best {best} vs {ref_best}; trials differ: "
            f"{[(n, trials_after.get(n), ref_trials[n]) for n in differ[:5]]}"
        )
    outcome.same_result = True
    if outcome.leftovers:
        raise ChaosFailure(f"{outcome.leftovers} processes outlived their run")
    return outcome


def _with_server_restart(
    args: list[str],
    folder: Path,
    env: dict[str, str],
    restart: Any,
    rng: random.Random,
    store_url: str,
) -> tuple[int, str, str]:
    """Run, and stop the database server mid-run for a few seconds: once the run is stored (a
    fixed delay would, on a busy machine, stop it before the run's tables exist, which tests
    nothing a resume could recover), and a moment later."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "basht.cli", *args],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while proc.poll() is None and not run_stored(store_url):
        time.sleep(0.1)
    try:
        proc.wait(timeout=rng.uniform(0.5, 1.5))
    except subprocess.TimeoutExpired:
        restart()
    out, err = proc.communicate(timeout=900)
    return proc.returncode, out, err


def _failpoint_in(err: str) -> str | None:
    for line in err.splitlines():
        if line.startswith("failpoint ") and line.endswith(": killed"):
            return line.split()[1].rstrip(":")
    return None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass
class FaultOutcome:
    store: str
    trials: int = 0
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    completed: int = 0
    leftovers: int = 0
    seconds: float = 0.0


#: What a faulted trial's error says, by fault.
FAULT_REASONS = {
    "sigkill": "SIGKILL",
    "abort": "SIGABRT",
    "oom": "MemoryError",
    "raise": "RuntimeError: this trial's configuration crashes",
}


def faulty_run(store_url: str, folder: Path, *, trials: int, fault_every: int) -> FaultOutcome:
    """A run whose chosen trials fault in their worker; checks each fault and what survived."""
    outcome = FaultOutcome(store=store_url.split(":")[0])
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "faults.yaml"
    spec = experiment(store_url, trials, workers=2, fault_every=fault_every)
    file.write_text(yaml.safe_dump(spec))
    tag = uuid.uuid4().hex
    start = time.monotonic()
    code, _, err = basht(["run", "-q", "--no-plots", str(file)], folder, cli_env(tag))
    outcome.seconds = time.monotonic() - start
    outcome.leftovers = wait_gone(tag)
    if code != 0:
        raise ChaosFailure(f"the run with faulty trials exited {code}: {err.strip()[-2000:]}")
    store = Store(store_url, create=False)
    try:
        run = the_run(store)
        if run.status != "completed":
            raise ChaosFailure(f"run ended {run.status}: {run.error}")
        for t in store.trials(run.id):
            outcome.trials += 1
            fault = fault_of(trial_seed(spec["seed"], t.number), fault_every)
            if fault is None:
                if t.state not in ("completed", "stopped"):
                    raise ChaosFailure(f"trial {t.number} (no fault) ended {t.state}: {t.error}")
                outcome.completed += 1
                continue
            if t.state != "failed" or FAULT_REASONS[fault] not in (t.error or ""):
                raise ChaosFailure(f"trial {t.number} ({fault}) ended {t.state}: {t.error!r}")
            outcome.faults[fault] += 1
    finally:
        store.close()
    if outcome.leftovers:
        raise ChaosFailure(f"{outcome.leftovers} processes outlived the run")
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--fault-every", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "chaos.json")
    args = parser.parse_args()
    console = Console(width=150)
    killed: list[Outcome] = []
    faulted: list[FaultOutcome] = []
    with tempfile.TemporaryDirectory(prefix="basht-chaos-") as tmp:
        for kind in args.stores:
            with _store(kind, Path(tmp)) as (url_for, restart):
                console.print(f"[bold]{kind}[/bold]: {args.kills} kills of one run")
                killed.append(
                    killed_run(
                        url_for("killed"),
                        Path(tmp) / kind / "killed",
                        trials=args.trials,
                        kills=args.kills,
                        seed=args.seed,
                        restart_server=restart,
                        say=console.print,
                    )
                )
                console.print(f"[bold]{kind}[/bold]: worker faults")
                faulted.append(
                    faulty_run(
                        url_for("faults"),
                        Path(tmp) / kind / "faults",
                        trials=args.trials,
                        fault_every=args.fault_every,
                    )
                )
    _print(console, killed, faulted)
    write_results(
        args.out,
        "chaos",
        {
            "settings": vars(args) | {"out": str(args.out), "failpoints": IN_SEARCH},
            "coordinator_kills": [_plain(o) for o in killed],
            "worker_faults": [_plain(o) for o in faulted],
        },
    )


def _plain(outcome: Any) -> dict[str, Any]:
    return {
        k: dict(v) if isinstance(v, collections.Counter) else v for k, v in vars(outcome).items()
    }


def _store(kind: str, tmp: Path) -> Any:
    """The store URLs a kind of store gives, and how to restart its server (None: no server)."""
    import contextlib

    @contextlib.contextmanager
    def sqlite():
        yield (lambda name: f"sqlite:///{tmp / kind / name / 'stores' / 'chaos.db'}"), None

    @contextlib.contextmanager
    def postgres():
        from tests.postgres import postgres_server

        with postgres_server() as server:
            yield (lambda name: server.create_database(name)), server.restart

    return {"sqlite": sqlite, "postgres": postgres}[kind]()


def _print(console: Console, killed: list[Outcome], faulted: list[FaultOutcome]) -> None:
    table = Table(title="Coordinator killed with SIGKILL, resumed each time")
    for column in (
        "store",
        "kills",
        "server restarts",
        "attempts",
        "trials",
        "finished seen",
        "checkpoints checked",
        "decisions replayed",
        "same result",
        "left behind",
        "s",
    ):
        table.add_column(column, justify="right")
    for o in killed:
        table.add_row(
            o.store,
            str(o.kills),
            str(o.server_restarts),
            str(o.attempts),
            str(o.trials),
            str(o.completed_seen),
            str(o.checkpoints_checked),
            str(o.replayed),
            "yes" if o.same_result else "NO",
            str(o.leftovers),
            f"{o.seconds:.0f}",
        )
    console.print(table)
    moments = Table(title="Where the kills struck")
    moments.add_column("moment")
    for o in killed:
        moments.add_column(o.store, justify="right")
    names = sorted({m for o in killed for m in o.moments})
    for name in names:
        moments.add_row(name, *(str(o.moments.get(name, 0)) for o in killed))
    console.print(moments)
    faults = Table(title="Trials that faulted in their worker")
    for column in (
        "store",
        "trials",
        "sigkill",
        "abort",
        "oom",
        "raise",
        "others completed",
        "left behind",
        "s",
    ):
        faults.add_column(column, justify="right")
    for f in faulted:
        faults.add_row(
            f.store,
            str(f.trials),
            *(str(f.faults.get(k, 0)) for k in FAULT_REASONS),
            str(f.completed),
            str(f.leftovers),
            f"{f.seconds:.0f}",
        )
    console.print(faults)


if __name__ == "__main__":
    main()
