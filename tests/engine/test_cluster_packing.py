"""Fluid across nodes, without Ray: where worker slots go, and every node packed within its own
capacity with no trial across two nodes (the Ray executor's plan, `basht.engine.ray.fluid`)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from basht.engine.devices import place
from basht.engine.packing import TrialLoad, next_node, node_widths, spread_slots
from basht.engine.ray.fluid import ClusterPlan, Reservation, gpu_devices
from basht.engine.ray.nodes import RayNode
from basht.experiment import Experiment
from tests.conftest import BASE

nodes = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 16), min_size=1, max_size=4
)


@settings(max_examples=200, deadline=None)
@given(cores=nodes, slots=st.integers(0, 40))
def test_slots_spread_within_each_nodes_room_and_no_node_crowded_while_another_has_more(
    cores, slots
):
    capacity = {n: float(c) for n, c in cores.items()}
    counts = spread_slots(slots, cores, capacity)
    assert all(0 <= counts[n] <= cores[n] for n in cores)
    assert sum(counts.values()) == min(slots, sum(cores.values()))
    # D'Hondt: moving any slot to another node with room would leave it less per slot.
    for a in cores:
        for b in cores:
            if a != b and counts[a] and counts[b] < cores[b]:
                assert capacity[a] / counts[a] >= capacity[b] / (counts[b] + 1) - 1e-9
    assert next_node(counts, cores, capacity) is None or sum(counts.values()) == slots


node_trials = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.floats(0.1, 500),
        st.sampled_from([1.0, 2.0, 4.0, 16.0]),  # max width
        st.floats(0.3, 1.0),  # speed-up exponent
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(trials=node_trials, cores=st.fixed_dictionaries({n: st.integers(1, 8) for n in "abc"}))
def test_every_node_is_packed_within_its_cores_and_each_trial_within_its_bounds(trials, cores):
    by_node: dict[str, list[TrialLoad]] = {n: [] for n in cores}
    for i, (node, work, top, alpha) in enumerate(trials):
        if len(by_node[node]) < cores[node]:  # a node holds one worker per core at most
            by_node[node].append(TrialLoad(i, work, 1.0, top, lambda w, a=alpha: w**a))
    capacity = {n: float(c) for n, c in cores.items()}
    widths = node_widths(by_node, capacity)
    for node, here in by_node.items():
        assert sum(widths[t.trial_id] for t in here) <= capacity[node] + 1e-9
        for t in here:  # every trial runs, within its bounds and its node's cores
            assert t.min_width <= widths[t.trial_id] <= min(t.max_width, capacity[node])
            assert widths[t.trial_id] == math.floor(widths[t.trial_id])  # whole threads
    assert sorted(widths) == sorted(t.trial_id for here in by_node.values() for t in here)


def test_a_trial_alone_on_a_node_gets_that_node_not_the_clusters_cores():
    widths = node_widths(
        {"a": [TrialLoad(0, 100.0)], "b": [TrialLoad(1, 1.0), TrialLoad(2, 1.0)]},
        {"a": 2.0, "b": 8.0},
    )
    assert widths == {0: 2.0, 1: 4.0, 2: 4.0}


def _node(node_id: str, cpus: float, gpus: float = 0.0, memory_mb: float = 64_000) -> RayNode:
    return RayNode(node_id, "127.0.0.1", 0.0, cpus=cpus, gpus=gpus, memory_mb=memory_mb)


def test_a_node_is_reserved_whole_and_holds_a_worker_per_core():
    plan = ClusterPlan(memory_mb=2048)
    r = plan.reservation_for(_node("a", 4))
    assert r is not None and (r.capacity, r.room) == (4.0, 4)
    assert r.bundle == {"CPU": 4.0, "memory": 4 * 2048 * 2.0**20}
    tight = plan.reservation_for(_node("b", 4, memory_mb=5000))  # memory for two workers
    assert tight is not None and tight.room == 2 and tight.bundle["CPU"] == 4.0
    assert plan.reservation_for(_node("head", 0)) is None  # a head without CPUs holds none


def test_a_gpu_node_is_reserved_by_its_gpus_and_the_cpus_its_workers_take():
    plan = ClusterPlan(accelerator="gpu", cpus_per_worker=2, min_width=0.5)
    r = plan.reservation_for(_node("a", cpus=16, gpus=2))
    assert r is not None and (r.capacity, r.room) == (2.0, 4)
    assert r.bundle == {"CPU": 8.0, "GPU": 2.0}
    assert plan.reservation_for(_node("b", cpus=16)) is None  # no GPU, no GPU worker
    assert gpu_devices(0.5) == (("cuda:0",), 0.5)
    assert gpu_devices(2.0) == (("cuda:0", "cuda:1"), 1.0)


def _plan(capacities: dict[str, float], **kwargs) -> ClusterPlan:
    plan = ClusterPlan(**kwargs)
    for node_id, capacity in capacities.items():
        plan.reservations[node_id] = Reservation(node_id, capacity, int(capacity), {})
    return plan


def test_a_trial_that_arrives_or_ends_replans_only_its_node():
    plan = _plan({"a": 4.0, "b": 2.0})
    # A new trial's first epoch runs one wide: the baseline its speed-ups are measured against.
    assert plan.arrive(1, "a", target=9, epoch=0) == 1.0
    assert plan.arrive(2, "b", target=9, epoch=0) == 1.0
    plan.report(1, 1, 8.0)
    assert plan.planned[1] == 4.0  # measured: alone, it gets the whole node
    plan.report(2, 1, 8.0)
    plan.arrive(3, "a", target=1, epoch=0)  # a short one joins trial 1 on node a
    assert plan.planned[1] + plan.planned[3] == 4.0 and plan.planned[1] > plan.planned[3]
    assert plan.planned[2] == 2.0
    plan.leave(3)
    assert plan.planned[1] == 4.0 and 3 not in plan.progress
    assert {p.node_id for p in plan.history} == {"a", "b"}
    assert all(sum(p.widths.values()) <= p.capacity for p in plan.history)


def test_a_lost_trial_keeps_what_was_measured_and_its_node_replans_without_it():
    plan = _plan({"a": 2.0, "b": 2.0})
    plan.arrive(1, "a", target=4, epoch=0)
    plan.arrive(2, "a", target=4, epoch=0)
    plan.report(1, 1, 3.0)
    assert plan.node_gone("a") == [1, 2]
    assert "a" not in plan.reservations and not plan.where
    assert plan.arrive(1, "b", target=4, epoch=1) == 2.0  # again, elsewhere: measured, so wide
    assert plan.progress[1].epoch_s == {1.0: 3.0}
    plan.arrive(2, "b", target=4, epoch=1)
    plan.detach(2)  # requeued: trial 1 gets the node back
    assert plan.planned == {1: 2.0} and 2 in plan.progress


def test_a_width_that_turns_out_slower_is_given_up_for_every_trial():
    plan = _plan({"a": 2.0})
    assert plan.arrive(1, "a", target=9, epoch=0) == 1.0  # the baseline epoch
    plan.report(1, 1, 1.0)
    assert plan.planned[1] == 2.0  # the linear guess: two threads, twice as fast
    plan.applied(1, 2.0)
    plan.report(1, 2, 8.0)  # two threads are eight times slower
    assert plan.planned[1] == 1.0
    plan.leave(1)
    plan.arrive(2, "a", target=9, epoch=0)
    plan.report(2, 1, 1.0)
    assert plan.planned[2] == 1.0  # what was measured holds for the next trial too


def test_slots_go_to_the_node_where_they_get_most():
    plan = _plan({"a": 4.0, "b": 2.0})
    assert plan.spread(3) == {"a": 2, "b": 1}
    assert plan.home({"a": 2, "b": 1}) == "a"  # 4/3 per slot there, 2/2 on b
    assert plan.home({"a": 4, "b": 2}) is None
    plan.arrive(1, "a", target=3, epoch=0)
    plan.arrive(2, "a", target=3, epoch=0)
    assert plan.share_for_new("a") == 4.0 / 3 < plan.share_for_new("b") == 2.0
    assert plan.share_for_new("gone") == -math.inf


@settings(max_examples=100, deadline=None)
@given(
    arrivals=st.lists(st.tuples(st.sampled_from("ab"), st.integers(1, 20)), max_size=12),
    gpus=st.fixed_dictionaries({"a": st.integers(1, 4), "b": st.integers(1, 4)}),
)
def test_gpu_shares_on_each_node_always_place(arrivals, gpus):
    plan = _plan({n: float(g) for n, g in gpus.items()}, accelerator="gpu", min_width=0.25)
    here = {"a": 0, "b": 0}
    for i, (node, epochs) in enumerate(arrivals):
        if (here[node] + 1) * 0.25 <= gpus[node]:
            plan.arrive(i, node, target=epochs, epoch=0)
            here[node] += 1
    for node, trials in plan.by_node().items():
        widths = {t: plan.planned[t] for t in trials}
        placed = place(widths, gpus[node])  # raises if the shares do not pack
        assert sorted(placed) == sorted(trials)
        assert all(w >= 0.25 and (w < 1 or w == int(w)) for w in widths.values())


def test_fluid_on_ray_is_a_valid_experiment():
    spec = {**BASE, "executor": "ray", "engine": {"scheduler": "fluid", "max_width": 4}}
    experiment = Experiment.from_dict(spec)
    assert (experiment.executor, experiment.engine.scheduler) == ("ray", "fluid")
