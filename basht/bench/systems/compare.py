"""`basht compare`: experiments on several systems, one run after the other, with N seeds.

Each run is a complete benchmark (all seven phases, undeploy included) before the next begins, so
no system runs beside another or inherits its processes. Seeds go round-robin (seed 0 on every
system, then seed 1, ...) so a drift of the machine over time spreads over all systems alike.
"""

from __future__ import annotations

import importlib.util
import logging
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from basht.bench.runner import RunResult, run_benchmark
from basht.bench.systems.peer import INSTALL, PEERS, SYSTEMS
from basht.errors import BashtError
from basht.experiment import Experiment, peer_limit
from basht.report.comparison import ComparedRun, Comparison, absolute_store_url
from basht.store import Store

log = logging.getLogger(__name__)

#: The module each peer system needs, for a one-line error before anything runs.
_NEEDS = {"optuna": "optuna", "raytune": "ray", "synetune": "syne_tune"}

RunOne = Callable[[Experiment, Path], RunResult]


def parse_systems(text: str | Sequence[str]) -> list[str]:
    """`native,optuna,raytune` (or a list) checked against what exists and is installed."""
    names = text.split(",") if isinstance(text, str) else list(text)
    systems = list(dict.fromkeys(n.strip() for n in names if n.strip()))
    if not systems:
        raise BashtError("--systems: give at least one of " + ", ".join(SYSTEMS))
    for name in systems:
        if name not in SYSTEMS:
            raise BashtError(f"--systems: unknown system {name!r} (expected {', '.join(SYSTEMS)})")
        module = _NEEDS.get(name)
        if module is not None and importlib.util.find_spec(module) is None:
            raise BashtError(
                f"--systems: {name} needs {module}, which is not installed "
                f"({INSTALL.get(name, PEERS)})"
            )
    return systems


def run_comparison(
    experiment: Experiment | Sequence[Experiment],
    systems: Sequence[str],
    *,
    repeat: int = 1,
    target: float | None = None,
    results_root: Path | str = "results",
    run_one: RunOne | None = None,
    on_run: Callable[[ComparedRun], None] | None = None,
) -> Comparison:
    """Run every experiment on every system `repeat` times and save the comparison.

    Several experiments (files) compare what differs between them, cause and effect: each runs
    with the first one's seeds (`seed`, `seed + 1`, ...), and all must share one store. `target`
    is the value time-to-target is measured against (default: the first's `search.target`); it
    does not stop the runs. A run that fails is kept (with its error) and the others go on;
    Ctrl-C saves what ran so far and stops.
    """
    experiments = [experiment] if isinstance(experiment, Experiment) else list(experiment)
    if not experiments:
        raise BashtError("compare: give at least one experiment file")
    if repeat < 1:
        raise BashtError(f"--repeat: must be at least 1, got {repeat}")
    if target is not None and not math.isfinite(target):
        raise BashtError(f"--target: must be a finite number, got {target}")
    systems = parse_systems(systems)
    columns = _check_together(experiments, systems)
    first = experiments[0]
    root = Path(results_root)
    seeds = [first.seed + i for i in range(repeat)]
    comparison = Comparison.new(
        " vs ".join(e.name for e in experiments),
        systems,
        seeds,
        first.store,
        target if target is not None else first.search.target,
        root,
        columns=[column for column, _, _ in columns],
    )
    comparison.save()
    run = run_one or (lambda exp, results: run_benchmark(exp, results_root=results))
    for seed in seeds:
        for column, exp, system in columns:
            variant = exp.model_copy(update={"system": system, "seed": seed})
            started = datetime.now(UTC)
            entry = ComparedRun(system, seed, None, "failed", column=column)
            try:
                result = run(variant, root)
                entry.run_id, entry.status = result.run_id, result.status
            except KeyboardInterrupt:
                entry.status, entry.error = "interrupted", "interrupted by the user (SIGINT)"
                entry.run_id = _latest_run(exp.store, exp.name, system, started)
                comparison.runs.append(entry)
                comparison.save()
                raise
            except Exception as err:  # a failed run is a result too; the comparison goes on
                entry.error = (
                    str(err) if isinstance(err, BashtError) else f"{type(err).__name__}: {err}"
                )
                entry.run_id = _latest_run(exp.store, exp.name, system, started)
                log.warning("%s (seed %d) failed: %s", column, seed, entry.error)
            comparison.runs.append(entry)
            comparison.save()
            if on_run is not None:
                on_run(entry)
    return comparison


def _check_together(
    experiments: list[Experiment], systems: list[str]
) -> list[tuple[str, Experiment, str]]:
    """(column, experiment, system) of every run of a round, after the checks that would stop
    one of them: all or none run. Columns are the systems (one file), the files' names (one
    system), or `name · system`."""
    names = [e.name for e in experiments]
    if len(set(names)) < len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise BashtError(f"compare: two files are named {twice!r}; give each its own `name`")
    stores = {absolute_store_url(e.store) for e in experiments}
    if len(stores) > 1:
        raise BashtError(
            f"store: the compared files name {len(stores)} stores; give them one "
            "(the same `store`, or --store)"
        )
    runs = []
    for exp in experiments:
        where = f"{exp.name}: " if len(experiments) > 1 else ""
        if exp.plan is not None:
            raise BashtError(
                f"{where}plan: a plan's elastic cluster runs with basht run; "
                "compare systems without one"
            )
        for system in systems:
            limit = peer_limit(exp, system)
            if limit is not None:
                raise BashtError(where + ": ".join(limit))
            if system != exp.system:  # the file was checked as its own system, not this one
                Experiment.from_dict({**exp.to_dict(), "system": system}, exp.source)
            if len(experiments) == 1:
                column = system
            elif len(systems) == 1:
                column = exp.name
            else:
                column = f"{exp.name} · {system}"
            runs.append((column, exp, system))
    return runs


def _latest_run(store_url: str, name: str, system: str, since: datetime) -> str | None:
    """The run a failed benchmark left in the store (the runner stores it before raising)."""
    try:
        store = Store(store_url)
    except BashtError:
        return None
    try:
        naive = since.replace(tzinfo=None) - timedelta(seconds=1)
        for run in store.list_runs(limit=20):
            started = run.started_at.replace(tzinfo=None) if run.started_at else None
            mine = run.system == system and run.id.startswith(f"{name}-")
            if mine and started is not None and started >= naive:
                return run.id
        return None
    finally:
        store.close()
