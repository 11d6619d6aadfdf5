"""One sampler per node: node energy over time, measurement windows, and energy split among trials.

Node energy is never measured per trial (N trackers on one node count it N times). Instead one
background thread reads the node's cumulative counters and, over each interval, splits every
component's energy the way Kepler does:

* active = energy × u, with u the node's CPU utilisation over the interval; each worker slot's
  trial gets active × (its worker's CPU seconds / the node's busy CPU seconds);
* active energy no trial used (the driver, the OS, an idle worker's bookkeeping) is `overhead`;
* idle = energy − active is split evenly over the worker slots on this node: a slot running a
  trial books its part as `baseline` idle (the floor paid while busy), an empty slot as
  `allocation` idle (a provisioned worker with nothing to do: scheduling gaps, waiting for a
  rung, result collection). A slot whose trial ran in no process here is on another node.

A worker on another node is out of this sampler's sight: a meter there (`Elsewhere`, one
EnergyMonitor per node) books its trials, and `flush` merges what the meters booked. Nodes that
share one machine (one kernel: PID namespaces or containers on one host) all read its whole
counters; one of them owns the machine and books it as above, and the others are guests that book
only their trials' part, which `counted_once` then takes out of the owner's overhead.

So trial energies + baseline + allocation + overhead = node energy, exactly, in every interval
(with guests: machine energy, up to the guests' intervals not lining up with the owner's).
A trial's boundaries trigger a sample, so intervals rarely straddle two trials on one slot; a
burst of trials shorter than 50 ms shares one, and each gets the part of the slot's CPU time
that matches how long it held the slot.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import psutil

from basht.energy.estimate import busy_and_total_s
from basht.energy.sources import CombinedSource, open_sources

log = logging.getLogger(__name__)

IDLE_KINDS = ("baseline", "allocation", "overhead")
#: The component of a trial that ran where no counter saw it all (on another node with no meter
#: there, or one lost with its node): a zero account that says its energy is unknown, not zero.
UNMEASURED = "unmeasured"
_BOUNDARY_RESOLUTION_S = 0.05
J_PER_KWH = 3.6e6


def source_label(accounts: Iterable[Any]) -> str:
    """The sources behind booked energy accounts ("estimate", "nvml+rapl"...), the unmeasured
    marker left out; empty when nothing was booked."""
    return "+".join(sorted({a.source for a in accounts if a.component != UNMEASURED}))


AccountKey = tuple[str, int | None, str]  # (kind, trial, component)


class Intensity(Protocol):
    def g_per_kwh(self, at: float) -> float: ...


@dataclass
class Pulled:
    """What the meters on other nodes booked: their power samples since the last pull, and
    everything they booked so far (components named after their node)."""

    samples: list[dict[str, Any]] = field(default_factory=list)
    accounts: dict[AccountKey, Account] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    #: Guest nodes (on a machine another monitor owns): label -> the owner's ("" for this one).
    owners: dict[str, str] = field(default_factory=dict)


class Elsewhere(Protocol):
    """The meters of the nodes whose workers this monitor cannot see."""

    def pull(self, final: bool, intensity: Intensity | None) -> Pulled: ...


@dataclass(frozen=True)
class Measurement:
    """Energy over one window, as Zeus's monitor returns it (here on any machine)."""

    time_s: float
    energy_j: float
    source: str
    by_component: dict[str, float]


@dataclass
class Account:
    """Joules and grams booked to one (kind, trial, component)."""

    energy_j: float = 0.0
    emissions_g: float = 0.0


def summed(*groups: dict[AccountKey, Account]) -> dict[AccountKey, Account]:
    """Fresh accounts holding the sum of `groups` key by key (one group: a copy)."""
    out: dict[AccountKey, Account] = {}
    for group in groups:
        for key, account in group.items():
            target = out.setdefault(key, Account())
            target.energy_j += account.energy_j
            target.emissions_g += account.emissions_g
    return out


