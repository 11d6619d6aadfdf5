"""Every Table 2 formula on a store built by hand, against numbers worked out here."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from basht.bench.native import record_ray_nodes
from basht.energy.billing import (
    instance_lifetimes,
    ray_cluster_cost_usd,
    ray_node_lifetimes,
    ray_nodes,
)
from basht.energy.pricing import AWS_LINUX, Price
from basht.engine.ray.nodes import NodeLedger, node_label
from basht.experiment import Experiment
from basht.metrics import compute_metrics
from basht.report.runstats import energy_source, trial_energy_j
from basht.store import Store

KWH = 3.6e6


@pytest.fixture
def store(spec, tmp_path: Path) -> tuple[Store, str]:
    spec["resources"] = {"workers": 2, "cpus_per_worker": 1}
    spec["measure"] = {"price": {"usd_per_hour": 3.6, "vcpus": 4}, "carbon": {"g_per_kwh": 100}}
    store = Store(spec["store"])
    experiment = Experiment.from_dict(spec)
    exp_id = store.add_experiment("t", experiment.to_dict())
    run = store.create_run(exp_id, "t", "native", "local", tmp_path)
    # Phases: deploy at t=100 .. test ends at t=110 .. undeploy ends at t=111.
    for name, start, end in [
        ("deploy", 100, 101),
        ("setup", 101, 102),
        ("run", 102, 109),
        ("collect_results", 109, 109.5),
        ("test", 109.5, 110),
        ("collect_metrics", 110, 110.5),
        ("undeploy", 110.5, 111),
    ]:
        store.add_phase(run.id, name, start, end)
    # Trials: d_i = load + train + validate.
    trials = [
        (0, "completed", 1.0, 2.0, 1.0),  # d = 4 s
        (1, "stopped", 0.5, 1.0, 0.5),  # d = 2 s   (wasted)
        (2, "failed", 1.0, 0.0, 0.0),  # d = 1 s   (wasted)
        (3, "completed", 1.0, 4.0, 1.0),  # d = 6 s
    ]
    for number, state, load, train, validate in trials:
        row = store.add_trial(run.id, number, {"x": number}, 3)
        store.update_trial(row, state=state, load_s=load, train_s=train, validate_s=validate)
    joules = {0: 3600.0, 1: 1800.0, 2: 360.0, 3: 7200.0}
    accounts = [
        {
            "kind": "trial",
            "trial": n,
            "component": "cpu",
            "source": "estimate",
            "energy_j": j,
            "emissions_g": j / KWH * 100,
        }
        for n, j in joules.items()
    ] + [
        {
            "kind": k,
            "trial": None,
            "component": "cpu",
            "source": "estimate",
            "energy_j": j,
            "emissions_g": j / KWH * 100,
        }
        for k, j in [
            ("baseline", 1000.0),
            ("allocation", 500.0),
            ("overhead", 300.0),
            ("test", 200.0),
        ]
    ]
    store.replace_energy_accounts(run.id, accounts)
    return store, run.id


def test_table_2_is_computed_exactly(store):
    s, run_id = store
    m = {x.name: x for x in compute_metrics(s, run_id)}
    energies = [3600, 1800, 360, 7200]
    assert m["TWH"].value == pytest.approx(sum(energies) / 4 / KWH)
    assert m["TWH_median"].value == pytest.approx((1800 + 3600) / 2 / KWH)
    assert m["TWH_total"].value == pytest.approx(sum(energies) / KWH)
    assert m["CINT"].value == pytest.approx(100)
    assert m["JCT"].value == pytest.approx(10_000)
    assert m["OC"].value == pytest.approx(3.6 * 11 / 3600)  # deploy start to undeploy end
    assert m["WTT"].value == pytest.approx((2 + 1) * 1000)
    assert m["WTE"].value == pytest.approx((1800 + 360) / KWH)
    # Each trial's cost: its share of the instance (1 of 4 vCPUs) over its duration.
    assert m["WTC"].value == pytest.approx(3.6 * (2 + 1) / 3600 / 4)
    node = sum(energies) + 1000 + 500 + 300 + 200
    assert m["energy_total"].value == pytest.approx(node / KWH)
    assert m["WR"].value == pytest.approx(100 * (1000 + 500 + 300) / node)
    assert m["idle_allocation"].value == pytest.approx(500 / KWH)
    assert m["emissions_total"].value == pytest.approx(node / KWH * 100)
    for name in ("TWH", "WTE", "WR", "energy_total"):
        assert m[name].source == "estimate"


def test_the_wasted_set_is_configurable(store):
    s, run_id = store
    m = {x.name: x for x in compute_metrics(s, run_id, wasted_states=("failed",))}
    assert m["WTT"].value == pytest.approx(1000)
    assert m["WTE"].value == pytest.approx(360 / KWH)


def test_a_trial_whose_energy_was_not_measured_leaves_the_per_trial_figures_empty(store):
    s, run_id = store
    accounts = [
        {k: getattr(a, k) for k in ("kind", "trial", "component", "source", "energy_j")}
        | {"emissions_g": a.emissions_g}
        for a in s.energy_accounts(run_id)
    ]
    # Trial 3 ran on another Ray node: the monitor booked it as unmeasured, with nothing else.
    accounts = [a for a in accounts if a["trial"] != 3] + [
        {
            "kind": "trial",
            "trial": 3,
            "component": "unmeasured",
            "source": "unmeasured",
            "energy_j": 0.0,
            "emissions_g": 0.0,
        }
    ]
    s.replace_energy_accounts(run_id, accounts)
    m = {x.name: x for x in compute_metrics(s, run_id)}
    for name in ("TWH", "TWH_median", "TWH_total", "WTE", "WR"):
        assert (m[name].value, m[name].source) == (None, "unmeasured"), name
    assert m["trials_unmeasured"].value == 1
    # What does not need every trial's energy is still computed, from what was measured.
    node = 3600 + 1800 + 360 + 1000 + 500 + 300 + 200
    assert m["energy_total"].value == pytest.approx(node / KWH)
    assert m["energy_total"].source == "estimate"
    assert m["CINT"].value == pytest.approx(100)
    assert m["WTT"].value == pytest.approx(3000)
    # The energy plot's figures: the unmeasured trial is unknown, not 0.
    assert trial_energy_j(s, run_id) == {0: 3600.0, 1: 1800.0, 2: 360.0, 3: None}
    assert energy_source(s, run_id) == "estimate"


def _killed_then_resumed(spec, tmp_path: Path) -> tuple[Store, str]:
    """Attempt 1's driver was killed (SIGKILL) in its run phase: deploy and setup are recorded,
    the run phase is not, but a trial ended at t=105 and a power sample was taken at t=106.
    Attempt 2 (basht resume) ran from t=200 to its undeploy's end at t=211."""
    spec["resources"] = {"workers": 2, "cpus_per_worker": 1}
    spec["measure"] = {"price": {"usd_per_hour": 3.6, "vcpus": 4}, "carbon": {"g_per_kwh": 100}}
    s = Store(spec["store"])
    exp_id = s.add_experiment("t", Experiment.from_dict(spec).to_dict())
    run_id = s.create_run(exp_id, "t", "native", "local", tmp_path).id
    for name, start, end in [("deploy", 100, 101), ("setup", 101, 102)]:
        s.add_phase(run_id, name, start, end, attempt=1)
    row = s.add_trial(run_id, 0, {"x": 0}, 1)
    s.update_trial(row, state="completed", started_at=102.0, ended_at=105.0, train_s=3.0)
    sample = {"node": "local", "component": "cpu", "source": "estimate", "energy_j": 1.0}
    s.add_power_samples(run_id, [sample | {"at": 106.0}, sample | {"at": 203.0}])
    for name, start, end in [
        ("deploy", 200, 201),
        ("setup", 201, 202),
        ("run", 202, 209),
        ("collect_results", 209, 209.5),
        ("test", 209.5, 210),
        ("collect_metrics", 210, 210.5),
        ("undeploy", 210.5, 211),
    ]:
        s.add_phase(run_id, name, start, end, attempt=2)
    return s, run_id


