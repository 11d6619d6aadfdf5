"""Early-stopping decisions per second: basht's ASHA against Optuna's pruners, same results fed in.

A seeded stream of learning curves is generated once: trial i has a final accuracy drawn from
Beta(4, 2), a rate drawn from U(0.1, 0.6), and reports value(step) = final·(1 − e^(−rate·step))
plus N(0, 0.01) noise at steps 1..27 (the stream is prefix-stable: the first k trials are the same
whatever N). Every scheduler is driven sequentially (one "worker") through that stream:

* basht: `ASHA(variant="stopping")`, `ASHA(variant="promotion")` and
  `AsyncHyperband(variant="stopping")` (min 1, max 27, eta 3, max_trials N) through ask/tell.
  `suggest()` creates (or, for promotion, resumes) a trial, `report()` is called for each step until
  the answer is not CONTINUE; PAUSE means the trial waits for a later `suggest()` to resume it, and
  a trial that reaches its suggested budget at the top rung is completed. The timed part is every
  `report()` and `suggest()` call (so our time also includes drawing each configuration).
* Optuna: an in-memory study (RandomSampler, seed 0) with `SuccessiveHalvingPruner(min_resource=1,
  reduction_factor=3)` or `HyperbandPruner(min_resource=1, max_resource=27, reduction_factor=3)`,
  driven by ask/tell: `trial.report(value, step)` then `trial.should_prune()` at each step, and
  `study.tell` as COMPLETE or PRUNED. The timed part is `should_prune()` only, as the pruner's
  decision; `trial.report` (which stores the intermediate value) is timed separately and only
  written to the JSON. Leaving it out favours Optuna.

A decision is one reported step (one `report()` for basht, one `should_prune()` for Optuna), so
decisions/s = reported steps / timed seconds and µs/decision is its inverse. Optuna's pruners scan
every trial of the study at each rung, so their cost per decision grows with the study; each
configuration therefore runs under a wall-clock cap (`--cap-s`, the whole loop counted) and what
it measured on the prefix it finished is reported, with how many trials that was. The peer's rate
on a prefix is higher than it would be on all N trials, so the ratio ours/peer is a lower bound.

    python benchmarks/scheduler.py [--sizes 1000 10000 100000] [--cap-s 60]
"""

from __future__ import annotations

import argparse
import gc
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _results import write_results
from rich.console import Console
from rich.table import Table

import basht
from basht.space import Float, SearchSpace
from basht.tune import ASHA, AsyncHyperband, Decision
from basht.tune.asha import AsyncSuccessiveHalving

MIN_BUDGET, MAX_BUDGET, ETA = 1, 27, 3
OURS = ("basht ASHA (stopping)", "basht ASHA (promotion)", "basht AsyncHyperband (stopping)")
PEERS = ("Optuna SuccessiveHalvingPruner", "Optuna HyperbandPruner")
# Which peer each of our schedulers is compared with in the table (all pairs are in the JSON).
PAIRS = {
    OURS[0]: PEERS[0],
    OURS[1]: PEERS[0],
    OURS[2]: PEERS[1],
}


def learning_curves(n: int, steps: int = MAX_BUDGET, seed: int = 0) -> np.ndarray:
    """An (n, steps) array of validation accuracies; row i is trial i's curve at steps 1..steps."""
    final_rng, rate_rng, noise_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    final = final_rng.beta(4.0, 2.0, size=n)
    rate = rate_rng.uniform(0.1, 0.6, size=n)
    noise = noise_rng.normal(0.0, 0.01, size=(n, steps))
    step = np.arange(1, steps + 1)
    return final[:, None] * (1.0 - np.exp(-rate[:, None] * step[None, :])) + noise


@dataclass
class Measurement:
    scheduler: str
    size: int
    trials_done: int = 0
    decisions: int = 0
    timed_s: float = 0.0
    wall_s: float = 0.0
    capped: bool = False
    completed: int = 0  # trials completed (Optuna: told COMPLETE, i.e. not pruned)
    stopped: int = 0  # trials stopped, pruned, or left paused when the run ended
    reached_top: int = 0  # trials that reported step 27 (Optuna may still prune them there)
    extra: dict[str, float] = field(default_factory=dict)
    last_step: list[int] = field(default_factory=list, repr=False)  # per trial, in stream order

    @property
    def decisions_per_s(self) -> float:
        return self.decisions / self.timed_s if self.timed_s else math.nan

    @property
    def us_per_decision(self) -> float:
        return self.timed_s / self.decisions * 1e6 if self.decisions else math.nan


