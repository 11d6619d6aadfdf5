"""Billing: what held resources cost, for plans, metrics and budgets alike.

A provider bills an instance for its whole life, rounded by its rule (`pricing.BillingRule`):
`job_cost_usd` is one instance's bill, `billed_usd` an elastic cluster's (every instance for its
life, and the data moved onto each one launched), `trial_cost_usd` a trial's share of an
instance, not rounded. A run's bill (Table 2's OC, the live bill, what a cost budget is held to)
is read from what the store says the run held: one instance from deploy start to undeploy end,
a plan's instances from request to release, or a Ray cluster's nodes, each one instance.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from basht.energy.pricing import Price, plan_price, price_from_spec

if TYPE_CHECKING:
    from basht.energy.pricing import BillingRule
    from basht.experiment import Experiment
    from basht.store import InstanceRow, PhaseRow, Store

S_PER_HOUR = 3600.0
# A runtime within this many increments above a boundary is not billed one more increment: it is
# float noise from summing timestamps, not a second the provider saw.
ROUNDING_SLACK = 1e-9
#: Where a run on Ray keeps the cluster's nodes in its `host` record: one entry per node and
#: attempt (`node`, `node_id`, `address`, `cpus`, `gpus`, `joined_at`, `left_at`, `workers`).
RAY_NODES = "ray_nodes"


def billed_seconds(runtime_s: float, rule: BillingRule) -> float:
    """Seconds a provider bills for `runtime_s`: max(minimum, ceil(runtime / increment) x increment)."""
    if not math.isfinite(runtime_s) or runtime_s < 0:
        raise ValueError(f"runtime_s must be a finite number >= 0, got {runtime_s!r}")
    steps = math.ceil(runtime_s / rule.increment_s - ROUNDING_SLACK)
    return max(rule.minimum_s, max(steps, 0) * rule.increment_s)


def job_cost_usd(price: Price, runtime_s: float) -> float:
    """Billed cost of keeping the instance for `runtime_s` (OC), the provider's rounding applied."""
    return price.usd_per_hour * billed_seconds(runtime_s, price.rule) / S_PER_HOUR


def billed_usd(
    price: Price, lifetimes_s: Sequence[float], data_usd_per_instance: float = 0.0
) -> float:
    """What the provider bills for instances that lived `lifetimes_s`, each by its rule, and
    for the data moved onto each one launched."""
    moved = data_usd_per_instance * len(lifetimes_s)
    return sum(job_cost_usd(price, t) for t in lifetimes_s) + moved


def billed_usd_per_run(price: Price, lifetimes_s: np.ndarray) -> np.ndarray:
    """`billed_seconds` over arrays, for the planner's simulated runs: each row's bill for
    instances that lived `lifetimes_s` (runs x instances), data movement aside."""
    rule = price.rule
    steps = np.ceil(lifetimes_s / rule.increment_s - ROUNDING_SLACK) * rule.increment_s
    seconds = np.maximum(rule.minimum_s, np.maximum(steps, 0.0))
    if not seconds.size:
        return np.zeros(lifetimes_s.shape[0])
    return seconds.sum(axis=1) * price.usd_per_hour / S_PER_HOUR


def allocated_share(price: Price, cpus: float, gpus: float = 0) -> float:
    """The share of the instance a trial holds: GPUs on a GPU instance, else vCPUs; at most 1."""
    if cpus < 0 or gpus < 0:
        raise ValueError(f"cpus and gpus must be >= 0, got cpus={cpus!r} gpus={gpus!r}")
    share = gpus / price.gpus if price.gpus > 0 and gpus > 0 else cpus / price.vcpus
    return min(share, 1.0)


def trial_cost_usd(price: Price, duration_s: float, cpus: float, gpus: float = 0) -> float:
    """A trial's share of the instance's price over `duration_s`; not rounded to billing steps.

    Billing applies to the instance (see `job_cost_usd`); what no trial holds is idle cost.
    """
    if not math.isfinite(duration_s) or duration_s < 0:
        raise ValueError(f"duration_s must be a finite number >= 0, got {duration_s!r}")
    return price.usd_per_hour * duration_s / S_PER_HOUR * allocated_share(price, cpus, gpus)


# --- a run's bill, from what the store says it held ------------------------------------------


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
    killed = killed_ends(store, run_id, phases)
    return {
        attempt: (min(t), deployed.get(attempt, max(t)), max([*t, killed.get(attempt, 0.0)]))
        for attempt, t in times.items()
    }


def killed_ends(store: Store, run_id: str, phases: Sequence[PhaseRow]) -> dict[int, float]:
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

    if experiment.plan is not None:
        return plan_price(experiment.plan.price), experiment.plan.price.data_usd_per_instance
    return price_from_spec(experiment.measure.price), 0.0


def operating_cost_usd(store: Store, run_id: str, experiment: Experiment) -> float:
    """OC: a plan's elastic cluster, instance by instance; a Ray cluster, node by node; else the
    one instance from deploy start to undeploy end. Each by the provider's rule."""

    price, data_usd = billing_price(experiment)
    if experiment.plan is not None:
        lives = [life for _, life in instance_lifetimes(store, run_id)]
        return billed_usd(price, lives, data_usd)
    on_ray = ray_cluster_cost_usd(store, run_id, price)
    return on_ray if on_ray is not None else job_cost_usd(price, provisioned_s(store, run_id))


def node_prices(store: Store, run_id: str, price: Price, by_node: bool) -> dict[int | None, Price]:
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
    bill = billed_so_far(store, run_id, price, since, now, data_usd)
    return job_cost_usd(price, max(0.0, now - since)) if bill is None else bill


def cost_so_far_usd(store: Store, run_id: str, experiment: Experiment, now: float) -> float:
    """OC as if the job were undeployed at `now`, every attempt so far included: what a cost
    budget is held to. One instance is billed from each attempt's deploy start (the running
    attempt's up to `now`); a plan's instances and a Ray cluster's nodes each for their life."""

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
