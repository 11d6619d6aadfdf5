"""Fluid's packing: how much of the machine each running trial gets, re-planned as trials come and go.

A trial is a moldable rectangle: its width w is the resource it holds (cores, or GPUs, fractional
below one when trials share a device), its height the time its remaining work takes at that width.
Minimising a group's makespan is moldable strip packing (NP-hard); Fluid's heuristic is
water-filling: widths in proportion to each trial's expected remaining time, clamped to the trial's
bounds, then every step of capacity still free goes to the trial that would otherwise finish last.
`fifo` is Ray Tune's default for comparison: a fixed width each, first come first served.

Departures from Fluid's public code (rubberband_fluid.md §2.3): the capacity is the machine's
(not the number of trials), the smallest width is the trial's own minimum, and the fill-up step
runs always, which keeps a group within 2× the area lower bound where the literal formula is not.
A trial never grows past the width where it stops getting faster (its measured speed-up), so
capacity is left free rather than spent on overhead.

On a cluster a trial never spans nodes (no data-parallel training across machines here): each node
is a strip of its own, packed as above, and what is decided across nodes is where each worker slot
lives (`spread_slots`) and which node a new trial goes to (`next_node`).
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


def linear(width: float) -> float:
    return width


@dataclass
class TrialLoad:
    """What the planner needs to know of a trial: remaining work and how it scales.

    `work_s` is the remaining time at width 1; `speedup(w)` how much faster it runs at width w
    (w itself for perfect scaling; the planner assumes it never decreases with w).
    """

    trial_id: int
    work_s: float
    min_width: float = 1.0
    max_width: float = math.inf
    speedup: Callable[[float], float] = linear

    def height(self, width: float) -> float:
        return self.work_s / self.speedup(width) if width > 0 else math.inf

    def gains(self, width: float, wider: float) -> bool:
        """Whether going from `width` to `wider` still makes it faster (by more than 0.1 %, so
        a flat speed-up curve does not soak up resource for rounding noise)."""
        return self.height(wider) < self.height(width) * (1 - 1e-3)

    def useful_width(self, capacity: float, step: float) -> float:
        """The widest this trial gets faster at: beyond it more resource only adds overhead."""
        top = min(self.max_width, capacity)
        best = self.min_width
        k = math.floor(self.min_width / step + 1e-9) + 1  # widths sit on the step grid
        while k * step <= top + 1e-9:
            if self.gains(best, k * step):
                best = k * step
            else:
                break
            k += 1
        return best


@dataclass(frozen=True)
class NodeResources:
    """A node's capacity: cores, GPUs, memory. Widths are in cores on CPU, in GPUs on GPU."""

    cpus: float
    gpus: float = 0.0
    memory_mb: float = 0.0

    def capacity(self, accelerator: str) -> float:
        return self.gpus if accelerator == "gpu" else self.cpus


def admit(trials: Sequence[TrialLoad], capacity: float) -> list[TrialLoad]:
    """The trials that fit at their minimum width, in the order given (first come first served;
    a later, smaller trial may take what an earlier, wider one cannot use: backfilling)."""
    admitted, used = [], 0.0
    for t in trials:
        if used + t.min_width <= capacity + 1e-9:
            admitted.append(t)
            used += t.min_width
    return admitted