def counted_once(
    accounts: dict[AccountKey, Account], owners: dict[str, str]
) -> dict[AccountKey, Account]:
    """`accounts` (fresh ones, changed in place) with every machine counted once where several
    nodes share it.

    A guest node's trials (components `label/cpu`...) used energy that the machine's owner booked
    as overhead, since it could not see their processes; that much leaves the owner's overhead,
    never below zero. GPUs are each node's own devices and are left as they are.
    """
    for (_, _, component), account in accounts.items():
        node, _, name = component.rpartition("/")
        owner = owners.get(node) if node else None
        if owner is None or name.startswith("gpu:") or account.energy_j <= 0:
            continue
        overhead = accounts.get(("overhead", None, f"{owner}/{name}" if owner else name))
        if overhead is None or overhead.energy_j <= 0:
            continue
        taken = min(account.energy_j, overhead.energy_j)
        overhead.emissions_g -= overhead.emissions_g * taken / overhead.energy_j
        overhead.energy_j -= taken
    return accounts


@dataclass
class _Slot:
    pid: int | None = None
    trial: int | None = None
    kind: str = "trial"
    process: Any = None
    cpu_s: float = 0.0
    gpus: dict[str, float] = field(default_factory=dict)  # GPU component -> the share it holds
    remote: bool = False  # its worker runs on another node: none of this node's idle is its
    since: float = 0.0  # when its current trial took it (or the interval began)
    # Trials that held it earlier in this interval, for how long: a trial shorter than the
    # boundary resolution gets its part of the slot's CPU time instead of none.
    earlier: list[tuple[int, str, float]] = field(default_factory=list)

    def hand_over(self, now: float, interval_start: float) -> None:
        """Its trial is about to change: keep how long the outgoing one held it this interval."""
        held = now - max(self.since, interval_start)
        if self.trial is not None and held > 1e-6:
            self.earlier.append((self.trial, self.kind, held))
        self.since = now

    def holders(self, at: float) -> list[tuple[int, str, float]]:
        """The trials that held it over the interval ending `at`, with the part each held."""
        spans = list(self.earlier)
        if self.trial is not None:
            spans.append((self.trial, self.kind, max(at - self.since, 0.0)))
        total = sum(span[2] for span in spans)
        if total <= 0:
            return [(t, k, 1.0 / len(spans)) for t, k, _ in spans]
        return [(t, k, held / total) for t, k, held in spans]


@dataclass
class _Window:
    start: float
    energy_j: dict[str, float]


