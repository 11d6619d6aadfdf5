"""RubberBand's cluster manager: instances of one type, launched and released as a plan says.

Every instance is billed for its whole life, from the request to its release, by the provider's
rule (pricing.job_cost_usd), as the simulator bills it. At a barrier the cluster releases the
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

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from basht.energy.pricing import BillingRule, Price, job_cost_usd
from basht.errors import BashtError

if TYPE_CHECKING:
    from basht.experiment import PlanPriceSpec

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
    """Starts and stops instances of one type; `launch` returns when they are ready."""

    gpus: int

    def launch(self, count: int) -> list[tuple[int, ...]]:
        """Start `count` instances; the worker indexes of each."""
        ...

    def release(self, workers: Sequence[int]) -> None: ...


class Workers(Protocol):
    def add_workers(self, count: int) -> list[int]: ...

    def remove_workers(self, indexes: Sequence[int]) -> None: ...


class LocalProvider:
    """Instances as groups of `gpus` worker processes of one local executor."""

    def __init__(self, workers: Workers, gpus: int, max_workers: int | None = None):
        self.workers, self.gpus = workers, gpus
        self.max_workers = max_workers or LOCAL_WORKERS_PER_CORE * (os.cpu_count() or 1)

    def check(self, plan: Sequence[int]) -> None:
        """Refuse a plan that would start more processes than this machine should hold."""
        most = max(plan)
        if most * self.gpus > self.max_workers:
            raise BashtError(
                f"plan: {most} instances x {self.gpus} GPUs would be {most * self.gpus} worker "
                f"processes; this machine runs at most {self.max_workers} (one per GPU, "
                f"{LOCAL_WORKERS_PER_CORE} per core): make the plan with --max-instances "
                f"{max(1, self.max_workers // self.gpus)}"
            )

    def launch(self, count: int) -> list[tuple[int, ...]]:
        started = self.workers.add_workers(count * self.gpus)
        return [tuple(started[i * self.gpus : (i + 1) * self.gpus]) for i in range(count)]

    def release(self, workers: Sequence[int]) -> None:
        self.workers.remove_workers(workers)


def plan_price(spec: PlanPriceSpec) -> Price:
    """The plan's instance type as pricing's Price: what the cluster is billed at."""
    return Price(
        usd_per_hour=spec.usd_per_hour,
        vcpus=spec.vcpus,
        gpus=spec.gpus,
        rule=BillingRule(spec.increment_s, spec.minimum_s, spec.rule),
        provider=spec.provider,
        instance=spec.instance,
        source="the plan's instance type",
    )


def billed_usd(price: Price, lifetimes_s: Sequence[float]) -> float:
    """What the provider bills for instances that lived `lifetimes_s`, each by its rule."""
    return sum(job_cost_usd(price, t) for t in lifetimes_s)


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
        self.history: list[Instance] = []

    def scale_to(self, count: int, stage: int) -> None:
        """Release the newest instances beyond `count`, or launch more and wait until ready."""
        while len(self.live) > count:
            self._release(self.live.pop())
        if len(self.live) < count:
            launched_at = self.clock()
            new = [
                Instance(len(self.history) + i, stage, (), launched_at)
                for i in range(count - len(self.live))
            ]
            self.history.extend(new)
            for instance in new:
                self._tell(instance, "launched")
            try:
                started = self.provider.launch(len(new))
            except BaseException:
                for instance in new:  # never ready: billed up to now
                    instance.released_at = self.clock()
                    self._tell(instance, "released")
                raise
            for instance, workers in zip(new, started, strict=True):
                instance.workers, instance.ready_at = workers, self.clock()
                self._tell(instance, "ready")
            self.live.extend(new)

    def release_all(self) -> None:
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
        return billed_usd(self.price, lives) + self.data_usd_per_instance * len(self.history)