def _ours(name: str, n: int) -> AsyncSuccessiveHalving:
    space = SearchSpace({"x": Float(-1.0, 1.0)})
    common: dict[str, Any] = {
        "metric": "accuracy",
        "mode": "max",
        "min_budget": MIN_BUDGET,
        "max_budget": MAX_BUDGET,
        "eta": ETA,
        "seed": 0,
        "max_trials": n,
    }
    if name == OURS[0]:
        return ASHA(space, variant="stopping", **common)
    if name == OURS[1]:
        return ASHA(space, variant="promotion", **common)
    return AsyncHyperband(space, variant="stopping", **common)


def run_ours(name: str, curves: np.ndarray, cap_s: float) -> Measurement:
    """Drive one of our schedulers through the stream with ask/tell; time suggest and report."""
    n = len(curves)
    algo = _ours(name, n)
    m = Measurement(name, n)
    clock = time.perf_counter
    epochs: dict[int, int] = {}  # epochs each trial has trained so far
    outcome: dict[int, str] = {}
    rows: dict[int, list[float]] = {}
    timed = 0.0
    decisions = 0
    start = clock()
    while True:
        if clock() - start > cap_s:
            m.capped = True
            break
        t0 = clock()
        suggestion = algo.suggest()
        timed += clock() - t0
        if suggestion is None:
            break
        trial_id, budget = suggestion.trial_id, suggestion.budget
        row = rows.get(trial_id)
        if row is None:  # a new configuration: its curve is the next one of the stream
            row = rows[trial_id] = curves[trial_id].tolist()
        epoch = epochs.get(trial_id, 0)
        decision = Decision.CONTINUE
        while epoch < budget:
            epoch += 1
            value = row[epoch - 1]
            t0 = clock()
            decision = algo.report(trial_id, epoch, value)
            timed += clock() - t0
            decisions += 1
            if decision is not Decision.CONTINUE:
                break
        epochs[trial_id] = epoch
        if decision is Decision.CONTINUE:  # reached the suggested budget: done at the top
            t0 = clock()
            algo.complete(trial_id)
            timed += clock() - t0
            outcome[trial_id] = "completed"
        elif decision is Decision.STOP:
            outcome[trial_id] = "stopped"
        else:
            outcome[trial_id] = "paused"
    m.wall_s = clock() - start
    m.timed_s, m.decisions = timed, decisions
    m.trials_done = len(rows)
    m.completed = sum(1 for o in outcome.values() if o == "completed")
    # A trial still paused when the run ends will never be resumed: it was stopped early.
    m.stopped = len(outcome) - m.completed
    m.extra["left_paused"] = sum(1 for o in outcome.values() if o == "paused")
    m.last_step = [epochs[i] for i in range(len(rows))]
    m.reached_top = sum(1 for e in m.last_step if e >= MAX_BUDGET)
    return m


def _optuna_pruner(name: str) -> Any:
    import optuna

    if name == PEERS[0]:
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=MIN_BUDGET, reduction_factor=ETA)
    return optuna.pruners.HyperbandPruner(
        min_resource=MIN_BUDGET, max_resource=MAX_BUDGET, reduction_factor=ETA
    )


