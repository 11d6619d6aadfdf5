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

Node energy = Σ E_i + idle + the test phase's energy (`energy_test`), exactly.

Node energy sums every metered node (a Ray node's meter books its own). A trial whose energy no
counter fully saw (it ran on a Ray node whose meter was lost with the node) has no E_i: TWH, WTE
and WR are then left empty (`-`, source `unmeasured`) rather than computed as if its energy were 0,
and `trials_unmeasured` says how many such trials there were.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from basht.energy.monitor import IDLE_KINDS, UNMEASURED, source_label
from basht.store import Store

if TYPE_CHECKING:
    from collections.abc import Sequence

    from basht.energy.pricing import Price
    from basht.experiment import Experiment
    from basht.store import InstanceRow, PhaseRow

#: Trials whose compute counts as wasted: crashed, aborted, or stopped early by the pruner.
DEFAULT_WASTED_STATES = ("failed", "aborted", "stopped")
J_PER_KWH = 3.6e6
#: Where a run on Ray keeps the cluster's nodes in its `host` record: one entry per node and
#: attempt (`node`, `node_id`, `address`, `cpus`, `gpus`, `joined_at`, `left_at`, `workers`).
RAY_NODES = "ray_nodes"


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
    killed = _killed_ends(store, run_id, phases)
    return sum(
        a.get("end", max(a["last"], killed.get(n, a["last"]))) - a["start"]
        for n, a in spans.items()
        if "start" in a
    )


def provisioned_s(store: Store, run_id: str) -> float:
    """How long the resources were held: deploy start to undeploy end, over every attempt."""
    return sum(end - start for start, _, end in _attempt_spans(store, run_id).values())


def _attempt_spans(store: Store, run_id: str) -> dict[int, tuple[float, float, float]]:
    """Each attempt's first phase start (deploy's), deploy end and last phase end (undeploy's;
    for one whose driver was killed and was resumed since, the last moment its records show it
    alive, or the last phase recorded)."""
    times: dict[int, list[float]] = defaultdict(list)
    deployed: dict[int, float] = {}
    phases = store.phases(run_id)
    for p in phases:
        times[p.attempt].extend((p.start, p.end))
        if p.name == "deploy":
            deployed[p.attempt] = p.end
    killed = _killed_ends(store, run_id, phases)
    return {
        attempt: (min(t), deployed.get(attempt, max(t)), max([*t, killed.get(attempt, 0.0)]))
        for attempt, t in times.items()
    }


def _killed_ends(store: Store, run_id: str, phases: Sequence[PhaseRow]) -> dict[int, float]:
    """When each attempt whose driver was killed (no undeploy, and resumed since) was last seen
    alive in the store: its run phase, cut short, was never recorded, but its trials, reports
    and power samples were, and the resources were held until then. `phases` are the run's,
    as the caller read them."""
    starts: dict[int, float] = {}
    undeployed: set[int] = set()
    for p in phases:
        starts[p.attempt] = min(p.start, starts.get(p.attempt, p.start))
        if p.name == "undeploy":
            undeployed.add(p.attempt)
    ends = {}
    for attempt, start in starts.items():
        later = [s for a, s in starts.items() if a > attempt]
        if attempt in undeployed or not later:  # the last attempt may be running now
            continue
        seen = store.last_record_at(run_id, start, min(later))
        if seen is not None:
            ends[attempt] = seen
    return ends


def ray_nodes(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The Ray cluster's nodes as the run saw them, one entry per node and attempt (empty for a
    run not on Ray)."""
    host = store.get_run(run_id).host or {}
    return [dict(n) for n in host.get(RAY_NODES) or []]


def ray_node_lifetimes(store: Store, run_id: str) -> list[tuple[dict[str, Any], float]]:
    """Each Ray node with its time in the job. One there by the end of deploy (the run was
    deployed on it) counts from deploy's start, as a single instance would; one that joined later
    from when it joined. It counts until it left, or else to its attempt's end."""
    spans = _attempt_spans(store, run_id)
    lives = []
    for node in ray_nodes(store, run_id):
        span = spans.get(node.get("attempt", 1))
        if span is None:  # an attempt without a phase: nothing of it was held, or is known
            continue
        start, deployed, end = span
        joined, left = node["joined_at"], node.get("left_at")
        begin = start if joined <= deployed else joined
        lives.append((node, max(0.0, min(end, left if left is not None else end) - begin)))
    return lives


def ray_cluster_cost_usd(store: Store, run_id: str, price: Price) -> float | None:
    """The bill of a Ray cluster: each node as one instance at `price`, for its time in the job,
    by the provider's rule. An attempt whose nodes were not recorded is one instance over its
    span. None when no node was recorded at all (not a Ray run)."""
    from basht.energy.pricing import job_cost_usd

    lives = ray_node_lifetimes(store, run_id)
    if not lives:
        return None
    seen = {node.get("attempt", 1) for node, _ in lives}
    unseen = [
        end - start for a, (start, _, end) in _attempt_spans(store, run_id).items() if a not in seen
    ]
    return sum(job_cost_usd(price, life) for _, life in lives) + sum(
        job_cost_usd(price, span) for span in unseen
    )


def instance_lifetimes(
    store: Store, run_id: str, end: float | None = None
) -> list[tuple[InstanceRow, float]]:
    """An elastic cluster's instances, each with its life from request to release. One not
    released lives until `end`: now, for a running job, or by default the end of the run's last
    phase (a killed driver); one of an earlier attempt (its driver killed) until that attempt's
    end, not through the resumed ones."""
    if end is None:
        end = max((p.end for p in store.phases(run_id)), default=0.0)
    spans = _attempt_spans(store, run_id)
    last = max(spans, default=None)
    ends = {a: span_end for a, (_, _, span_end) in spans.items() if a != last}
    return [
        (row, max(0.0, (row.released_at or ends.get(row.attempt, end)) - row.launched_at))
        for row in store.instances(run_id)
    ]


def billing_price(experiment: Experiment) -> tuple[Price, float]:
    """What the run's resources are billed at, and the data moved onto each instance launched:
    a plan's instance type (and its data movement), or else `measure.price`."""
    from basht.energy.pricing import price_from_spec
    from basht.plan.cluster import plan_price

    if experiment.plan is not None:
        return plan_price(experiment.plan.price), experiment.plan.price.data_usd_per_instance
    return price_from_spec(experiment.measure.price), 0.0


def operating_cost_usd(store: Store, run_id: str, experiment: Experiment) -> float:
    """OC: a plan's elastic cluster, instance by instance; a Ray cluster, node by node; else the
    one instance from deploy start to undeploy end. Each by the provider's rule."""
    from basht.energy.pricing import job_cost_usd
    from basht.plan.cluster import billed_usd

    price, data_usd = billing_price(experiment)
    if experiment.plan is not None:
        lives = [life for _, life in instance_lifetimes(store, run_id)]
        return billed_usd(price, lives, data_usd)
    on_ray = ray_cluster_cost_usd(store, run_id, price)
    return on_ray if on_ray is not None else job_cost_usd(price, provisioned_s(store, run_id))


def _node_prices(store: Store, run_id: str, price: Price, by_node: bool) -> dict[int | None, Price]:
    """On a Ray cluster each node is one instance at `price`: a trial's share is of the node its
    worker was on (its CPUs and GPUs), unless `measure.price` gives the instance's size itself."""
    if not by_node:
        return {}
    out: dict[int | None, Price] = {}
    for node in ray_nodes(store, run_id):  # later attempts' nodes come last and win
        if node.get("cpus"):
            vcpus, gpus = max(1, round(node["cpus"])), round(node.get("gpus") or 0)
            sized = replace(price, vcpus=vcpus, gpus=gpus)
            out.update(dict.fromkeys(node.get("workers") or [], sized))
    return out


def billed_so_far(
    store: Store, run_id: str, price: Price, since: float, now: float, data_usd: float = 0.0
) -> float | None:
    """A running job's bill from `since` up to `now`, for the live exporter: an elastic
    cluster's instances launched since (with the data moved onto each), or a Ray cluster's nodes
    (each from `since` or its joining), each by the provider's rule; None when the run has
    neither (one instance: time x price). Earlier attempts' instances are not billed again."""
    from basht.energy.pricing import job_cost_usd
    from basht.plan.cluster import billed_usd

    instances = instance_lifetimes(store, run_id, end=now)
    if instances:
        lives = [life for row, life in instances if row.launched_at >= since]
        return billed_usd(price, lives, data_usd)
    nodes = ray_nodes(store, run_id)
    if nodes:
        lives = [(node.get("left_at") or now) - max(since, node["joined_at"]) for node in nodes]
        return sum(job_cost_usd(price, max(0.0, t)) for t in lives)
    return None


def live_bill_usd(
    store: Store, run_id: str, price: Price, since: float, now: float, data_usd: float = 0.0
) -> float:
    """What the live exporter shows as the bill so far: a cluster's (`billed_so_far`), or the
    one instance's since `since` by the provider's rule, as OC bills it (a minimum charge is
    owed from the start)."""
    from basht.energy.pricing import job_cost_usd

    bill = billed_so_far(store, run_id, price, since, now, data_usd)
    return job_cost_usd(price, max(0.0, now - since)) if bill is None else bill


def cost_so_far_usd(store: Store, run_id: str, experiment: Experiment, now: float) -> float:
    """OC as if the job were undeployed at `now`, every attempt so far included: what a cost
    budget is held to. One instance is billed from each attempt's deploy start (the running
    attempt's up to `now`); a plan's instances and a Ray cluster's nodes each for their life."""
    from basht.energy.pricing import job_cost_usd

    price, data_usd = billing_price(experiment)
    spans = _attempt_spans(store, run_id)
    if not spans:
        return 0.0
    current = max(spans)
    bill = billed_so_far(store, run_id, price, min(s for s, _, _ in spans.values()), now, data_usd)
    if bill is not None:
        return bill
    held = sum(end - start for a, (start, _, end) in spans.items() if a != current)
    return job_cost_usd(price, held + max(0.0, now - spans[current][0]))


def compute_metrics(
    store: Store, run_id: str, wasted_states: tuple[str, ...] = DEFAULT_WASTED_STATES
) -> list[Metric]:
    from basht.energy.pricing import trial_cost_usd
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
    sized = _node_prices(store, run_id, price, experiment.measure.price.vcpus is None)
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