def test_a_killed_attempt_counts_until_its_records_last_show_it_alive(spec, tmp_path):
    """Its run phase was never recorded, yet it held the machine and did work until t=106."""
    s, run_id = _killed_then_resumed(spec, tmp_path)
    m = {x.name: x for x in compute_metrics(s, run_id)}
    assert m["JCT"].value == pytest.approx((106 - 100 + 210 - 200) * 1000)
    assert m["OC"].value == pytest.approx(3.6 * (6 + 11) / 3600)


def test_an_unreleased_instance_of_a_killed_attempt_is_not_billed_through_the_resume(
    spec, tmp_path
):
    s, run_id = _killed_then_resumed(spec, tmp_path)
    s.add_instance(run_id, 0, 0, [0], launched_at=100.5, attempt=1)  # never released
    s.add_instance(run_id, 0, 0, [0], launched_at=200.5, attempt=2)
    s.update_instance(run_id, 0, 2, released_at=210.8)
    lives = [life for _, life in instance_lifetimes(s, run_id)]
    assert lives == pytest.approx([106 - 100.5, 210.8 - 200.5])


# -- a run on a Ray cluster: every node is billed ----------------------------------------------


def _node(node_id: str, alive: bool = True, cpus: float = 1.0) -> dict:
    """One row of `ray.nodes()`, as much of it as the run reads."""
    return {
        "NodeID": node_id,
        "Alive": alive,
        "NodeManagerAddress": "10.0.0.1",
        "Resources": {"CPU": cpus},
    }


