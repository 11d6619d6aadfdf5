"""Fluid on a Ray cluster, driven from inside the cluster's network namespace.

The two-node test cluster lives on the namespace's 127.0.0.1, so its driver must run there too:
`tests/engine/test_ray_fluid.py` starts `python -m tests.engine.fluid_probe SCENARIO ADDRESS` with
`Cluster.run` and reads what the scenario saw as JSON on the last line of its output (progress
lines before it: "ready", "moved"...). `ThreadProbe` is the workload the actors run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from basht.engine import COMPLETE, CONTINUE, RayExecutor, TrialEvent, TrialTask, WorkloadRef

PROBE = WorkloadRef("tests.engine.fluid_probe:ThreadProbe")
MLP_CONFIG = {"lr": 0.01, "hidden": 32, "batch_size": 64}


class ThreadProbe:
    """Each epoch sleeps `config["epoch_s"]` over its width (as if it scaled perfectly: threads,
    or GPUs given) and reports the threads its process was held to while it ran
    (OMP_NUM_THREADS), the width it was started at, and the GPUs it was given and can see
    (CUDA_VISIBLE_DEVICES, set by Ray)."""

    def __init__(self, seed: int = 0):
        self.epoch = 0

    def load(self, config: dict[str, Any], resources: Any) -> None:
        self.epoch_s = float(config.get("epoch_s", 0.05))
        self.cpus, self.devices = resources.cpus, len(resources.devices)
        self.share = resources.device_share

    def train(self, epochs: int) -> None:
        self.omp = float(os.environ["OMP_NUM_THREADS"])
        width = self.devices * self.share if self.devices else self.omp
        time.sleep(self.epoch_s * epochs / width)
        self.epoch += epochs

    def validate(self) -> dict[str, float]:
        visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
        return {
            "accuracy": self.epoch / 100,
            "omp": self.omp,
            "cpus": float(self.cpus),
            "devices": float(self.devices),
            "share": self.share,
            "visible": float(len(visible)),
        }

    def test(self) -> dict[str, float]:
        return {"accuracy": 1.0}

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch = state["epoch"]


class Driver:
    """A small stand-in for the Tuner: submits, answers reports and keeps what it saw."""

    def __init__(self, ex: RayExecutor):
        self.ex = ex
        self.kept: list[TrialEvent] = []
        self.reports: list[dict[str, Any]] = []  # every report, with the width it ran at

    def note(self, event: TrialEvent) -> None:
        if event.kind == "failed":
            raise AssertionError(f"trial {event.trial_id} failed: {event.error}")
        if event.kind == "report":
            plan = self.ex._fluid
            progress = plan.progress.get(event.trial_id) if plan else None
            self.reports.append(
                {
                    "trial": event.trial_id,
                    "epoch": event.epoch,
                    "node": self.ex._slots[event.worker].node_id,
                    "width": progress.width if progress else None,
                    "metrics": event.metrics,
                }
            )

    def poll(self, timeout_s: float = 1.0) -> None:
        for event in self.ex.poll(timeout_s):
            self.note(event)
            self.kept.append(event)

    def next(self, trial_id: int, kind: str, timeout_s: float = 180.0) -> TrialEvent:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for i, event in enumerate(self.kept):
                if event.trial_id == trial_id and event.kind == kind:
                    return self.kept.pop(i)
            self.poll()
        raise AssertionError(f"no {kind} from trial {trial_id}")

    def until(self, done: Callable[[], bool], timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, "timed out"
            self.poll()


def _executor(address: str, workers: int, **kwargs: Any) -> RayExecutor:
    ex = RayExecutor(workers, 1, address=address, scheduler="fluid", **kwargs)
    ex.start()
    return ex


def _plans(ex: RayExecutor) -> list[dict[str, Any]]:
    return [
        {"node": p.node_id, "capacity": p.capacity, "widths": list(p.widths.values())}
        for p in ex.plans
    ]


def packing(address: str) -> dict[str, Any]:
    """Ten trials of different lengths through four workers on the two nodes."""
    import ray

    ex = _executor(address, workers=4, memory_per_worker_mb=128)
    out: dict[str, Any] = {}
    try:
        ex.setup(PROBE)
        driver = Driver(ex)
        targets = {i: 1 + (i * 7) % 6 for i in range(10)}  # 1..6 epochs
        waiting = list(targets)
        done: set[int] = set()
        while len(done) < len(targets):
            while waiting and ex.idle_workers:
                trial_id = waiting.pop(0)
                config = {"epoch_s": 0.05 * (1 + trial_id % 3)}
                ex.submit(
                    TrialTask(trial_id, config, PROBE, seed=0, target_budget=targets[trial_id])
                )
            if len(ex.running) == 4 and "held" not in out:
                out["held"] = {
                    "available_cpu": ray.available_resources().get("CPU", 0.0),
                    "groups": {
                        r.node_id: ray.util.placement_group_table(r.group)["bundles_to_node_id"]
                        for r in ex._fluid.reservations.values()
                    },
                }
            for event in ex.poll(1.0):
                driver.note(event)
                if event.kind == "report":
                    last = event.epoch >= targets[event.trial_id]
                    ex.command(event.trial_id, COMPLETE if last else CONTINUE)
                elif event.kind == "completed":
                    done.add(event.trial_id)
        out.update(
            reports=driver.reports, plans=_plans(ex), capacity=ex.capacity(), nodes=len(ray.nodes())
        )
    finally:
        ex.shutdown()
    # Nothing of the run's reservations is left on the cluster.
    ray.init(address=address, logging_level="WARNING")
    out["after_cpu"] = ray.available_resources().get("CPU", 0.0)
    out["total_cpu"] = ray.cluster_resources().get("CPU", 0.0)
    ray.shutdown()
    return out


def resize(address: str) -> dict[str, Any]:
    """Two digits-mlp trials alone on their nodes, their first epoch one thread wide (the
    baseline), squeezed to 1 thread while a short trial shares each node, then 2 threads alone
    (and from epoch 4 what their measured speed-up says)."""
    ex = _executor(address, workers=4)
    mlp, sgd = WorkloadRef("digits-mlp"), WorkloadRef("digits-sgd")
    try:
        ex.setup(mlp)
        d = Driver(ex)
        for trial_id in (1, 2):
            ex.submit(TrialTask(trial_id, MLP_CONFIG, mlp, seed=3, target_budget=4))
        for trial_id in (1, 2):
            d.next(trial_id, "report")
        for trial_id in (3, 4):
            ex.submit(TrialTask(trial_id, {"alpha": 1e-3}, sgd, seed=0, target_budget=1))
        for trial_id in (1, 2):
            ex.command(trial_id, CONTINUE)  # a short trial shares its node: one core each
        for trial_id in (1, 2, 3, 4):
            d.next(trial_id, "report")
        for trial_id in (3, 4):
            ex.command(trial_id, COMPLETE)
            d.next(trial_id, "completed")
        for _epoch in (3, 4):
            for trial_id in (1, 2):
                ex.command(trial_id, CONTINUE)  # alone again from epoch 3: two cores
            for trial_id in (1, 2):
                d.next(trial_id, "report")
        for trial_id in (1, 2):
            ex.command(trial_id, COMPLETE)
            d.next(trial_id, "completed")
        return {"reports": [r for r in d.reports if r["trial"] in (1, 2)], "plans": _plans(ex)}
    finally:
        ex.shutdown()


def join(address: str) -> dict[str, Any]:
    """Two long trials, one per node; the second node is killed (the test does it after
    "ready"), a node joins (the test starts it after "moved"), and a new trial goes to it."""
    ex = _executor(address, workers=2)
    config = {"epoch_s": 0.2}
    out: dict[str, Any] = {}
    try:
        ex.setup(PROBE)
        d = Driver(ex)
        answered: set[tuple[int, int]] = set()
        finish: set[int] = set()

        def answer() -> None:
            """Every report is answered: go on, or complete for the trials in `finish`."""
            for r in d.reports:
                key = (r["trial"], r["epoch"])
                if key not in answered and r["trial"] in ex.running:
                    answered.add(key)
                    ex.command(r["trial"], COMPLETE if r["trial"] in finish else CONTINUE)

        def until(done: Callable[[], bool]) -> None:
            d.until(lambda: (answer(), done())[1])

        def last_on(trial_id: int) -> tuple[str | None, float | None]:
            mine = [r for r in d.reports if r["trial"] == trial_id]
            return (mine[-1]["node"], mine[-1]["width"]) if mine else (None, None)

        for trial_id in (1, 2):
            ex.submit(TrialTask(trial_id, config, PROBE, seed=0, target_budget=10_000))
        # Each runs its first epoch one thread wide, then (the probe scales perfectly) two.
        until(lambda: all(last_on(t)[1] == 2.0 for t in (1, 2)))
        head = ray_head_node()
        out["start"] = {t: last_on(t) for t in (1, 2)}
        print("ready", flush=True)
        until(lambda: len(ex._fluid.reservations) == 1)  # the node left
        until(lambda: last_on(1) == (head, 1.0) and last_on(2) == (head, 1.0))
        out["squeezed"] = {t: last_on(t) for t in (1, 2)}
        print("moved", flush=True)
        until(lambda: len(ex._fluid.reservations) == 2)  # a node joined
        joined = next(n for n in ex._fluid.reservations if n != head)
        finish.add(2)  # its worker is free then: it moves to the node that joined
        until(lambda: any(s.idle and s.home == joined for s in ex._slots))
        ex.submit(TrialTask(3, config, PROBE, seed=0, target_budget=10_000))
        until(lambda: last_on(3) == (joined, 2.0) and last_on(1) == (head, 2.0))
        out.update(head=head, joined=joined, reports=d.reports, plans=_plans(ex))
        out["end"] = {t: last_on(t) for t in (1, 3)}
        return out
    finally:
        ex.shutdown()


def ray_head_node() -> str:
    import ray

    return next(n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n["Resources"])


def gpu(address: str) -> dict[str, Any]:
    """A Ray of its own that believes it has two GPUs (none is touched): a trial alone takes
    both, moves down to a share when three short ones arrive, and back up once they are done."""
    import ray

    real_init = ray.init
    ray.init = lambda *a, **kw: real_init(*a, **{**kw, "num_gpus": 2})
    ex = RayExecutor(4, 1, accelerator="gpu", scheduler="fluid")
    ex.start()
    try:
        ex.setup(PROBE)
        d = Driver(ex)
        targets = {1: 8, 2: 2, 3: 2, 4: 2}
        ex.submit(TrialTask(1, {"epoch_s": 0.3}, PROBE, seed=0, target_budget=8))
        loads, done = 0, set()
        deadline = time.monotonic() + 240
        while len(done) < len(targets):
            assert time.monotonic() < deadline, "timed out"
            for event in ex.poll(1.0):
                d.note(event)
                loads += event.kind == "loaded" and event.trial_id == 1
                if event.kind == "completed":
                    done.add(event.trial_id)
                if event.kind != "report":
                    continue
                if event.trial_id == 1 and event.epoch == 1:  # three short trials arrive
                    for trial_id in (2, 3, 4):
                        config = {"epoch_s": 0.05}
                        ex.submit(TrialTask(trial_id, config, PROBE, seed=0, target_budget=2))
                last = event.epoch >= targets[event.trial_id]
                ex.command(event.trial_id, COMPLETE if last else CONTINUE)
        return {"reports": d.reports, "plans": _plans(ex), "loads_1": loads}
    finally:
        ex.shutdown()


SCENARIOS = {"packing": packing, "resize": resize, "join": join, "gpu": gpu}

if __name__ == "__main__":
    scenario, address = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    print(json.dumps(SCENARIOS[scenario](address)), flush=True)