def fluid_widths(
    trials: Sequence[TrialLoad], capacity: float, step: float = 1.0
) -> dict[int, float]:
    """Widths ∝ remaining time within each trial's bounds; leftover capacity to the longest."""
    running = admit(trials, capacity)
    if not running:
        return {}
    total = sum(t.work_s for t in running) or 1.0
    widths = {}
    useful = {t.trial_id: t.useful_width(capacity, step) for t in running}
    for t in running:
        share = t.work_s / total * capacity
        share = math.floor(share / step + 1e-9) * step
        widths[t.trial_id] = min(max(share, t.min_width), useful[t.trial_id])
    by_id = {t.trial_id: t for t in running}
    # Clamping up to a minimum can overshoot: take steps back from the trials that finish first.
    while sum(widths.values()) > capacity + 1e-9:
        shrinkable = [t for t in running if widths[t.trial_id] > t.min_width + 1e-9]
        if not shrinkable:
            break

        def smaller(t: TrialLoad) -> float:
            return max(t.min_width, widths[t.trial_id] - step)

        shortest = min(shrinkable, key=lambda t: t.height(smaller(t)))
        widths[shortest.trial_id] = smaller(shortest)
    # Water-filling: each free step goes to the trial that would finish last.
    free = capacity - sum(widths.values())
    heap = [(-by_id[i].height(w), i) for i, w in widths.items()]
    heapq.heapify(heap)
    while free >= step - 1e-9 and heap:
        _, i = heapq.heappop(heap)
        t = by_id[i]
        if widths[i] + step <= useful[i] + 1e-9:
            widths[i] += step
            free -= step
            heapq.heappush(heap, (-t.height(widths[i]), i))
    return widths


def fifo_widths(
    trials: Sequence[TrialLoad], capacity: float, width: float = 1.0
) -> dict[int, float]:
    """A fixed width each, first come first served, while capacity lasts."""
    out, used = {}, 0.0
    for t in trials:
        w = min(max(width, t.min_width), t.max_width)
        if used + w > capacity + 1e-9:
            break
        out[t.trial_id] = w
        used += w
    return out


def lower_bound(trials: Sequence[TrialLoad], capacity: float) -> float:
    """max(total minimal area / capacity, the longest trial at its widest): no schedule beats it.

    With speedup never more than linear the smallest area is at the minimum width and the
    smallest height at the maximum width (capped by the capacity).
    """
    area = sum(t.min_width * t.height(t.min_width) for t in trials)
    tallest = max(t.height(min(t.max_width, capacity)) for t in trials)
    return max(area / capacity, tallest)


@dataclass
class GroupResult:
    makespan_s: float
    busy_area: float  # width × time actually used
    replans: int
    widths_seen: list[dict[int, float]] = field(default_factory=list)


def simulate_group(
    trials: Sequence[TrialLoad],
    capacity: float,
    policy: str = "fluid",
    step: float = 1.0,
    fifo_width: float = 1.0,
) -> GroupResult:
    """Run one group to its end, re-planning whenever a trial finishes (continuous time)."""
    pending = [TrialLoad(t.trial_id, t.work_s, t.min_width, t.max_width, t.speedup) for t in trials]
    if policy == "fluid":
        pending.sort(key=lambda t: -t.work_s)  # longest first, as Fluid packs
    now = area = 0.0
    replans = 0
    seen = []
    while pending:
        widths = (
            fluid_widths(pending, capacity, step)
            if policy == "fluid"
            else fifo_widths(pending, capacity, fifo_width)
        )
        replans += 1
        seen.append(widths)
        running = [t for t in pending if t.trial_id in widths]
        finish = min(t.height(widths[t.trial_id]) for t in running)
        for t in running:
            w = widths[t.trial_id]
            t.work_s = max(0.0, t.work_s - finish * t.speedup(w))
            area += w * finish
        now += finish
        pending = [t for t in pending if t.work_s > 1e-9]
    return GroupResult(now, area, replans, seen)


# -- what is known of running trials -------------------------------------------------------------


@dataclass
class TrialProgress:
    """What Fluid knows of a running trial: its budget, its progress, and how long its epochs took
    at each width it ran at (the seconds of the latest epoch at that width)."""

    target: int | None
    epoch: int
    width: float = 1.0
    epoch_s: dict[float, float] = field(default_factory=dict)

    def epochs_left(self) -> int:
        return max(1, (self.target or self.epoch + 1) - self.epoch)

    def one_wide_s(self, speedup: Callable[[float], float]) -> float | None:
        """An epoch's time at width 1: measured, or inferred from another width's."""
        if 1 in self.epoch_s:
            return self.epoch_s[1]
        if self.epoch_s:
            width, seconds = next(iter(self.epoch_s.items()))
            return seconds * speedup(width)
        return None


