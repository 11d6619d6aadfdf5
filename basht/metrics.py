"""Table 2 (DESIGN.md §2) computed from stored records only, so any finished run can be re-reported.

Definitions, with E_i a trial's attributed energy (the energy monitor's accounts), d_i its
duration (load + train + validate, every segment), c_i its cost (its share of the instance over
d_i) and W the wasted trials (`measure.wasted_states`, by default failed, aborted and stopped):

    TWH  = mean E_i over all trials, kWh (also total and median)
    CINT = Σ emissions_i / Σ E_i, gCO2eq/kWh (energy-weighted; a static intensity is itself)
    JCT  = deploy start to test end, ms (a resumed run adds up its attempts)
    OC   = billed cost of the instance from deploy start to undeploy end, USD (on a RubberBand
           plan's elastic cluster: every instance's, from its request to its release; on a Ray
           cluster: every node's, each one instance at `measure.price`, for its time in the run)
    WTT  = Σ_{i∈W} d_i, ms;  WTE = Σ_{i∈W} E_i, kWh;  WTC = Σ_{i∈W} c_i, USD
    WR   = 100 × idle energy / node energy, % (idle = baseline + allocation + overhead)

OC and c_i are `basht.energy.billing`'s, the bill plans and cost budgets count as well.

Node energy = Σ E_i + idle + the test phase's energy (`energy_test`), exactly.

Node energy sums every metered node (a Ray node's meter books its own). A trial whose energy no
counter fully saw (it ran on a Ray node whose meter was lost with the node) has no E_i: TWH, WTE
and WR are then left empty (`-`, source `unmeasured`) rather than computed as if its energy were 0,
and `trials_unmeasured` says how many such trials there were.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from basht.energy.billing import (
    billing_price,
    killed_ends,
    node_prices,
    operating_cost_usd,
    trial_cost_usd,
)
from basht.energy.monitor import IDLE_KINDS, UNMEASURED, source_label
from basht.states import WASTED_STATES
from basht.store import Store

if TYPE_CHECKING:
    from collections.abc import Collection

J_PER_KWH = 3.6e6


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
    """Deploy start to test end; a resumed run adds up its attempts (the time between is not work).
    An attempt whose driver was killed counts until the last moment its records show it alive."""
    spans: dict[int, dict[str, float]] = {}
    phases = store.phases(run_id)
    for p in phases:
        attempt = spans.setdefault(p.attempt, {"last": p.end})
        if p.name == "deploy":
            attempt["start"] = p.start
        elif p.name == "test":
            attempt["end"] = p.end
        if p.name != "undeploy":
            attempt["last"] = max(attempt["last"], p.end)
    if not any("end" in a for a in spans.values()):
        return None
    killed = killed_ends(store, run_id, phases)
    return sum(
        a.get("end", max(a["last"], killed.get(n, a["last"]))) - a["start"]
        for n, a in spans.items()
        if "start" in a
    )


def compute_metrics(
    store: Store, run_id: str, wasted_states: Collection[str] = WASTED_STATES
) -> list[Metric]:
    from basht.experiment import DERIVED_KEYS, Experiment

    run = store.get_run(run_id)
    spec = dict(store.get_experiment(run.experiment_id).spec)
    for derived in DERIVED_KEYS:
        spec.pop(derived, None)
    experiment = Experiment.from_dict(spec, f"run {run_id}")
    price, _ = billing_price(experiment)
    cpus = experiment.resources.cpus_per_worker
    # On a plan's instances a trial holds at least one GPU.
    gpus = 1 if experiment.resources.accelerator == "gpu" or experiment.plan is not None else 0

    trials = store.trials(run_id)
    accounts = store.energy_accounts(run_id)
    energy_j: dict[int, float] = defaultdict(float)
    emissions_g: dict[int, float] = defaultdict(float)
    idle_j: dict[str, float] = dict.fromkeys(IDLE_KINDS, 0.0)
    test_j = node_j = node_g = 0.0
    unmeasured = {a.trial for a in accounts if a.component == UNMEASURED}
    accounts = [a for a in accounts if a.component != UNMEASURED]
    for a in accounts:
        node_j += a.energy_j
        node_g += a.emissions_g
        if a.kind == "trial" and a.trial is not None:
            energy_j[a.trial] += a.energy_j
            emissions_g[a.trial] += a.emissions_g
        elif a.kind in idle_j:
            idle_j[a.kind] += a.energy_j
        elif a.kind == "test":
            test_j += a.energy_j
    source = source_label(accounts) or None

    out: list[Metric] = []
    per_trial_kwh = [energy_j.get(t.number, 0.0) / J_PER_KWH for t in trials]
    durations = [trial_compute_s(t.load_s, t.train_s, t.validate_s) for t in trials]
    wasted = [i for i, t in enumerate(trials) if t.state in wasted_states]
    sized = node_prices(store, run_id, price, experiment.measure.price.vcpus is None)
    costs = [
        trial_cost_usd(sized.get(t.worker, price), d, cpus, gpus)
        for t, d in zip(trials, durations, strict=True)
    ]
    trial_j = sum(energy_j.values())

    if unmeasured:  # some E_i are unknown: no figure that needs every one of them
        for name in ("TWH", "TWH_median", "TWH_total"):
            out.append(Metric(name, None, "kWh", UNMEASURED))
    elif per_trial_kwh:
        out.append(Metric("TWH", statistics.fmean(per_trial_kwh), "kWh", source))
        out.append(Metric("TWH_median", statistics.median(per_trial_kwh), "kWh", source))
        out.append(Metric("TWH_total", sum(per_trial_kwh), "kWh", source))
    if trial_j > 0:
        out.append(Metric("CINT", sum(emissions_g.values()) / (trial_j / J_PER_KWH), "gCO2eq/kWh"))
    elif node_j > 0:
        out.append(Metric("CINT", node_g / (node_j / J_PER_KWH), "gCO2eq/kWh"))
    jct_s = job_completion_s(store, run_id)
    if jct_s is not None:
        out.append(Metric("JCT", jct_s * 1000, "ms"))
    out.append(Metric("OC", operating_cost_usd(store, run_id, experiment), "USD"))
    out.append(Metric("WTT", sum(durations[i] for i in wasted) * 1000, "ms"))
    if unmeasured:
        out.append(Metric("WTE", None, "kWh", UNMEASURED))
    else:
        out.append(Metric("WTE", sum(per_trial_kwh[i] for i in wasted), "kWh", source))
    out.append(Metric("WTC", sum(costs[i] for i in wasted), "USD"))
    if unmeasured:  # what a lost meter booked for them is on no counter now
        out.append(Metric("WR", None, "%", UNMEASURED))
    elif node_j > 0:
        out.append(Metric("WR", 100 * sum(idle_j.values()) / node_j, "%", source))
    out.append(Metric("energy_total", node_j / J_PER_KWH, "kWh", source))
    out.append(Metric("emissions_total", node_g, "gCO2eq", source))
    for kind, joules in idle_j.items():
        out.append(Metric(f"idle_{kind}", joules / J_PER_KWH, "kWh", source))
    out.append(Metric("energy_test", test_j / J_PER_KWH, "kWh", source))

    counts = Counter(t.state for t in trials)
    out.append(Metric("trials", float(len(trials)), "count"))
    out.extend(Metric(f"trials_{state}", float(n), "count") for state, n in sorted(counts.items()))
    if unmeasured:
        out.append(Metric("trials_unmeasured", float(len(unmeasured)), "count"))
    if durations:
        out.append(Metric("trial_time_total", sum(durations) * 1000, "ms"))
        out.append(Metric("trial_time_median", statistics.median(durations) * 1000, "ms"))
        for part in ("load_s", "train_s", "validate_s"):
            mean = statistics.fmean(getattr(t, part) for t in trials)
            out.append(Metric(f"mean_{part.removesuffix('_s')}", mean * 1000, "ms"))
    return out