@dataclass
class EnergyMonitor:
    """Samples `source` every `sample_interval_s` in a background thread until `close()`.

    `slots` is the number of worker slots whose trials are attributed (`assign`). `sink`, if given,
    receives the buffered power samples and the current accounts every `flush_every_s` and at close,
    with what `elsewhere` pulled from other nodes' meters merged in. A node meter starts with
    `slots_here=False`: a slot is its own from the first trial assigned to it there.
    """

    source: CombinedSource | None = None
    sample_interval_s: float = 0.5
    slots: int = 0
    intensity: Intensity | None = None
    sink: Callable[[list[dict[str, Any]], dict[AccountKey, Account]], None] | None = None
    flush_every_s: float = 5.0
    slot_devices: list[str] | None = None  # the GPU component each worker slot uses, e.g. gpu:0
    slots_here: bool = True
    guest: bool = False
    elsewhere: Elsewhere | None = None
    accounts: dict[AccountKey, Account] = field(default_factory=dict)
    # What earlier attempts of a resumed run booked; kept apart, for totals over the whole job.
    carried: dict[AccountKey, Account] = field(default_factory=dict)
    cpu_time_s: float = 0.0  # the sampler thread's own CPU time: its overhead

    def __post_init__(self) -> None:
        self.source = self.source or open_sources()
        self._lock = threading.RLock()
        self._slots = [_Slot(remote=not self.slots_here) for _ in range(self.slots)]
        self._pulled = Pulled()
        for slot, device in zip(self._slots, self.slot_devices or (), strict=False):
            slot.gpus = {device: 1.0}
        self._windows: dict[str, _Window] = {}
        self._device_floor_w: dict[str, float] = {}
        self._processes: dict[int, psutil.Process] = {}
        self._samples: list[dict[str, Any]] = []
        self.samples_taken = 0
        first = self.source.read()
        self._at = first.at
        self._energy = dict(first.energy_j)
        self._busy, _ = busy_and_total_s()
        self.total_j: dict[str, float] = {c: 0.0 for c in self._energy}
        limit = self.source.max_interval_s()
        self.interval_s = min(self.sample_interval_s, limit) if limit else self.sample_interval_s
        self._stop = threading.Event()
        # The first sample is flushed at once: the store then shows within a second that this
        # run has a live driver (`basht resume` refuses to take over a run that has one).
        self._last_flush = time.monotonic() - self.flush_every_s
        self._thread = threading.Thread(target=self._loop, name="basht-energy", daemon=True)
        self._thread.start()

    @property
    def source_of(self) -> dict[str, str]:
        """The source of each component, other nodes' included once pulled."""
        assert self.source is not None
        return {**self.source.component_sources, **self._pulled.sources}

    def all_accounts(self) -> dict[AccountKey, Account]:
        """This node's accounts and, as of the last pull, other nodes'."""
        with self._lock:
            return self._with_other_nodes(self.accounts)

    def _with_other_nodes(self, own: dict[AccountKey, Account]) -> dict[AccountKey, Account]:
        """Fresh accounts: `own` plus the last pull, each shared machine counted once."""
        return counted_once(summed(own, self._pulled.accounts), self._pulled.owners)

    # -- the sampler ------------------------------------------------------------------------

    def _loop(self) -> None:
        start = time.thread_time()
        while not self._stop.wait(self.interval_s):
            self.sample()
            if self.sink is not None and time.monotonic() - self._last_flush >= self.flush_every_s:
                self.flush()
            self.cpu_time_s = time.thread_time() - start

    def sample(self) -> None:
        """Read the node now and book the interval since the last sample."""
        with self._lock:
            assert self.source is not None
            reading = self.source.read()
            busy, _ = busy_and_total_s()
            dt = reading.at - self._at
            d_busy = busy - self._busy
            cpus = psutil.cpu_count() or 1
            u = min(max(d_busy / (dt * cpus), 0.0), 1.0) if dt > 0 else 0.0
            shares = self._worker_shares(d_busy)
            holders = [slot.holders(reading.at) for slot in self._slots]
            intensity = self.intensity.g_per_kwh(reading.at) if self.intensity else 0.0
            for component, total in reading.energy_j.items():
                energy = max(0.0, total - self._energy.get(component, 0.0))
                self.total_j[component] = self.total_j.get(component, 0.0) + energy
                self._book(component, energy, u, shares, intensity, dt, holders)
                self._samples.append(
                    {
                        "at": reading.at,
                        "node": "local",
                        "component": component,
                        "source": self.source_of.get(component, self.source.name),
                        "power_w": energy / dt if dt > 0 else None,
                        "energy_j": self.total_j[component],
                        "utilization": u,
                    }
                )
            self._energy = dict(reading.energy_j)
            self._at, self._busy = reading.at, busy
            for slot in self._slots:
                slot.earlier.clear()
                slot.since = reading.at
            self.samples_taken += 1

    def _worker_shares(self, d_busy: float) -> list[float]:
        """Each slot's part of the node's busy CPU time over the interval (summing to at most 1)."""
        deltas = []
        for slot in self._slots:
            cpu = slot.cpu_s
            if slot.process is not None:
                try:
                    cpu = tree_cpu_s(slot.process)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    slot.process = None
            deltas.append(max(0.0, cpu - slot.cpu_s))
            # Never lowered: a child that ended but is not yet reaped drops out of the tree for
            # a moment, and its time must not count twice when it is back (as reaped).
            slot.cpu_s = max(slot.cpu_s, cpu)
        used = sum(deltas)
        if d_busy <= 0 or used <= 0:
            return [0.0] * len(deltas)
        scale = 1.0 / max(d_busy, used)  # measurement jitter must not book more than was used
        return [d * scale for d in deltas]

    def _book(
        self,
        component: str,
        energy: float,
        u: float,
        shares: list[float],
        intensity: float,
        dt: float = 0.0,
        holders: list[list[tuple[int, str, float]]] | None = None,
    ) -> None:
        if component.startswith("gpu:") and any(slot.gpus for slot in self._slots):
            self._book_device(component, energy, intensity, dt)
            return
        active = energy * u
        idle = energy - active
        booked = 0.0
        if holders is None:
            holders = [slot.holders(time.time()) for slot in self._slots]
        for slot, held, share in zip(self._slots, holders, shares, strict=True):
            if share <= 0 and slot.process is None:
                continue  # its worker is not read here (another node, or gone)
            # A worker's CPU time is read to the nanosecond (own_cpu_s), but the node's busy
            # time only in ticks: an interval too short for the node's counter to move books
            # no active energy, and the next one books it.
            for trial, kind, part in held:
                self._add(kind, trial, component, active * share * part, intensity)
                booked += active * share * part
        if self.guest and not component.startswith("gpu:"):  # the machine's owner books the rest
            return
        self._add("overhead", None, component, active - booked, intensity)
        local = [slot for slot in self._slots if not slot.remote]
        if not local:
            self._add("baseline", None, component, idle, intensity)
            return
        per_slot = idle / len(local)
        busy_slots = sum(slot.trial is not None for slot in local)
        self._add("baseline", None, component, per_slot * busy_slots, intensity)
        self._add("allocation", None, component, per_slot * (len(local) - busy_slots), intensity)

    def _book_device(self, device: str, energy: float, intensity: float, dt: float) -> None:
        """A GPU's energy goes to the trials on the slots that own it, not by CPU time.

        Its idle floor is the lowest power the device has shown (Kepler's GPU rule); the rest is
        active and split among the trials sharing the device by the share each holds. The floor
        is baseline idle while a trial holds the device and allocation idle while none does.
        """
        power = energy / dt if dt > 0 else 0.0
        if dt > 0:
            self._device_floor_w[device] = min(self._device_floor_w.get(device, power), power)
        idle = min(energy, self._device_floor_w.get(device, 0.0) * dt)
        active = energy - idle
        owners = [s for s in self._slots if s.trial is not None and device in s.gpus]
        held = sum(s.gpus[device] for s in owners)
        for slot in owners:
            self._add(slot.kind, slot.trial, device, active * slot.gpus[device] / held, intensity)
        if not owners:
            self._add("overhead", None, device, active, intensity)
        self._add("baseline" if owners else "allocation", None, device, idle, intensity)

    def _add(self, kind: str, trial: int | None, component: str, joules: float, g_per_kwh: float):
        account = self.accounts.setdefault((kind, trial, component), Account())
        account.energy_j += joules
        account.emissions_g += joules / J_PER_KWH * g_per_kwh

    # -- what the engine tells it -----------------------------------------------------------

    def _at_boundary(self, always: bool = False) -> None:
        """Close the interval at a slot's boundary, unless one closed a moment ago: a burst of
        short trials would otherwise pay a full read each (what this misplaces is below 50 ms)."""
        if always or time.time() - self._at > _BOUNDARY_RESOLUTION_S:
            self.sample()

    def place(self, slot: int, gpus: dict[str, float]) -> None:
        """Slot `slot` now holds these GPU components (e.g. {"gpu:0": 0.5}): placement moved it."""
        with self._lock:
            self._at_boundary()
            self._slot(slot).gpus = dict(gpus)

    def _slot(self, slot: int) -> _Slot:
        """Slot `slot`, made if the pool has grown past it (an elastic cluster adds workers)."""
        while len(self._slots) <= slot:
            self._slots.append(_Slot(remote=not self.slots_here))
        return self._slots[slot]

    def _process(self, pid: int) -> psutil.Process:
        """One psutil handle per worker process: making one reads /proc, and workers persist."""
        process = self._processes.get(pid)
        if process is None:
            process = self._processes[pid] = psutil.Process(pid)
        return process

    def assign(
        self,
        slot: int,
        pid: int | None,
        trial: int | None,
        kind: str = "trial",
        *,
        metered_elsewhere: bool = False,
    ) -> None:
        """Slot `slot` now runs `trial` in process `pid` (None: the slot is empty, or `trial`
        runs in a process this node cannot see: a meter on its node books it when
        `metered_elsewhere`, and otherwise its energy is marked unmeasured).

        `kind` books its energy as something other than a trial: the test phase runs on a worker
        too, and its energy is neither a trial's nor idle.
        """
        with self._lock:
            s = self._slot(slot)
            # The test phase runs once and may be shorter than 50 ms: it always gets its own.
            self._at_boundary(always=kind != "trial" or s.kind != "trial")
            # "Nothing runs here now" (no pid, no trial) leaves the worker as it was: what it
            # used since the last sample still goes to the trial that just ended.
            if pid != s.pid and not (pid is None and trial is None):
                s.pid = pid
                s.process = self._process(pid) if pid is not None else None
                s.cpu_s = 0.0
                if s.process is not None:
                    s.cpu_s = tree_cpu_s(s.process)
            if (trial, kind) != (s.trial, s.kind):
                s.hand_over(time.time(), self._at)
            s.trial, s.kind = trial, kind
            if trial is not None:  # an empty slot's worker stays where it was
                s.remote = pid is None
                if s.remote and kind == "trial" and not metered_elsewhere:
                    self._add("trial", trial, UNMEASURED, 0.0, 0.0)

    def leave(self, slot: int) -> None:
        """Slot `slot`'s worker has left this node (lost, or started again on another)."""
        with self._lock:
            self._at_boundary()
            s = self._slot(slot)
            s.hand_over(time.time(), self._at)
            s.pid = s.trial = s.process = None
            s.cpu_s, s.remote = 0.0, True

    def booked(self, trial: int) -> tuple[float, float]:
        """The energy (J) and emissions (g) booked to `trial` so far, over every attempt and
        node, closing the interval now: a trial's measured cost at its report, for objectives
        and constraints on energy and carbon."""
        energy = emissions = 0.0
        with self._lock:
            self.sample()  # what it used since the last sample is booked now, not later
            # A trial's own accounts are the same in every view (only overhead is shared out).
            for group in (self.carried, self.accounts, self._pulled.accounts):
                for (kind, number, _), account in group.items():
                    if kind == "trial" and number == trial:
                        energy += account.energy_j
                        emissions += account.emissions_g
        return energy, emissions

    # -- windows ----------------------------------------------------------------------------

    def begin_window(self, key: str) -> None:
        with self._lock:
            self.sample()
            self._windows[key] = _Window(self._at, dict(self.total_j))

    def end_window(self, key: str) -> Measurement:
        with self._lock:
            self.sample()
            window = self._windows.pop(key)
            by_component = {
                c: self.total_j.get(c, 0.0) - window.energy_j.get(c, 0.0) for c in self.total_j
            }
            sources = sorted(set(self.source_of.values()))
            return Measurement(
                time_s=self._at - window.start,
                energy_j=sum(by_component.values()),
                source="+".join(sources),
                by_component=by_component,
            )

    # -- output -----------------------------------------------------------------------------

    def drain(self) -> tuple[list[dict[str, Any]], dict[AccountKey, Account]]:
        """The power samples taken since the last drain, and a copy of every account."""
        with self._lock:
            samples, self._samples = self._samples, []
            accounts = summed(self.accounts)
            self._last_flush = time.monotonic()
        return samples, accounts

    def flush(self, final: bool = False) -> None:
        if self.sink is None:
            return
        news: list[dict[str, Any]] = []  # other nodes' samples: each goes to the sink once
        if self.elsewhere is not None:  # outside the lock: a pull waits on other nodes
            try:
                pulled = self.elsewhere.pull(final, self.intensity)
                news, self._pulled = pulled.samples, replace(pulled, samples=[])
            except Exception as err:  # keep sampling this node with what was pulled before
                log.warning("could not read the other nodes' energy meters: %s", err)
        samples, accounts = self.drain()
        self.sink(samples + news, self._with_other_nodes(accounts))

    def close(self) -> None:
        """Stop sampling after a last sample, and hand everything to the sink."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.sample()
        self.flush(final=True)
        assert self.source is not None
        self.source.close()

    def describe(self) -> str:
        assert self.source is not None
        return self.source.describe()


def tree_cpu_s(process: psutil.Process) -> float:
    """CPU seconds of a worker and everything it started: its own, its ended children's (once
    reaped) and its live descendants' (a command trial's script and what that runs)."""
    times = process.cpu_times()
    total = own_cpu_s(process.pid, times.user + times.system)
    total += times.children_user + times.children_system
    try:
        children = live_children(process)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return total
    for child in children:
        try:
            total += tree_cpu_s(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # it ended between the listing and the reading: its parent counts it next
    return total


def own_cpu_s(pid: int, ticks_s: float) -> float:
    """The CPU seconds of process `pid` itself (every thread, ended ones too), to the
    nanosecond: read from its CPU-time clock, as `clock_getcpuclockid` would give it.
    /proc/<pid>/stat counts in clock ticks (10 ms), and a trial whose epochs take a few
    milliseconds then books no energy at one report and a whole tick's at the next, which made
    short trials' energy noise. `ticks_s` (user + system from stat) is the answer where the
    clock cannot be read (not Linux, or the process ended)."""
    if not _CPU_CLOCKS:
        return ticks_s
    try:
        return time.clock_gettime((~pid << 3) | 2)  # Linux's CPUCLOCK_SCHED clock of the process
    except OSError:
        return ticks_s


#: Whether other processes' CPU-time clocks can be read (Linux: the clock id of process P is
#: (~P << 3) | 2, the encoding `clock_getcpuclockid` returns).
_CPU_CLOCKS = sys.platform.startswith("linux") and hasattr(time, "clock_gettime")

#: Whether this kernel lists a thread's children in /proc/<pid>/task/<tid>/children (Linux 3.5+
#: with CONFIG_PROC_CHILDREN, as the common distributions build it).
_PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def live_children(process: psutil.Process) -> list[psutil.Process]:
    """The live children of `process`. psutil finds them by reading every process's stat file
    on the machine; the monitor asks for each worker at every sample and every report, which
    cost the driver a fifth of a core on a two-core machine with a few dozen processes (and the
    energy that goes with it). Where the kernel lists them, one small file per thread of
    `process` is read instead. NoSuchProcess when `process` has ended."""
    if not _PROC_CHILDREN:
        return process.children()
    task_dir = f"/proc/{process.pid}/task"
    try:
        threads = os.listdir(task_dir)
    except (FileNotFoundError, ProcessLookupError):
        raise psutil.NoSuchProcess(process.pid) from None
    except PermissionError:
        raise psutil.AccessDenied(process.pid) from None
    pids: list[int] = []
    for tid in threads:
        try:
            with open(f"{task_dir}/{tid}/children", "rb") as f:
                pids.extend(int(pid) for pid in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread ended after the listing
    children = []
    for pid in pids:
        try:
            children.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue  # it ended after the listing: its parent counts it once it is reaped
    return children
