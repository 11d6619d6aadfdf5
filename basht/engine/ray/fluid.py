"""Fluid on a Ray cluster: each node's capacity reserved once, Basht's plan the truth inside it.

Ray cannot change an actor's resources in place, and restarting an actor to give its trial more
threads would cost more than the threads gain. So a fluid run reserves each node once, as a
placement group of one bundle pinned to that node (by its `ray.io/node-id` label) that holds the
node's CPUs (and GPUs): to Ray, the run holds those whether a trial uses them or not, and nothing
else is placed on them. The worker actors live inside the reservation, each taking its minimum
from it (1 CPU; on GPU nodes `cpus_per_worker` CPUs and the GPUs it trains on), so Ray itself
never lets more workers onto a node than it has cores. How many threads each trial runs is Basht's
plan (`node_widths`), which never hands out more than the node's reservation holds.

On GPUs a trial's width is the actor's own `num_gpus` inside the reservation, so Ray decides which
devices and keeps their shares honest; a trial whose width changes is moved to a new actor of the
new size at its next epoch boundary, restarted from its checkpoint with its global batch size
kept (the workload trains data-parallel over the devices it is given).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from basht.engine.devices import gpu_widths
from basht.engine.packing import (
    Speedups,
    TrialLoad,
    TrialProgress,
    fluid_widths,
    loads_of,
    next_node,
    node_widths,
    spread_slots,
)
from basht.engine.ray.nodes import RayNode

log = logging.getLogger(__name__)

#: Plans kept for `ClusterPlan.history` (the newest; a benchmark or a test reads them).
HISTORY_LIMIT = 100_000
NODE_LABEL = "ray.io/node-id"


@dataclass
class Reservation:
    """One node's capacity, held for the run by a placement group pinned to the node."""

    node_id: str
    capacity: float  # what the plan packs: cores (CPU runs) or GPUs (GPU runs)
    room: int  # worker slots it holds at most
    bundle: dict[str, float]
    group: Any = None  # the placement group, once reserved


@dataclass(frozen=True)
class NodePlan:
    """A plan of one node as it was made: when, the capacity, and every trial's width there."""

    at: float
    node_id: str
    capacity: float
    widths: dict[int, float]


