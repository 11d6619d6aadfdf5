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


def job_completion_s(store: Store, run_id: str) -> float | None:
    """Deploy start to test end; a resumed run adds up its attempts (the time between is not work)."""
    spans: dict[int, dict[str, float]] = {}
    for p in store.phases(run_id):
        attempt = spans.setdefault(p.attempt, {})
        if p.name == "deploy":
            attempt["start"] = p.start
        elif p.name == "test":
            attempt["end"] = p.end
    finished = [a for a in spans.values() if "start" in a and "end" in a]
    if not finished:
        return None
    return sum(a["end"] - a["start"] for a in finished) + sum(
        _last_end(store, run_id, n) - a["start"]
        for n, a in spans.items()
        if "start" in a and "end" not in a
    )


def _last_end(store: Store, run_id: str, attempt: int) -> float:
    ends = [p.end for p in store.phases(run_id) if p.attempt == attempt and p.name != "undeploy"]
    return max(ends)


def compute_metrics(
    store: Store, run_id: str, wasted_states: tuple[str, ...] = DEFAULT_WASTED_STATES
) -> list[Metric]:
    trials = store.trials(run_id)
    out: list[Metric] = []
    jct_s = job_completion_s(store, run_id)
    if jct_s is not None:
        out.append(Metric("JCT", jct_s * 1000, "ms"))
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
