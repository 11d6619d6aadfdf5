"""The Ray nodes a run holds, and from when to when: what its bill (OC) counts on a Ray cluster.

Ray keeps no node's start or end time where a driver can read it without the dashboard, so the
driver looks (`ray.nodes()`): when it has started or joined Ray, when its workers are ready, every
`interval_s` while trials run, and before it lets go of Ray. A node is part of the run from the
first look that finds it alive to the first look that finds it dead or gone; one still alive at
the last look is part of it until the run's end. A node's join or loss is therefore known to
within the interval (and the time Ray takes to declare a node dead).

Every alive node of the cluster counts, whether it holds one of the run's workers or not: a
cluster joined at `ray.address` is taken to be provisioned for the run (a head node without CPUs
too). Ray gives a node that starts again a new id, so it counts as a node of its own.

What a node costs is not Ray's to say: the run bills each as one instance at `measure.price`
(`energy.billing.ray_cluster_cost_usd`). Nodes that share a machine (containers on one host) are one
instance each, and a driver outside the cluster (Ray Client) is not billed.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: Seconds between two looks at the cluster while trials run.
NODE_CHECK_S = 2.0


def node_label(node_id: str) -> str:
    """How a Ray node is named in the run's records (its energy meter's components too)."""
    return f"node-{node_id[:8]}"


@dataclass
class RayNode:
    node_id: str
    address: str
    joined_at: float  # unix seconds: the first look that found it alive
    cpus: float = 0.0
    gpus: float = 0.0
    memory_mb: float = 0.0  # Ray's `memory` resource of the node
    left_at: float | None = None  # the first look that found it dead or gone; None: it stays
    workers: set[int] = field(default_factory=set)  # the run's workers placed on it

    def record(self) -> dict[str, Any]:
        return {
            "node": node_label(self.node_id),
            "node_id": self.node_id,
            "address": self.address,
            "cpus": self.cpus,
            "gpus": self.gpus,
            "joined_at": self.joined_at,
            "left_at": self.left_at,
            "workers": sorted(self.workers),
        }


class NodeLedger:
    """The nodes of the cluster a run holds, told to `on_change` (every node's record, in the
    order first seen) each time one joins, leaves or is given a worker."""

    def __init__(
        self,
        on_change: Callable[[list[dict[str, Any]]], None] | None = None,
        interval_s: float = NODE_CHECK_S,
        clock: Callable[[], float] = time.time,
    ):
        self.on_change, self.interval_s, self.clock = on_change, interval_s, clock
        self._nodes: dict[str, RayNode] = {}
        self._next_look = -math.inf  # time.monotonic() of the next look `look(force=False)` takes

    def look(self, ray: Any, force: bool = True) -> None:
        """Ask Ray for its nodes (without `force`, only once `interval_s` has passed)."""
        if not force and time.monotonic() < self._next_look:
            return
        self._next_look = time.monotonic() + self.interval_s
        try:
            table = ray.nodes()
        except Exception as err:  # a connection going down says so itself, elsewhere
            log.debug("could not list the Ray cluster's nodes: %s", err)
            return
        self.seen(table, self.clock())

    def seen(self, table: list[dict[str, Any]], now: float) -> None:
        """Take in Ray's node table (`ray.nodes()`) as it was at `now`."""
        alive = {n["NodeID"]: n for n in table if n.get("Alive") and n.get("NodeID")}
        if not alive:  # never so while connected (the driver is on one): a bad answer, not news
            return
        changed = False
        for node_id, info in alive.items():
            if node_id not in self._nodes:
                resources = info.get("Resources") or {}
                self._nodes[node_id] = RayNode(
                    node_id,
                    str(info.get("NodeManagerAddress", "")),
                    now,
                    cpus=float(resources.get("CPU", 0.0)),
                    gpus=float(resources.get("GPU", 0.0)),
                    memory_mb=float(resources.get("memory", 0.0)) / 2**20,
                )
                changed = True
        for node in self._nodes.values():
            if node.left_at is None and node.node_id not in alive:
                node.left_at = now
                changed = True
                log.info("Ray node %s is gone from the cluster", node.node_id)
        if changed:
            self._tell()

    def placed(self, worker: int, node_id: str | None) -> None:
        """Worker `worker` is on node `node_id` (a node the last look did not find joins now)."""
        if node_id is None:
            return
        node = self._nodes.get(node_id)
        if node is None:
            node = self._nodes[node_id] = RayNode(node_id, "", self.clock())
        if worker not in node.workers:
            node.workers.add(worker)
            self._tell()

    def alive(self) -> list[RayNode]:
        """The nodes the last look found alive, in the order first seen."""
        return [node for node in self._nodes.values() if node.left_at is None]

    def records(self) -> list[dict[str, Any]]:
        return [node.record() for node in self._nodes.values()]

    def _tell(self) -> None:
        if self.on_change is not None:
            self.on_change(self.records())
