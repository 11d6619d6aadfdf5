"""Fluid on a real two-node Ray cluster (2 CPUs a node, each in its own network namespace): every
node packed within its cores, threads resized between epochs without changing the result, nodes
that leave and join re-planned, and a node lost mid-run losing no finished trial.

The cluster's driver runs inside its namespace (`tests/engine/fluid_probe.py`), or as `basht run`
there. Needs Ray, iproute2 and root; skips without them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from basht.engine import COMPLETE, CONTINUE, LocalExecutor, TrialTask, WorkloadRef
from basht.store import Store
from tests.cli import ROOT, cli_env
from tests.engine.fluid_probe import MLP_CONFIG
from tests.ray_cluster import (
    Cluster,
    assert_nothing_finished_was_lost,
    finish,
    kill_tree,
    lose_a_node_mid_run,
    two_node_cluster,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with two_node_cluster(cpus_per_node=2) as running:
        yield running


def _scenario(cluster: Cluster, name: str, timeout_s: float = 300) -> dict[str, Any]:
    driver = cluster.run(sys.executable, "-m", "tests.engine.fluid_probe", name, cluster.address)
    out, err = finish(driver, timeout_s)
    assert driver.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _within_capacity(plans: list[dict[str, Any]]) -> None:
    for plan in plans:
        assert sum(plan["widths"]) <= plan["capacity"], plan
        assert all(1 <= w <= plan["capacity"] and w == int(w) for w in plan["widths"]), plan


@pytest.mark.needs_root
def test_each_node_is_packed_within_its_cores_and_reserved_whole_for_the_run(cluster):
    seen = _scenario(cluster, "packing")
    assert len(seen["capacity"]) == 2 and set(seen["capacity"].values()) == {2.0}
    _within_capacity(seen["plans"])
    assert {p["node"] for p in seen["plans"]} == set(seen["capacity"])
    # Every epoch ran with the threads the plan gave its trial, never more than its node's cores:
    # two when alone on a node, one when sharing it.
    reports = seen["reports"]
    assert all(r["metrics"]["omp"] == r["width"] for r in reports)
    assert {r["width"] for r in reports} == {1.0, 2.0}
    assert {r["node"] for r in reports} == set(seen["capacity"])
    # To Ray the run held every core of both nodes, each node's in a group placed on that node;
    # once it was over, all of them were free again.
    held = seen["held"]
    assert held["available_cpu"] == 0
    assert all(set(bundles.values()) == {node} for node, bundles in held["groups"].items())
    assert seen["after_cpu"] == seen["total_cpu"] == 4.0


def _straight(epochs: int) -> list[dict[str, float]]:
    """digits-mlp at one thread throughout, on the local pool."""
    ex = LocalExecutor(workers=1, threads=1)
    ex.start()
    try:
        ex.submit(TrialTask(1, MLP_CONFIG, WorkloadRef("digits-mlp"), seed=3))
        reports: list[dict[str, float]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for event in ex.poll(1.0):
                assert event.kind != "failed", event.error
                if event.kind == "report":
                    reports.append(event.metrics)
                    ex.command(1, CONTINUE if len(reports) < epochs else COMPLETE)
                elif event.kind == "completed":
                    return reports
        raise AssertionError("the straight run did not finish")
    finally:
        ex.shutdown()


@pytest.mark.needs_root
def test_a_trial_resized_between_epochs_on_the_cluster_matches_a_fixed_width(cluster):
    seen = _scenario(cluster, "resize")
    _within_capacity(seen["plans"])
    straight = _straight(4)
    nodes = set()
    for trial_id in (1, 2):
        mine = [r for r in seen["reports"] if r["trial"] == trial_id]
        nodes.add(mine[0]["node"])
        assert [r["epoch"] for r in mine] == [1, 2, 3, 4]
        # One thread for the baseline epoch, squeezed to one core while a short trial shared
        # its node, two alone; then what two threads measured to gain (on a small model and a
        # busy machine two can be slower than one: that trial goes back to one).
        widths = [r["width"] for r in mine]
        assert widths[:3] == [1.0, 1.0, 2.0] and widths[3] in (1.0, 2.0), widths
        assert len({r["node"] for r in mine}) == 1
        # As on the local pool: more threads sum in another order, so the loss may differ in its
        # last bits; the model's predictions (accuracy) are the same.
        assert [r["metrics"]["accuracy"] for r in mine] == [r["accuracy"] for r in straight]
        for got, want in zip(mine, straight, strict=True):
            assert got["metrics"]["loss"] == pytest.approx(want["loss"], rel=1e-5)
    assert len(nodes) == 2  # one on each node


def _wait_for_line(driver: subprocess.Popen[str], line: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    assert driver.stdout is not None
    while time.monotonic() < deadline:
        said = driver.stdout.readline()
        if said.strip() == line:
            return
        assert said or driver.poll() is None, driver.communicate()[1][-3000:]
    raise AssertionError(f"the driver never said {line!r}")


@pytest.mark.needs_root
def test_a_node_that_leaves_and_one_that_joins_are_planned_for(cluster):
    driver = cluster.run(sys.executable, "-m", "tests.engine.fluid_probe", "join", cluster.address)
    try:
        _wait_for_line(driver, "ready")
        killed = kill_tree(cluster.node)
        assert any(name.startswith("ray::TrialActor") for name in killed), killed
        _wait_for_line(driver, "moved")
        cluster.node = cluster.add_node()
        out, err = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, err[-3000:]
    seen = json.loads(out.strip().splitlines()[-1])
    head, joined = seen["head"], seen["joined"]
    _within_capacity(seen["plans"])
    # One trial per node, two cores each; the second node lost, its trial restarted on the head
    # beside the other (one core each); a new node joins, a free worker moves there, and a new
    # trial gets its two cores while the head's trial has both of its own again.
    assert head in {node for node, _ in seen["start"].values()}
    assert len({node for node, _ in seen["start"].values()}) == 2
    assert all(width == 2.0 for _, width in seen["start"].values())
    assert seen["squeezed"] == {"1": [head, 1.0], "2": [head, 1.0]}
    assert seen["end"] == {"1": [head, 2.0], "3": [joined, 2.0]}
    epochs = [r["epoch"] for r in seen["reports"] if r["trial"] == 1]
    assert epochs == list(range(1, len(epochs) + 1))  # nothing told twice, nothing skipped


def _digits_asha_fluid(cluster: Cluster, name: str) -> tuple[Any, str]:
    spec = yaml.safe_load((ROOT / "examples" / "digits-asha.yaml").read_text())
    store = f"sqlite:///{cluster.root / f'{name}.db'}"
    spec.update(executor="ray", ray={"address": cluster.address}, store=store)
    spec["engine"] = {"scheduler": "fluid"}
    spec["measure"]["energy"] = "estimate"
    path = cluster.root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path, store


@pytest.mark.needs_root
def test_digits_asha_with_fluid_loses_no_finished_trial_when_a_node_dies(cluster):
    path, url = _digits_asha_fluid(cluster, "fluid-lose-a-node")
    before, _, _, _ = lose_a_node_mid_run(cluster, path, cluster.root / "fluid-lose-a-node.db", url)
    assert_nothing_finished_was_lost(Store(url), before)


def test_gpu_trials_move_to_an_actor_of_their_new_size_and_go_on_where_they_were():
    # A Ray of its own that believes it has two GPUs (none is touched); not the namespaces.
    proc = subprocess.run(
        [sys.executable, "-m", "tests.engine.fluid_probe", "gpu"],
        env={**cli_env(), "TMPDIR": "/tmp", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    for plan in seen["plans"]:
        assert sum(plan["widths"]) <= plan["capacity"] == 2.0
    first = [r for r in seen["reports"] if r["trial"] == 1]
    widths = [r["width"] for r in first]
    # Alone: both GPUs; a share beside three short trials; both again once they are done.
    assert widths[0] == 2.0 and min(widths) == 0.5 and widths[-1] == 2.0
    # Each move restarted it from its checkpoint: its epochs go on (the probe's accuracy is
    # epoch / 100), and each epoch saw as many GPUs as its width (a share of one below 1).
    assert [r["epoch"] for r in first] == list(range(1, 9))
    assert [r["metrics"]["accuracy"] for r in first] == [e / 100 for e in range(1, 9)]
    moves = sum(a != b for a, b in zip(widths, widths[1:], strict=False))
    assert seen["loads_1"] == 1 + moves
    for r in seen["reports"]:
        m, width = r["metrics"], r["width"]
        assert m["visible"] == m["devices"] == max(1, width) and m["share"] == min(1.0, width)