@dataclass
class ClusterPlan:
    """Where worker slots live and how wide each trial runs, node by node.

    Knows nothing of Ray: the executor reserves and releases (`reserve`, `release`), and tells it
    what trials arrive, report, move and end.
    """

    accelerator: str = "cpu"
    cpus_per_worker: int = 1
    memory_mb: int = 0
    min_width: float = 1.0  # 1 core; on GPU runs the smallest share of a device
    max_width: float = math.inf
    reservations: dict[str, Reservation] = field(default_factory=dict)
    progress: dict[int, TrialProgress] = field(default_factory=dict)
    where: dict[int, str] = field(default_factory=dict)  # trial -> the node it runs on
    planned: dict[int, float] = field(default_factory=dict)
    history: list[NodePlan] = field(default_factory=list)
    speedups: Speedups = field(default_factory=Speedups)

    @property
    def gpu(self) -> bool:
        return self.accelerator == "gpu"

    # -- nodes ------------------------------------------------------------------------------

    def reservation_for(self, node: RayNode) -> Reservation | None:
        """What to reserve of `node`, or None if it cannot hold one worker."""
        cpus, gpus = math.floor(node.cpus + 1e-9), node.gpus
        memory = node.memory_mb if self.memory_mb else math.inf
        by_memory = memory // self.memory_mb if self.memory_mb else math.inf
        if self.gpu:
            capacity = float(math.floor(gpus + 1e-9))
            per_worker = max(1, self.cpus_per_worker)
            room = min(capacity // self.min_width, cpus // per_worker, by_memory)
            bundle = {"CPU": float(room * per_worker), "GPU": capacity}
        else:
            capacity = float(cpus)
            room = min(cpus, by_memory)
            bundle = {"CPU": capacity}
        room = int(room) if math.isfinite(room) else 0
        if room < 1 or capacity < self.min_width:
            return None
        if self.memory_mb:
            bundle["memory"] = float(room * self.memory_mb * 2**20)
        return Reservation(node.node_id, capacity, room, bundle)

    def capacities(self) -> dict[str, float]:
        return {n: r.capacity for n, r in self.reservations.items()}

    def rooms(self) -> dict[str, int]:
        return {n: r.room for n, r in self.reservations.items()}

    def home(self, counts: dict[str, int]) -> str | None:
        """The node the next worker slot goes to, given how many each holds (`next_node`)."""
        return next_node(counts, self.rooms(), self.capacities())

    def spread(self, slots: int) -> dict[str, int]:
        """How many worker slots each reserved node should hold (`spread_slots`)."""
        return spread_slots(slots, self.rooms(), self.capacities())

    def running_on(self, node_id: str | None) -> int:
        return sum(1 for n in self.where.values() if n == node_id)

    def share_for_new(self, node_id: str | None) -> float:
        """The capacity per trial on `node_id` once one more trial runs there."""
        reservation = self.reservations.get(node_id) if node_id is not None else None
        if reservation is None:
            return -math.inf
        return reservation.capacity / (self.running_on(node_id) + 1)

    # -- trials -----------------------------------------------------------------------------

    def arrive(self, trial_id: int, node_id: str, target: int | None, epoch: int) -> float:
        """A trial starts (or starts again, after a loss or a move) on `node_id`: re-plan there
        (and where it was) and return its width. What was measured of it is kept."""
        progress = self.progress.get(trial_id)
        if progress is None:
            progress = self.progress[trial_id] = TrialProgress(target, epoch)
        progress.epoch = epoch
        before = self.where.get(trial_id)
        self.where[trial_id] = node_id
        if before is not None and before != node_id:
            self.replan(before)
        self.replan(node_id)
        progress.width = self.planned.get(trial_id, self.min_width)
        return progress.width

    def report(self, trial_id: int, epoch: int, seconds: float) -> None:
        """An epoch of the trial took `seconds` at its current width."""
        progress = self.progress.get(trial_id)
        if progress is None:
            return
        progress.epoch = epoch
        first_at_width = progress.width not in progress.epoch_s
        progress.epoch_s[progress.width] = seconds
        self.speedups.observe(progress)
        node_id = self.where.get(trial_id)
        if first_at_width and node_id is not None:
            # A width measured for the first time: the baseline a probe waited for, or what a
            # wider width really gains. Both change the plan for the trial's node.
            self.replan(node_id)

    def applied(self, trial_id: int, width: float) -> None:
        """The trial runs at `width` from its next epoch on."""
        if trial_id in self.progress:
            self.progress[trial_id].width = width

    def detach(self, trial_id: int) -> None:
        """The trial left its node but is not over (lost with it, requeued): others there get
        its capacity; what was measured of it is kept for when it starts again."""
        node_id = self.where.pop(trial_id, None)
        self.planned.pop(trial_id, None)
        if node_id is not None:
            self.replan(node_id)

    def leave(self, trial_id: int) -> None:
        """The trial ended (or was aborted): forget it and re-plan its node."""
        self.detach(trial_id)
        self.progress.pop(trial_id, None)

    def node_gone(self, node_id: str) -> list[int]:
        """A node left the cluster: its reservation is dropped; returns the trials that ran there."""
        self.reservations.pop(node_id, None)
        gone = [t for t, n in self.where.items() if n == node_id]
        for trial_id in gone:
            del self.where[trial_id]
            self.planned.pop(trial_id, None)
        return gone

    def replan(self, node_id: str) -> None:
        """New widths for the trials on `node_id` (they take them at their next epoch)."""
        reservation = self.reservations.get(node_id)
        here = {t: self.progress[t] for t, n in self.where.items() if n == node_id}
        if reservation is None or not here:
            return
        width_cap = min(self.max_width, reservation.capacity)
        # CPU trials run their first epoch one thread wide (changing threads costs nothing);
        # a GPU trial would move to another actor for it, so it starts at its planned width.
        loads = loads_of(here, self.speedups, self.min_width, width_cap, probe=not self.gpu)
        widths = node_widths({node_id: loads}, {node_id: reservation.capacity}, self._packer())
        self.planned.update(widths)
        self.history.append(NodePlan(time.time(), node_id, reservation.capacity, dict(widths)))
        if len(self.history) > HISTORY_LIMIT:
            del self.history[: len(self.history) - HISTORY_LIMIT]

    def _packer(self) -> Any:
        if not self.gpu:
            return fluid_widths

        def shares(trials: list[TrialLoad], capacity: float) -> dict[int, float]:
            return gpu_widths(trials, int(capacity), self.min_width)

        return shares

    def by_node(self) -> dict[str, list[int]]:
        nodes: dict[str, list[int]] = defaultdict(list)
        for trial_id, node_id in self.where.items():
            nodes[node_id].append(trial_id)
        return dict(nodes)


def gpu_devices(width: float) -> tuple[tuple[str, ...], float]:
    """The devices a trial of `width` GPUs trains on inside its actor (Ray shows the actor only
    its own, as cuda:0, cuda:1...) and its share of each."""
    if width < 1:
        return ("cuda:0",), width
    return tuple(f"cuda:{i}" for i in range(int(round(width)))), 1.0


def reserve(reservation: Reservation) -> None:
    """Ask Ray for the node's reservation (placed when the node has it free)."""
    from ray.util.placement_group import placement_group

    reservation.group = placement_group(
        [reservation.bundle],
        strategy="STRICT_PACK",
        bundle_label_selector=[{NODE_LABEL: reservation.node_id}],
    )
    log.info(
        "reserved %s on Ray node %s for %d worker(s)",
        reservation.bundle,
        reservation.node_id,
        reservation.room,
    )


def release(reservation: Reservation) -> None:
    """Give the node's reservation back (what still runs in it ends with it)."""
    if reservation.group is None:
        return
    from ray.util.placement_group import remove_placement_group

    with contextlib.suppress(Exception):  # a node already gone takes its group with it
        remove_placement_group(reservation.group)
    reservation.group = None