def test_on_a_ray_cluster_oc_bills_every_node_for_its_time_in_the_job(store):
    s, run_id = store
    head, a, b = "aa" * 28, "bb" * 28, "cc" * 28
    ledger = NodeLedger(on_change=record_ray_nodes(s, run_id, 1))
    ledger.seen([_node(head), _node(a), _node("dd" * 28, alive=False)], now=100.5)  # in deploy
    ledger.placed(0, head)
    ledger.placed(1, a)
    ledger.seen([_node(head), _node(a), _node(b, cpus=4)], now=104.0)  # b joins mid-run
    ledger.seen([_node(head), _node(a, alive=False), _node(b, cpus=4)], now=107.0)  # a is lost
    ledger.seen([_node(head), _node(b, cpus=4)], now=110.7)  # the last look, in undeploy

    nodes = {n["node_id"]: n for n in ray_nodes(s, run_id)}
    assert list(nodes) == [head, a, b]  # a node dead before the run is none of its own
    assert nodes[head]["node"] == node_label(head) == "node-aaaaaaaa"
    assert (nodes[head]["workers"], nodes[a]["workers"], nodes[b]["workers"]) == ([0], [1], [])
    assert (nodes[a]["left_at"], nodes[b]["joined_at"], nodes[b]["cpus"]) == (107.0, 104.0, 4.0)
    assert {n["attempt"] for n in nodes.values()} == {1}
    # Deploy ran 100..101 and undeploy ended at 111: the nodes there at deploy count from 100,
    # the one that joined from 104; the lost one until 107, the others to the end.
    lives = {node["node_id"]: life for node, life in ray_node_lifetimes(s, run_id)}
    assert lives == pytest.approx({head: 11.0, a: 7.0, b: 7.0})
    m = {x.name: x for x in compute_metrics(s, run_id)}
    assert m["OC"].value == pytest.approx(3.6 * (11 + 7 + 7) / 3600)
    # A trial's cost is its share of the one node it ran on: the node count does not change it.
    assert m["WTC"].value == pytest.approx(3.6 * (2 + 1) / 3600 / 4)
    # results.json lists the nodes with their bills, which add up to OC.
    from basht.report.results import build_summary

    listed = build_summary(s, run_id)["ray_nodes"]
    assert [n["node"] for n in listed] == [node_label(x) for x in (head, a, b)]
    assert [n["lifetime_s"] for n in listed] == pytest.approx([11.0, 7.0, 7.0])
    assert sum(n["billed_usd"] for n in listed) == pytest.approx(m["OC"].value)
    from rich.console import Console

    from basht.report.console import result_tables

    shown = Console(width=200, record=True)
    shown.print(result_tables(build_summary(s, run_id)))
    text = shown.export_text()
    assert "Ray nodes billed (OC)" in text and node_label(b) in text


