"""Energy on the Ray nodes whose workers the driver cannot see: a meter on each such node.

The driver's EnergyMonitor reads the machine it runs on and attributes the workers whose processes
it can read (the same `process_view`). A worker elsewhere (another machine or PID namespace, or a
cluster behind Ray Client) is metered by a `NodeMeter` actor on its node: an EnergyMonitor of
that node's own, told which trial each worker slot there runs. The driver's monitor pulls every
meter when it flushes; components are named after their node (`node-1a2b3c4d/cpu`), and the
energy pulled is priced in carbon at the driver's intensity (a run is in one grid region).

Nodes on one machine (one kernel: PID namespaces or containers on one host, or the driver's own
machine) all read its whole counters. The first monitor there owns the machine (the driver's, if
it runs there) and books all of it; the meters started there later are guests that book only
their trials, and the driver takes those out of the owner's overhead, so the machine counts once.
If an owner's node is lost, its machine's idle energy is not booked from then on.

A meter lost with its node loses what it booked since it was last pulled: the trials it metered
in that time are marked unmeasured, and what it booked before is kept. A node whose meter was lost
is not metered again (a meter that cannot open the node's counters would only fail again), so
trials that run there later are marked unmeasured too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from basht.energy.monitor import (
    J_PER_KWH,
    UNMEASURED,
    Account,
    AccountKey,
    EnergyMonitor,
    Intensity,
    Pulled,
    summed,
)
from basht.energy.node import open_node_sources, slot_devices
from basht.engine.ray.nodes import node_label

if TYPE_CHECKING:  # the experiment schema imports the engine
    from basht.experiment import MeasureSpec, ResourcesSpec

log = logging.getLogger(__name__)

_PULL_TIMEOUT_S = 10.0


class NodeMeter:
    """The actor: the energy monitor of one node, for the run's worker slots placed there."""

    def __init__(
        self,
        measure: MeasureSpec,
        resources: ResourcesSpec,
        slots: int,
        here: int,
        guest: bool = False,
    ):
        sources = open_node_sources(measure, resources, here)
        self.monitor = EnergyMonitor(
            source=sources,
            sample_interval_s=measure.sample_interval_s,
            slots=slots,
            slot_devices=slot_devices(sources, slots),
            slots_here=False,
            guest=guest,
        )

    def ready(self) -> str:
        return self.monitor.describe()

    def assign(
        self, slot: int, pid: int | None, trial: int | None, kind: str, devices: dict[str, float]
    ) -> None:
        if devices:
            self.monitor.place(slot, devices)
        self.monitor.assign(slot, pid, trial, kind)

    def leave(self, slot: int) -> None:
        self.monitor.leave(slot)

    def pull(self, final: bool) -> tuple[list[dict[str, Any]], dict[AccountKey, float], dict]:
        """Samples since the last pull, joules booked so far, and each component's source;
        `final` stops the sampler after one last sample."""
        if final:
            self.monitor.close()
        samples, accounts = self.monitor.drain()
        return samples, {k: a.energy_j for k, a in accounts.items()}, self.monitor.source_of


@dataclass
class _Meter:
    node_id: str
    label: str
    actor: Any
    joules: dict[AccountKey, float] = field(default_factory=dict)  # its accounts when last pulled
    unpulled: set[int] = field(default_factory=set)  # trials it booked since then
    owner: str | None = None  # a guest's: the label of the monitor that books its machine


