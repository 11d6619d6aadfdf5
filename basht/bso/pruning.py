"""The pruning rounds that come before the bandit: which batch size to probe next, if any.

Each round probes downward from the round's default batch size until the first failure, then
upward until the first failure; the sizes that reached the target survive, and the next round
starts from the cheapest of them. After `num_pruning_rounds` rounds the survivors become the
bandit's arms. This is Zeus's `PruningExploreManager.next_batch_size`, as a pure function of the
job's explorations so far, with two fixes (see `next_step`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Probe:
    """One non-failed exploration trial of a batch size, in trial-number order.

    Its index among the batch size's probes is the pruning round it belongs to. `cost` is the
    zeus cost of its final result (None while it is still running).
    """

    dispatched: bool
    converged: bool | None
    cost: float | None


@dataclass(frozen=True)
class Explore:
    """Probe this batch size now (a new Exploration trial)."""

    batch_size: int


@dataclass(frozen=True)
class Wait:
    """A probe is still running: hand out the cheapest known batch size (a Concurrent trial)."""


@dataclass(frozen=True)
class Done:
    """Pruning is over: build the bandit over `arms` (ascending). `note` says why, if unusual."""

    arms: list[int]
    note: str | None = None


def next_step(
    batch_sizes: Sequence[int],
    default_batch_size: int,
    num_rounds: int,
    probes: Mapping[int, Sequence[Probe]],
) -> Explore | Wait | Done:
    """What the pruning stage does on the next GET /jobs/batch_size.

    Same decisions as Zeus for every job Zeus can finish. Two fixes, where Zeus answers 500:

    * `num_rounds = 0` skips pruning: every batch size becomes an arm (Zeus: a KeyError 500).
    * A round in which no batch size reached the target ends pruning early instead of leaving the
      job stuck on a 500 for ever. The arms are the previous round's survivors, or, if no round
      ever had one, every batch size (unprobed ones start cold and are explored first).
    """
    sizes = sorted(batch_sizes)
    if num_rounds == 0:
        return Done(sizes, "num_pruning_rounds is 0: every batch size is an arm")
    default = default_batch_size
    previous: list[int] | None = None
    for round_index in range(num_rounds):
        converged: list[int] = []
        best_cost = float("inf")
        best_size = 0
        idx = sizes.index(default)
        down = sorted(sizes[: idx + 1], reverse=True)
        up = sorted(sizes[idx + 1 :])
        for direction in (down, up):
            for size in direction:
                history = probes.get(size, ())
                if len(history) <= round_index:
                    return Explore(size)
                probe = history[round_index]
                if probe.dispatched:
                    return Wait()
                if not probe.converged:
                    break
                converged.append(size)
                assert probe.cost is not None, "a finished probe has a cost"
                if probe.cost < best_cost:
                    best_cost = probe.cost
                    best_size = size
        if not converged:
            if previous is not None:
                return Done(
                    sorted(previous),
                    f"no batch size reached the target in pruning round {round_index + 1}: "
                    "the previous round's survivors are the arms",
                )
            return Done(
                sorted(batch_sizes),
                "no batch size reached the target in the first pruning round: "
                "every batch size is an arm",
            )
        default = best_size
        sizes = sorted(converged)
        previous = converged
    return Done(sorted(sizes))