def test_each_ray_node_is_billed_by_the_providers_rule_on_its_own(store):
    s, run_id = store
    ledger = NodeLedger(on_change=record_ray_nodes(s, run_id, 1))
    ledger.seen([_node("aa" * 28), _node("bb" * 28), _node("cc" * 28)], now=100.5)
    # Three nodes of 11 s each: AWS bills each its 60 s minimum, not one 33 s instance.
    price = Price(usd_per_hour=3.6, vcpus=4, rule=AWS_LINUX)
    assert ray_cluster_cost_usd(s, run_id, price) == pytest.approx(3 * 60 * 3.6 / 3600)


def test_a_ray_run_on_one_node_costs_what_a_local_run_does(store):
    s, run_id = store
    ledger = NodeLedger(on_change=record_ray_nodes(s, run_id, 1))
    ledger.seen([_node("aa" * 28)], now=100.9)  # the Ray that deploy started
    m = {x.name: x for x in compute_metrics(s, run_id)}
    assert m["OC"].value == pytest.approx(3.6 * 11 / 3600)  # as test_table_2_is_computed_exactly


def test_a_resumed_ray_run_bills_each_attempts_nodes(store):
    s, run_id = store
    NodeLedger(on_change=record_ray_nodes(s, run_id, 1)).seen(
        [_node("aa" * 28), _node("bb" * 28)], now=100.5
    )
    for name, start, end in [("deploy", 200, 201), ("run", 201, 204), ("undeploy", 204, 205)]:
        s.add_phase(run_id, name, start, end, attempt=2)
    m = {x.name: x for x in compute_metrics(s, run_id)}
    # Attempt 2 recorded no node (a driver that never reached Ray): one instance, as before.
    assert m["OC"].value == pytest.approx(3.6 * (2 * 11 + 5) / 3600)
    NodeLedger(on_change=record_ray_nodes(s, run_id, 2)).seen(
        [_node("aa" * 28), _node("cc" * 28), _node("ee" * 28)], now=200.5
    )
    assert [(n["attempt"], n["node_id"][:2]) for n in ray_nodes(s, run_id)] == [
        (1, "aa"),
        (1, "bb"),
        (2, "aa"),
        (2, "cc"),
        (2, "ee"),
    ]
    m = {x.name: x for x in compute_metrics(s, run_id)}
    assert m["OC"].value == pytest.approx(3.6 * (2 * 11 + 3 * 5) / 3600)


