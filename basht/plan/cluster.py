"""RubberBand's cluster manager: instances of one type, launched and released as a plan says.

Every instance is billed for its whole life, from the request to its release, by the provider's
rule (`basht.energy.billing`), as the simulator bills it. At a barrier the cluster releases the
instances launched last (so the ones that have run longest, past any minimum, keep running) and
requests new ones, which take real time to become ready.

An `InstanceProvider` is where instances come from. `LocalProvider` makes them on this machine:
an instance is a group of worker processes, one per GPU of the instance type (a trial given k
GPUs trains in one of them with k threads), started when the instance is launched and stopped
when it is released. It runs the plan's real trials at the plan's parallelism and bills them at
the instance type's price; what it cannot give is the instance type's speed. A cloud provider
would launch and terminate instances and join their workers instead.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from basht.energy.billing import billed_usd
from basht.energy.pricing import Price
from basht.errors import BashtError

#: The most worker processes the local provider starts per core of this machine.
LOCAL_WORKERS_PER_CORE = 4


@dataclass
class Instance:
    """One instance: the workers it holds, and when it was requested, ready and released."""

    number: int
    stage: int
    workers: tuple[int, ...]
    launched_at: float
    ready_at: float | None = None
    released_at: float | None = None

    def lifetime_s(self, now: float) -> float:
        return max(0.0, (self.released_at or now) - self.launched_at)


class InstanceProvider(Protocol):
    """Starts and stops instances of one type; `launch` returns when they are ready.

    A provider may also start instances without waiting: `begin(count)` returns the worker
    indexes each will hold, and `ready(workers)` says (without waiting) when one can take
    trials. The cluster then runs trials on the instances that are up while new ones start.
    """

    gpus: int

    def launch(self, count: int) -> list[tuple[int, ...]]:
        """Start `count` instances; the worker indexes of each."""
        ...

    def release(self, workers: Sequence[int]) -> None: ...


class Workers(Protocol):
    def add_workers(self, count: int) -> list[int]: ...

    def begin_workers(self, count: int) -> list[int]: ...

    def workers_ready(self, indexes: Sequence[int]) -> bool: ...

    def remove_workers(self, indexes: Sequence[int], timeout_s: float = ...) -> None: ...


def check_local_plan(plan: Sequence[int], gpus: int, max_workers: int | None = None) -> None:
    """Refuse a plan that would start more processes than this machine should hold."""
    max_workers = max_workers or LOCAL_WORKERS_PER_CORE * (os.cpu_count() or 1)
    most = max(plan)
    if most * gpus > max_workers:
        raise BashtError(
            f"plan: {most} instances x {gpus} GPUs would be {most * gpus} worker "
            f"processes; this machine runs at most {max_workers} (one per GPU, "
            f"{LOCAL_WORKERS_PER_CORE} per core): make the plan with --max-instances "
            f"{max(1, max_workers // gpus)}"
        )


class LocalProvider:
    """Instances as groups of `gpus` worker processes of one local executor."""

    def __init__(self, workers: Workers, gpus: int, max_workers: int | None = None):
        self.workers, self.gpus = workers, gpus
        self.max_workers = max_workers or LOCAL_WORKERS_PER_CORE * (os.cpu_count() or 1)
        self._starting: set[int] = set()  # workers begun and not ready yet

    def check(self, plan: Sequence[int]) -> None:
        check_local_plan(plan, self.gpus, self.max_workers)

    def launch(self, count: int) -> list[tuple[int, ...]]:
        return self._grouped(self.workers.add_workers(count * self.gpus))

    def begin(self, count: int) -> list[tuple[int, ...]]:
        started = self.workers.begin_workers(count * self.gpus)
        self._starting.update(started)
        return self._grouped(started)

    def ready(self, workers: Sequence[int]) -> bool:
        if not self.workers.workers_ready(workers):
            return False
        self._starting.difference_update(workers)
        return True

    def _grouped(self, started: list[int]) -> list[tuple[int, ...]]:
        """Worker indexes in instances of `gpus` each."""
        return [tuple(started[i : i + self.gpus]) for i in range(0, len(started), self.gpus)]

    def release(self, workers: Sequence[int]) -> None:
        """Stop an instance's workers. One still starting runs nothing and is stopped at once:
        waiting for it to come up would hold the barrier (and the bill) for its start-up."""
        if self._starting.intersection(workers):
            self._starting.difference_update(workers)
            self.workers.remove_workers(workers, timeout_s=0.0)
        else:
            self.workers.remove_workers(workers)


class Cluster:
    """The live instances, scaled to a count at each barrier; every instance ever launched is
    kept (with its release time) for the bill. `on_change` hears of each launch and release."""

    def __init__(
        self,
        provider: InstanceProvider,
        price: Price,
        on_change: Callable[[Instance, str], None] | None = None,
        clock: Callable[[], float] = time.time,
        data_usd_per_instance: float = 0.0,
    ):
        self.provider, self.price, self.on_change, self.clock = provider, price, on_change, clock
        self.data_usd_per_instance = data_usd_per_instance  # moving the data onto a new one
        self.live: list[Instance] = []
        self.starting: list[Instance] = []  # launched without waiting, not ready yet
        self.reserved: list[Instance] = []  # pre-provisioned for the next stage
        self.history: list[Instance] = []

    def scale_to(self, count: int, stage: int, wait: bool = True) -> None:
        """Release the newest instances beyond `count` (those still starting first), or launch
        more: wait until they are ready, or, with `wait` off and a provider that can `begin`,
        let them start while trials run on the live ones (`check_starting` brings them in).
        Instances reserved for this stage count as starting from here on."""
        self.starting.extend(self.reserved)
        self.reserved.clear()
        while len(self.live) + len(self.starting) > count:
            self._release(self.starting.pop() if self.starting else self.live.pop())
        have = len(self.live) + len(self.starting)
        if have >= count:
            return
        begin = None if wait else getattr(self.provider, "begin", None)
        new = self._launch(count - have, stage, begin)
        if callable(begin):
            self.starting.extend(new)
            return
        for instance in new:
            instance.ready_at = self.clock()
            self._tell(instance, "ready")
        self.live.extend(new)

    def reserve(self, count: int, stage: int) -> bool:
        """Pre-provision: start `count` instances for `stage` now, held out of the running stage
        until its barrier (`scale_to` takes them in). False if the provider cannot start
        instances without waiting; then they are launched at the barrier as usual."""
        begin = getattr(self.provider, "begin", None)
        if count < 1 or not callable(begin):
            return False
        self.reserved.extend(self._launch(count, stage, begin))
        return True

    def _launch(self, count: int, stage: int, begin: Callable[[int], Any] | None) -> list[Instance]:
        """Request `count` instances: launched and waited for, or begun (told "starting")."""
        launched_at = self.clock()
        new = [Instance(len(self.history) + i, stage, (), launched_at) for i in range(count)]
        self.history.extend(new)
        for instance in new:
            self._tell(instance, "launched")
        try:
            started = begin(len(new)) if callable(begin) else self.provider.launch(len(new))
        except BaseException:
            self._never_ready(new)
            raise
        for instance, workers in zip(new, started, strict=True):
            instance.workers = workers
            if callable(begin):
                self._tell(instance, "starting")  # its workers are known now
        return new

    def check_starting(self) -> None:
        """Bring in the starting instances that are ready now, without waiting for the rest."""
        for instance in list(self.starting):
            try:
                ready = self.provider.ready(instance.workers)  # type: ignore[attr-defined]
            except BaseException:
                self.starting.remove(instance)
                self._never_ready([instance])
                raise
            if ready:
                self.starting.remove(instance)
                instance.ready_at = self.clock()
                self._tell(instance, "ready")
                self.live.append(instance)

    def _never_ready(self, instances: Sequence[Instance]) -> None:
        """Instances that failed to start: billed up to now, their workers stopped."""
        for instance in instances:
            instance.released_at = self.clock()
            if instance.workers:
                with contextlib.suppress(Exception):
                    self.provider.release(instance.workers)
            self._tell(instance, "released")

    def release_all(self) -> None:
        while self.reserved:
            self._release(self.reserved.pop())
        while self.starting:
            self._release(self.starting.pop())
        while self.live:
            self._release(self.live.pop())

    def _release(self, instance: Instance) -> None:
        self.provider.release(instance.workers)
        instance.released_at = self.clock()
        self._tell(instance, "released")

    def _tell(self, instance: Instance, what: str) -> None:
        if self.on_change is not None:
            self.on_change(instance, what)

    def bill_usd(self) -> float:
        now = self.clock()
        lives = [i.lifetime_s(now) for i in self.history]
        return billed_usd(self.price, lives, self.data_usd_per_instance)
