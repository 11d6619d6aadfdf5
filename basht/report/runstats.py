"""Figures of one run read from the store: the anytime curve, time to target, energy per trial.

Times are seconds since the run phase began (the first attempt's), so runs of different systems
line up at the moment each started tuning; deploy and setup are in the phase breakdown instead.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from basht.energy.monitor import UNMEASURED, source_label
from basht.store import Store


def run_start(store: Store, run_id: str) -> float | None:
    """When the run phase began (unix seconds), or None if it never did."""
    starts = [p.start for p in store.phases(run_id) if p.name == "run"]
    return min(starts) if starts else None


def run_length_s(store: Store, run_id: str) -> float | None:
    """Seconds from the run phase's first start to its last end (every attempt), or None."""
    runs = [p for p in store.phases(run_id) if p.name == "run"]
    if not runs:
        return None
    return max(p.end for p in runs) - min(p.start for p in runs)


def best_so_far(store: Store, run_id: str, mode: str) -> list[tuple[float, float]]:
    """(seconds since the run phase began, best value reported by any trial so far), per new best."""
    start = run_start(store, run_id)
    if start is None:
        return []
    points: list[tuple[float, float]] = []
    best: float | None = None
    for report in sorted(store.reports(run_id), key=lambda r: r.at):
        value = report.value
        if value is None or value != value:  # NaN
            continue
        if best is None or (value > best if mode == "max" else value < best):
            best = value
            points.append((report.at - start, value))
    return points


def restarts(store: Store, run_id: str) -> dict[int, int]:
    """How often each trial (by its row id) trained again epochs it had already reported: a
    resumed run starts a trial it cut short again from its last pause, or from scratch if it had
    none or the checkpoint was gone. The store keeps every attempt's reports in the order they
    came (an epoch reported again is a second row, not a changed one); a report at or below the
    epoch before it is where a trial started over."""
    last: dict[int, int] = {}
    counts: dict[int, int] = defaultdict(int)
    for report in store.reports(run_id):
        if report.epoch <= last.get(report.trial_id, 0):
            counts[report.trial_id] += 1
        last[report.trial_id] = report.epoch
    return dict(counts)


def time_to_target(store: Store, run_id: str, target: float, mode: str) -> float | None:
    """Seconds from the run phase's start to the first report at or beyond `target` (None: never).

    Any trial's report counts, at any epoch: it is the moment the job first had a model that good.
    """
    for t, value in best_so_far(store, run_id, mode):
        if value >= target if mode == "max" else value <= target:
            return t
    return None


def trial_energy_j(store: Store, run_id: str) -> dict[int, float | None]:
    """Joules attributed to each trial (by number), summed over components; None for a trial
    whose energy no counter here saw (it ran on another node), which is unknown, not 0."""
    energy: dict[int, float | None] = defaultdict(float)
    for account in store.energy_accounts(run_id):
        if account.kind != "trial" or account.trial is None:
            continue
        if account.component == UNMEASURED:
            energy[account.trial] = None
        elif (joules := energy[account.trial]) is not None:
            energy[account.trial] = joules + account.energy_j
    return dict(energy)


def energy_by_kind_j(store: Store, run_id: str) -> dict[str, float]:
    """The node's energy split as the metrics split it: trials by their state, then idle, test."""
    states = {t.number: t.state for t in store.trials(run_id)}
    split: dict[str, float] = defaultdict(float)
    for account in store.energy_accounts(run_id):
        if account.kind == "trial" and account.trial is not None:
            split[f"trials {states.get(account.trial, 'unknown')}"] += account.energy_j
        else:
            split[account.kind] += account.energy_j
    return dict(split)


def energy_by_node(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Each node's energy per component: what its trials used, its idle, and the test phase.

    A Ray node's meter books components named `node-…/cpu`; this machine's are plain (`local`).
    """
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for account in store.energy_accounts(run_id):
        if account.component == UNMEASURED:
            continue
        node, _, component = account.component.rpartition("/")
        row = rows.setdefault(
            (node or "local", component),
            {"node": node or "local", "component": component, "source": account.source}
            | dict.fromkeys(("trials_j", "idle_j", "test_j", "total_j"), 0.0),
        )
        part = {"trial": "trials_j", "test": "test_j"}.get(account.kind, "idle_j")
        row[part] += account.energy_j
        row["total_j"] += account.energy_j
    local_first = sorted(rows.items(), key=lambda item: (item[0][0] != "local", item[0]))
    return [row for _, row in local_first]


def energy_source(store: Store, run_id: str) -> str:
    """Where the energy figures came from (`estimate`, `rapl`, ...), for labelling them."""
    return source_label(store.energy_accounts(run_id)) or "none"


def phase_durations(store: Store, run_id: str) -> dict[str, float]:
    """Seconds per phase, a resumed run's attempts added up."""
    durations: dict[str, float] = defaultdict(float)
    for phase in store.phases(run_id):
        durations[phase.name] += phase.duration_s
    return dict(durations)


def run_state(run: Any) -> dict[str, Any]:
    """What a stored run says of itself, as results.json and the charts both give it: the
    system and algorithm it ran, how it ended, and when."""
    return {
        "system": run.system,
        "executor": run.executor,
        "algorithm": run.algorithm,
        "status": run.status,
        "error": run.error,
        "stop_reason": run.stop_reason,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "ended_at": run.ended_at.isoformat() if run.ended_at else None,
    }