def test_the_bill_so_far_counts_a_running_clusters_instances_or_nodes(store):
    """The live exporter's cost: each instance or node up to now, by the provider's rule."""
    from basht.energy.billing import billed_so_far

    s, run_id = store
    price = Price(usd_per_hour=3.6, vcpus=4)  # 0.001 USD a second, per second
    assert billed_so_far(s, run_id, price, since=100.0, now=105.0) is None  # one instance
    ledger = NodeLedger(on_change=record_ray_nodes(s, run_id, 1))
    ledger.seen([_node("aa" * 28)], now=90.0)  # there before the run: counts from its start
    ledger.seen([_node("aa" * 28), _node("bb" * 28)], now=103.0)
    assert billed_so_far(s, run_id, price, since=100.0, now=105.0) == pytest.approx(0.005 + 0.002)
    # An elastic cluster's instances, the released one up to its release, and the data moved.
    s.add_instance(run_id, 0, 0, [0], 100.0, attempt=1)
    s.add_instance(run_id, 1, 0, [1], 100.0, attempt=1)
    s.update_instance(run_id, 1, 1, released_at=102.0)
    bill = billed_so_far(s, run_id, price, since=100.0, now=105.0, data_usd=0.01)
    assert bill == pytest.approx(0.005 + 0.002 + 2 * 0.01)
    # An instance launched before `since` (an earlier attempt's) is not billed again.
    s.add_instance(run_id, 2, 0, [0], 40.0, attempt=1)
    s.update_instance(run_id, 2, 1, released_at=60.0)
    assert billed_so_far(s, run_id, price, since=100.0, now=105.0, data_usd=0.01) == bill
    assert billed_so_far(s, run_id, price, since=0.0, now=105.0, data_usd=0.01) == pytest.approx(
        bill + 0.020 + 0.01
    )


def test_the_live_bill_of_one_instance_follows_the_providers_rule(store):
    """As OC bills it: AWS's 60 s minimum is owed from the start, then each second."""
    from basht.energy.billing import live_bill_usd
    from basht.energy.pricing import AWS_LINUX

    s, run_id = store
    price = Price(usd_per_hour=3.6, vcpus=4, rule=AWS_LINUX)  # 0.001 USD a second
    assert live_bill_usd(s, run_id, price, since=100.0, now=105.0) == pytest.approx(0.060)
    assert live_bill_usd(s, run_id, price, since=100.0, now=190.0) == pytest.approx(0.090)


def test_the_live_cost_is_the_bill_so_far_and_falls_back_to_time_x_price():
    from basht.report.exporter import _MonitorCollector

    class Silent:
        source_of: dict = {}

        def all_accounts(self) -> dict:
            return {}

    def cost(billed) -> float:
        collector = _MonitorCollector(Silent(), 3600.0, None, time.time() - 10, billed)
        (family,) = [f for f in collector.collect() if f.name == "basht_cost_usd"]
        return family.samples[0].value

    assert cost(lambda now: 42.0) == 42.0
    assert cost(lambda now: None) == pytest.approx(10.0, abs=0.5)  # a dollar a second, 10 s

    def broken(now: float) -> float:
        raise RuntimeError("store gone")

    assert cost(broken) == pytest.approx(10.0, abs=0.5)


def test_on_ray_a_trials_share_is_of_the_node_it_ran_on_unless_the_price_sizes_it(spec, tmp_path):
    """measure.price without vcpus: trial 0 ran on a 2-CPU node, trial 1 on an 8-CPU one."""
    spec["resources"] = {"workers": 2, "cpus_per_worker": 1}
    spec["measure"] = {"price": {"usd_per_hour": 3.6}, "carbon": {"g_per_kwh": 100}}
    s = Store(spec["store"])
    exp_id = s.add_experiment("t", Experiment.from_dict(spec).to_dict())
    run_id = s.create_run(exp_id, "t", "native", "ray", tmp_path).id
    for name, start, end in [("deploy", 100, 101), ("run", 101, 110), ("undeploy", 110, 111)]:
        s.add_phase(run_id, name, start, end)
    for number in (0, 1):  # both failed after 4 s, both wasted
        row = s.add_trial(run_id, number, {"x": number}, 1)
        s.update_trial(row, state="failed", worker=number, train_s=4.0)
    ledger = NodeLedger(on_change=record_ray_nodes(s, run_id, 1))
    ledger.seen([_node("aa" * 28, cpus=2), _node("bb" * 28, cpus=8)], now=100.5)
    ledger.placed(0, "aa" * 28)
    ledger.placed(1, "bb" * 28)
    m = {x.name: x for x in compute_metrics(s, run_id)}
    assert m["WTC"].value == pytest.approx(0.001 * 4 * (1 / 2 + 1 / 8))