class NodeMeters:
    """The driver's side: starts a meter on each node with workers out of the driver's sight
    (when the executor starts, or when a worker starts again on a new node), tells it what each
    slot runs, and pulls them all into one `Pulled` for the driver's monitor."""

    def __init__(self, measure: MeasureSpec, resources: ResourcesSpec):
        self.measure, self.resources = measure, resources
        self._lock = threading.Lock()
        self._meters: dict[str, _Meter] = {}
        self._slot_node: dict[int, str] = {}
        self._running: dict[int, int] = {}  # slot -> the trial it runs now
        self._accounts: dict[AccountKey, Account] = {}
        self._sources: dict[str, str] = {}
        self._given_up: set[str] = set()  # nodes whose meter was lost
        self._driver_machine: str | None = None
        self._machine_owner: dict[str, str] = {}  # machine -> the label of the meter that owns it
        self._guests: dict[str, str] = {}  # a guest meter's label -> its machine's owner's
        self._actor_class: Any = None
        self._closed = False

    # -- what the executor tells it ---------------------------------------------------------

    def start(
        self,
        nodes: dict[str, tuple[int, str | None]],
        slots: int,
        timeout_s: float,
        driver_machine: str | None,
    ) -> None:
        """Start a meter on each of `nodes` (node id -> workers there and its machine) and wait
        until each samples, so that the first trials there are metered from their first second.
        `driver_machine` is the machine the driver's own monitor books."""
        import ray

        with self._lock:
            self._driver_machine = driver_machine
            started = [
                self._start(node, slots, here, machine)
                for node, (here, machine) in sorted(nodes.items())
                if node not in self._meters and node not in self._given_up
            ]
        calls = {m.actor.ready.remote(): m for m in started}
        if not calls:
            return
        done, _ = ray.wait(list(calls), num_returns=len(calls), timeout=timeout_s)
        for ref in done:
            meter = calls[ref]
            with contextlib.suppress(Exception):  # a meter that failed is found lost at a pull
                described = ray.get(ref)
                if meter.owner is not None:
                    described += (
                        f"; its machine is booked by {meter.owner or 'the driver'}, this meter"
                        " books its trials only"
                    )
                log.info("energy on Ray node %s: %s", meter.node_id, described)

    def assign(
        self,
        slot: int,
        node_id: str,
        pid: int | None,
        trial: int | None,
        kind: str,
        *,
        slots: int,
        here: int,
        machine: str | None = None,
        devices: dict[str, float] | None = None,
    ) -> None:
        """Slot `slot`, on node `node_id` in process `pid`, now runs `trial` (None: nothing).
        `slots` is the run's worker count, `here` how many of them the node holds, `machine` the
        node's, and `devices` the node's GPU components the slot holds (`{"gpu:1": 0.5}`)."""
        with self._lock:
            if self._closed:
                return
            if self._slot_node.get(slot, node_id) != node_id:
                self._leave(slot)
            if node_id in self._given_up:
                if trial is not None and kind == "trial":
                    self._accounts.setdefault(("trial", trial, UNMEASURED), Account())
                return
            meter = self._meters.get(node_id) or self._start(node_id, slots, here, machine)
            self._slot_node[slot] = node_id
            meter.actor.assign.remote(slot, pid, trial, kind, devices or {})
            if trial is not None and kind == "trial":
                self._running[slot] = trial
                meter.unpulled.add(trial)
            else:
                self._running.pop(slot, None)

    def leave(self, slot: int) -> None:
        """Slot `slot`'s worker is gone from its node."""
        with self._lock:
            self._leave(slot)

    def _leave(self, slot: int) -> None:
        node = self._slot_node.pop(slot, None)
        self._running.pop(slot, None)
        if node is not None and node in self._meters:
            with contextlib.suppress(Exception):  # a meter lost with the node cannot be told
                self._meters[node].actor.leave.remote(slot)

    def _start(self, node_id: str, slots: int, here: int, machine: str | None) -> _Meter:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._actor_class is None:
            self._actor_class = ray.remote(NodeMeter)
        label = node_label(node_id)
        owner = self._owner(machine, label)
        actor = self._actor_class.options(
            num_cpus=0,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(self.measure, self.resources, slots, here, owner is not None)
        meter = self._meters[node_id] = _Meter(node_id, label, actor, owner=owner)
        if owner is not None:
            self._guests[label] = owner
        return meter

    def _owner(self, machine: str | None, label: str) -> str | None:
        """Who books `machine` if not the meter `label` about to start there: "" for the
        driver, a meter's label, or None when this meter is the first there (or it is unknown)."""
        if machine is None:
            return None
        if machine == self._driver_machine:
            return ""
        owner = self._machine_owner.setdefault(machine, label)
        return None if owner == label else owner

    # -- what the driver's monitor asks -----------------------------------------------------

    def pull(self, final: bool, intensity: Intensity | None) -> Pulled:
        """Every meter's news since the last pull (waiting up to 10 s; a meter that does not
        answer in time is asked again next time, or counted lost when `final`)."""
        import ray
        from ray.exceptions import RayActorError, RayError

        with self._lock:
            if self._closed or not self._meters:
                self._closed = self._closed or final
                return Pulled(
                    accounts=self._copy(), sources=dict(self._sources), owners=dict(self._guests)
                )
            calls = {m.actor.pull.remote(final): m for m in self._meters.values()}
            unpulled = {m.node_id: set(m.unpulled) for m in self._meters.values()}
            self._closed = final
        done, late = ray.wait(list(calls), num_returns=len(calls), timeout=_PULL_TIMEOUT_S)
        g_per_kwh = intensity.g_per_kwh(time.time()) if intensity is not None else 0.0
        samples: list[dict[str, Any]] = []
        with self._lock:
            for ref in done:
                meter = calls[ref]
                try:
                    news, joules, sources = ray.get(ref)
                except RayActorError as err:
                    self._lost(meter, err)
                    continue
                except RayError as err:  # unreachable for now: asked again at the next pull
                    late.append(ref)
                    log.info(
                        "the energy meter on Ray node %s did not answer: %s", meter.node_id, err
                    )
                    continue
                samples.extend({**s, "node": meter.label} for s in news)
                self._book(meter, joules, g_per_kwh)
                self._sources.update({f"{meter.label}/{c}": s for c, s in sources.items()})
                # What it booked for these trials is in; those still running book on.
                meter.unpulled -= unpulled[meter.node_id] - set(self._running.values())
            for ref in late:
                if final:
                    self._lost(calls[ref], TimeoutError(f"no answer in {_PULL_TIMEOUT_S:.0f} s"))
            return Pulled(samples, self._copy(), dict(self._sources), dict(self._guests))

    def _book(self, meter: _Meter, joules: dict[AccountKey, float], g_per_kwh: float) -> None:
        for (kind, trial, component), total in joules.items():
            key = (kind, trial, f"{meter.label}/{component}")
            added = total - meter.joules.get((kind, trial, component), 0.0)
            account = self._accounts.setdefault(key, Account())
            account.energy_j += added
            account.emissions_g += added / J_PER_KWH * g_per_kwh
        meter.joules = joules

    def _lost(self, meter: _Meter, err: BaseException) -> None:
        """What `meter` booked since its last pull is gone with it: its trials are unmeasured."""
        reason = " ".join(str(err).split())[:200]
        log.warning(
            "the energy meter on Ray node %s was lost (%s): %d trials it metered since its last "
            "reading are unmeasured",
            meter.node_id,
            reason,
            len(meter.unpulled),
        )
        for trial in meter.unpulled:
            self._accounts.setdefault(("trial", trial, UNMEASURED), Account())
        del self._meters[meter.node_id]
        self._given_up.add(meter.node_id)
        for slot in [s for s, node in self._slot_node.items() if node == meter.node_id]:
            self._leave(slot)

    def _copy(self) -> dict[AccountKey, Account]:
        return summed(self._accounts)

    def shutdown(self) -> None:
        """Remove the meters (after the monitor's last pull)."""
        import ray

        with self._lock:
            self._closed = True
            for meter in self._meters.values():
                with contextlib.suppress(Exception):
                    ray.kill(meter.actor, no_restart=True)
            self._meters.clear()