def run_optuna(name: str, curves: np.ndarray, cap_s: float) -> Measurement:
    """Drive an Optuna pruner through the stream with ask/tell; time should_prune."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n = len(curves)
    study = optuna.create_study(
        direction="maximize",
        pruner=_optuna_pruner(name),
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    m = Measurement(name, n)
    clock = time.perf_counter
    timed = report_s = 0.0
    decisions = 0
    pruned_state = optuna.trial.TrialState.PRUNED
    start = clock()
    for i in range(n):
        if clock() - start > cap_s:
            m.capped = True
            break
        row = curves[i].tolist()
        trial = study.ask()
        pruned = False
        for step in range(1, MAX_BUDGET + 1):
            value = row[step - 1]
            t0 = clock()
            trial.report(value, step)
            t1 = clock()
            prune = trial.should_prune()
            t2 = clock()
            report_s += t1 - t0
            timed += t2 - t1
            decisions += 1
            if prune:
                pruned = True
                break
        if pruned:
            study.tell(trial, state=pruned_state)
            m.stopped += 1
        else:
            study.tell(trial, row[-1])
            m.completed += 1
        m.trials_done += 1
        m.last_step.append(step)
    m.wall_s = clock() - start
    m.timed_s, m.decisions = timed, decisions
    m.reached_top = sum(1 for e in m.last_step if e >= MAX_BUDGET)
    m.extra["report_us_per_decision"] = report_s / decisions * 1e6 if decisions else math.nan
    m.extra["report_and_prune_decisions_per_s"] = decisions / (timed + report_s)
    return m


def measure(
    run: Callable[[str, np.ndarray, float], Measurement],
    name: str,
    curves: np.ndarray,
    cap_s: float,
) -> Measurement:
    gc.collect()
    return run(name, curves, cap_s)


def same_stop_step(ours: Measurement, peer: Measurement) -> float:
    """The share of the trials both measured that reported their last result at the same step.

    For the stopping variant the decision on trial i depends only on trials before it, so our run
    over all N trials and the peer's prefix agree on that prefix if they apply the same rule.
    """
    common = min(len(ours.last_step), len(peer.last_step))
    if not common:
        return math.nan
    pairs = zip(ours.last_step[:common], peer.last_step[:common], strict=True)
    same = sum(1 for a, b in pairs if a == b)
    return same / common


def _trials_cell(m: Measurement) -> str:
    if m.trials_done < m.size:
        why = f"capped at {m.wall_s:.0f} s" if m.capped else "stopped early"
        return f"(first {m.trials_done:,} trials, {why})"
    return f"{m.trials_done:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument(
        "--cap-s",
        type=float,
        default=60.0,
        help="wall-clock cap per configuration (seconds); the peer's prefix is reported",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "scheduler.json"
    )
    args = parser.parse_args()
    if min(args.sizes) < 1:
        parser.error(f"--sizes: expected 1 or more trials each, got {min(args.sizes)}")
    if args.cap_s <= 0:
        parser.error(f"--cap-s: expected more than 0 s, got {args.cap_s:g}")

    import optuna

    console = Console(width=170)
    curves_all = learning_curves(max(args.sizes), seed=args.seed)
    results: list[Measurement] = []
    for size in args.sizes:
        curves = curves_all[:size]
        for name in OURS:
            results.append(measure(run_ours, name, curves, args.cap_s))
            console.log(f"{name}, {size:,} trials: {results[-1].us_per_decision:.2f} µs/decision")
        for name in PEERS:
            results.append(measure(run_optuna, name, curves, args.cap_s))
            m = results[-1]
            console.log(
                f"{name}, {size:,} trials: {m.us_per_decision:.2f} µs/decision "
                f"over {m.trials_done:,} trials"
            )

    by_key = {(m.size, m.scheduler): m for m in results}
    table = Table(
        title=f"early-stopping decisions, min 1, max 27, eta 3 (peers capped at {args.cap_s:g} s)"
    )
    columns = (
        "trials",
        "scheduler",
        "trials measured",
        "decisions",
        "µs/decision",
        "decisions/s",
        "reached 27",
        "ours/peer",
        "same stop step",
    )
    for column in columns:
        left = column in ("scheduler", "trials measured")
        table.add_column(column, justify="left" if left else "right")
    records = []
    for m in results:
        record: dict[str, Any] = asdict(m)
        del record["last_step"]
        record["decisions_per_s"] = m.decisions_per_s
        record["us_per_decision"] = m.us_per_decision
        ratio_cell = agree_cell = "—"
        if m.scheduler in OURS:
            peers = {peer: by_key[(m.size, peer)] for peer in PEERS}
            record["speedup_vs"] = {
                peer: m.decisions_per_s / p.decisions_per_s for peer, p in peers.items()
            }
            record["same_stop_step_as"] = {peer: same_stop_step(m, p) for peer, p in peers.items()}
            peer = PAIRS[m.scheduler]
            short = "SH" if peer == PEERS[0] else "HB"
            ratio_cell = f"{record['speedup_vs'][peer]:,.1f}x vs {short}"
            if peer == PEERS[0]:  # bracket draws differ from Optuna's hashing: not comparable
                agree_cell = f"{record['same_stop_step_as'][peer]:.1%} vs {short}"
        records.append(record)
        table.add_row(
            f"{m.size:,}",
            m.scheduler,
            _trials_cell(m),
            f"{m.decisions:,}",
            f"{m.us_per_decision:,.2f}",
            f"{m.decisions_per_s:,.0f}",
            f"{m.reached_top:,}",
            ratio_cell,
            agree_cell,
        )
        if m.scheduler == PEERS[-1] and m.size != args.sizes[-1]:
            table.add_section()
    console.print(table)
    console.print(
        "ours/peer = our decisions/s ÷ the peer's; a capped peer is measured on its prefix, "
        "where each decision is cheaper than over all trials, so the ratio is a lower bound. "
        "same stop step: share of trials (on the common prefix) whose last reported step is the "
        "same as under Optuna's SuccessiveHalvingPruner."
    )
    write_results(
        args.out,
        "scheduler",
        {
            "versions": {
                "basht": basht.__version__,
                "optuna": optuna.__version__,
                "numpy": np.__version__,
            },
            "budgets": {"min": MIN_BUDGET, "max": MAX_BUDGET, "eta": ETA},
            "cap_s": args.cap_s,
            "seed": args.seed,
            "decision": "basht: report() and suggest() calls timed, decisions = report() calls;"
            " optuna: should_prune() timed, decisions = should_prune() calls",
            "results": records,
        },
    )


if __name__ == "__main__":
    main()