class Speedups:
    """Speed-ups over width 1 per width, measured on trials that ran at both: linear until
    measured, then the median of what was measured (so one noisy epoch does not decide)."""

    def __init__(self) -> None:
        self._seen: dict[float, list[float]] = {}

    def observe(self, progress: TrialProgress) -> None:
        """Note the speed-up of `progress`'s current width, if it also ran at width 1."""
        one, here = progress.epoch_s.get(1), progress.epoch_s.get(progress.width)
        if one and here and progress.width != 1:
            self._seen.setdefault(progress.width, []).append(one / here)

    def __call__(self, width: float) -> float:
        seen = self._seen.get(width)
        if width == 1 or not seen:
            return float(width)
        return statistics.median_high(seen)  # as the local pool takes it


def loads_of(
    progress: Mapping[int, TrialProgress],
    speedup: Callable[[float], float],
    min_width: float = 1.0,
    max_width: float = math.inf,
    probe: bool = True,
) -> list[TrialLoad]:
    """The planner's view of running trials: remaining epochs × their epoch time at width 1 (the
    mean of the others' until a trial has run an epoch; 1 s when none has).

    A trial that has not yet run an epoch at width 1 is held to width 1 (its minimum, if more)
    until it has: that epoch is the baseline its speed-ups are measured against. Without it a
    trial that starts alone on a node, widened at once, never shows that widening slows it
    (small models often run slower on more threads), and the plan stays on the optimistic
    linear guess. `probe=False` skips that (GPU trials, which change width only by moving to
    another actor from a checkpoint)."""
    measured = [p.one_wide_s(speedup) for p in progress.values()]
    known = [m for m in measured if m is not None]
    default_s = sum(known) / len(known) if known else 1.0
    first = max(min_width, 1.0)
    return [
        TrialLoad(
            trial_id,
            p.epochs_left() * (seconds if seconds is not None else default_s),
            min_width,
            max_width if not probe or 1 in p.epoch_s else min(max_width, first),
            speedup,
        )
        for (trial_id, p), seconds in zip(progress.items(), measured, strict=True)
    ]


# -- several nodes --------------------------------------------------------------------------------


def next_node(
    counts: Mapping[str, int], room: Mapping[str, int], capacity: Mapping[str, float]
) -> str | None:
    """The node where one more slot (or trial) gets the most capacity: the largest capacity per
    slot once it is there, among nodes with room left (the first such node on a tie); None if
    every node is full."""
    best, best_share = None, -math.inf
    for node, cap in capacity.items():
        here = counts.get(node, 0)
        if here < room.get(node, 0) and cap / (here + 1) > best_share + 1e-12:
            best, best_share = node, cap / (here + 1)
    return best


def spread_slots(
    slots: int, room: Mapping[str, int], capacity: Mapping[str, float]
) -> dict[str, int]:
    """How many of `slots` worker slots each node holds: one at a time to `next_node` (the
    D'Hondt rule), so a slot never waits on a crowded node while another has cores to spare.
    Slots past every node's room are left out."""
    counts = {node: 0 for node in capacity}
    for _ in range(slots):
        node = next_node(counts, room, capacity)
        if node is None:
            break
        counts[node] += 1
    return counts


def node_widths(
    trials: Mapping[str, Sequence[TrialLoad]],
    capacity: Mapping[str, float],
    plan: Callable[[Sequence[TrialLoad], float], dict[int, float]] = fluid_widths,
) -> dict[int, float]:
    """Widths for the trials of every node, each node packed on its own capacity by `plan`
    (`fluid_widths`, or GPU shares that always pack): a trial's width never spans nodes."""
    widths: dict[int, float] = {}
    for node, here in trials.items():
        if here:
            widths.update(plan(here, capacity.get(node, 0.0)))
    return widths
