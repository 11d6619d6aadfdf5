"""Table 2 (DESIGN.md §2) computed from stored records only, so any finished run can be re-reported."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from basht.store import Store

#: Trials whose compute counts as wasted: crashed, aborted, or stopped early by the pruner.
DEFAULT_WASTED_STATES = ("failed", "aborted", "stopped")


@dataclass(frozen=True)
class Metric:
    name: str
    value: float | None
    unit: str
    source: str | None = None  # where an energy figure came from: rapl | nvml | estimate | ...


def trial_compute_s(load_s: float, train_s: float, validate_s: float) -> float:
    """A trial's duration d_i: the time it held a worker (load + train + validate, all segments)."""
    return load_s + train_s + validate_s


def compute_metrics(
    store: Store, run_id: str, wasted_states: tuple[str, ...] = DEFAULT_WASTED_STATES
) -> list[Metric]:
    phases = {p.name: p for p in store.phases(run_id)}
    trials = store.trials(run_id)
    out: list[Metric] = []
    if "deploy" in phases and "test" in phases:
        out.append(Metric("JCT", (phases["test"].end - phases["deploy"].start) * 1000, "ms"))
    counts = Counter(t.state for t in trials)
    out.append(Metric("trials", float(len(trials)), "count"))
    out.extend(Metric(f"trials_{state}", float(n), "count") for state, n in sorted(counts.items()))
    durations = [trial_compute_s(t.load_s, t.train_s, t.validate_s) for t in trials]
    wasted = [
        trial_compute_s(t.load_s, t.train_s, t.validate_s)
        for t in trials
        if t.state in wasted_states
    ]
    out.append(Metric("WTT", sum(wasted) * 1000, "ms"))
    if durations:
        out.append(Metric("trial_time_total", sum(durations) * 1000, "ms"))
        out.append(Metric("trial_time_median", statistics.median(durations) * 1000, "ms"))
        for part in ("load_s", "train_s", "validate_s"):
            mean = statistics.fmean(getattr(t, part) for t in trials)
            out.append(Metric(f"mean_{part.removesuffix('_s')}", mean * 1000, "ms"))
    return out
