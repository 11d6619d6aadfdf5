"""Offline profiling for RubberBand: time one trial's epochs at several widths, and how long an
instance takes to start, on this machine, and write them as a profile `basht plan` reads.

This machine stands in for the instance type the way `basht run --plan` emulates it: an
instance is a group of worker processes, one per GPU, and a trial given k GPUs trains in one of
them with k x `cpus_per_worker` threads. Start-up is the time to launch such an instance (spawn
its workers and set the workload up in them) and be ready. The numbers are this machine's; the
profile's `source` says so, and the price is the instance type's.
"""

from __future__ import annotations

import math
import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from basht.energy.node import open_node_sources
from basht.energy.pricing import Price
from basht.energy.sources import CombinedSource
from basht.engine.local import LocalExecutor
from basht.engine.messages import CONTINUE, PAUSE, TrialTask
from basht.errors import BashtError
from basht.experiment import Experiment
from basht.plan.cluster import LocalProvider
from basht.plan.profile import Profile, parse_instance
from basht.states import EventKind

T = TypeVar("T")

#: How long one profiled trial may take before the profile gives up on it.
TRIAL_TIMEOUT_S = 600.0
#: How long `--full` profiling reads the machine's power with the instance's workers idle.
IDLE_S = 2.0


@dataclass(frozen=True)
class Measured:
    """What profiling measured: per-epoch seconds at each GPU count, and start-up seconds."""

    epoch_s: dict[int, tuple[float, ...]]
    startup_s: tuple[float, ...]
    overhead_s: tuple[float, ...]
    config: dict[str, Any]
    full: bool = False  # timed with the instance full (a trial per place), not one trial alone
    # With `full`: this machine's watts with the workers idle and with the instance full, and
    # the source that measured them (rapl, nvml, or the estimate).
    power_w: tuple[float, float] | None = None
    power_source: str = ""


def measure(
    experiment: Experiment,
    gpus: Sequence[int],
    instance_gpus: int,
    *,
    epochs: int = 5,
    startups: int = 2,
    full: bool = False,
) -> Measured:
    """One trial (the configuration in the middle of the file's space) trained `epochs` epochs at
    each GPU count in `gpus`, and `startups` launches of an instance of `instance_gpus` worker
    processes. The first epoch warms caches and allocators, so with more than one it is not a
    sample; a trial's overhead is timed once the worker is warm.

    With `full`, each GPU count is timed with the instance full, as a stage runs its trials:
    instance_gpus // count trials at once, each a sample, so that what they share (cores, memory
    bandwidth, disk) slows them as it will in the run. The machine's power is read too, with the
    workers idle and while the instance is full: the profile's `power_w`."""
    if epochs < 1 or startups < 1:
        raise BashtError("profile: give at least one epoch and one start-up")
    threads_per_gpu = experiment.resources.cpus_per_worker
    _check_counts(gpus, instance_gpus, threads_per_gpu)
    space = experiment.search_space
    middle = space.from_units([0.5] * len(space))
    ref = experiment.workload_ref()
    local = LocalExecutor(0, threads_per_gpu)
    local.start()
    scratch = tempfile.TemporaryDirectory(prefix="basht-profile-")
    folder = Path(scratch.name)
    meter = None
    try:
        local.setup(ref)
        startup = tuple(_launch_time(local, instance_gpus) for _ in range(startups))
        # As a run reuses its workers: a first, untimed trial in each pays the imports and the
        # data read that a run pays once per worker, not once per trial.
        most = instance_gpus // min(gpus) if full else 1
        workers = local.add_workers(most)
        seed = experiment.seed
        ids = iter(range(1_000_000))
        warm = [TrialTask(next(ids), dict(middle), ref, seed, target_budget=1) for _ in workers]
        _train(local, list(zip(warm, workers, strict=True)), 1, folder)
        meter = open_node_sources(experiment.measure, experiment.resources, most) if full else None
        _, idle_w = _metered(meter, lambda: time.sleep(IDLE_S))

        def time_each_count() -> tuple[dict[int, tuple[float, ...]], list[float]]:
            samples, overheads = {}, []
            for count in sorted(set(gpus)):
                threads = count * threads_per_gpu
                together = workers[: instance_gpus // count if full else 1]
                tasks = [
                    TrialTask(next(ids), dict(middle), ref, seed, epochs, threads=threads)
                    for _ in together
                ]
                timed = _train(local, list(zip(tasks, together, strict=True)), epochs, folder)
                samples[count] = tuple(t for _, times in timed for t in (times[1:] or times))
                overheads.extend(overhead for overhead, _ in timed)
            return samples, overheads

        (samples, overheads), busy_w = _metered(meter, time_each_count)
    finally:
        if meter is not None:
            meter.close()
        local.shutdown()
        scratch.cleanup()
    power = None
    if idle_w is not None and busy_w is not None:
        power = (idle_w, max(idle_w, busy_w))  # busy below idle is noise
    source = meter.name if meter is not None else ""
    return Measured(samples, startup, tuple(overheads), dict(middle), full, power, source)


def _check_counts(gpus: Sequence[int], instance_gpus: int, threads_per_gpu: int) -> None:
    """Each GPU count fits the instance and, emulated, this machine's cores."""
    cores = os.cpu_count() or 1
    for count in gpus:
        if count < 1:
            raise BashtError(f"--gpus: expected GPU counts >= 1, got {count}")
        if count > instance_gpus:
            raise BashtError(
                f"--gpus: {count} GPUs per trial, but the instance has {instance_gpus}"
            )
        if count * threads_per_gpu > cores:
            raise BashtError(
                f"--gpus: {count} GPUs are emulated by {count * threads_per_gpu} cores here "
                f"(cpus_per_worker {threads_per_gpu}), and this machine has {cores}"
            )


def check_request(
    experiment: Experiment, instance: Any, gpus: Sequence[int], scaling: float | None = None
) -> Price:
    """The instance type of `basht profile`, with what it is asked to time checked before it
    times anything (minutes): GPU counts the instance and this machine hold, and `scaling`
    where one count cannot give the others."""
    price = parse_instance(instance)
    if price.gpus < 1:
        raise BashtError(f"--instance {instance}: a plan needs GPU instances")
    _check_counts(gpus, price.gpus, experiment.resources.cpus_per_worker)
    if scaling is not None and not (math.isfinite(scaling) and scaling > 0):
        raise BashtError(f"--scaling: expected b > 0 in t(k) = t(1)·k^-b, got {scaling:g}")
    needed = {1 << i for i in range(price.gpus.bit_length())}  # as Profile checks them
    if scaling is None and len(set(gpus)) < 2 and needed - set(gpus):
        raise BashtError(
            f"--gpus {gpus[0]}: one GPU count; time more (e.g. --gpus 1,2) or give --scaling "
            "(b in t(k) = t(1)·k^-b, 1 = perfect scaling)"
        )
    return price


def power_label(source: str) -> str:
    """What measured the profile's power: a counter's name, or the estimate, said so."""
    return "the estimate (no power counter here)" if source == "estimate" else source


def _metered(meter: CombinedSource | None, work: Callable[[], T]) -> tuple[T, float | None]:
    """`work()`'s result, and this machine's mean watts while it ran by `meter` (all its
    components together); None without a meter."""
    if meter is None:
        return work(), None
    before = meter.read()
    result = work()
    after = meter.read()
    joules = sum(after.energy_j.values()) - sum(before.energy_j.values())
    return result, joules / (after.at - before.at)


def _launch_time(local: LocalExecutor, gpus: int) -> float:
    """Seconds from asking for an instance to its workers being ready with the workload."""
    provider = LocalProvider(local, gpus)
    start = time.perf_counter()
    (instance,) = provider.launch(1)
    elapsed = time.perf_counter() - start
    provider.release(instance)
    return elapsed


def _train(
    local: LocalExecutor, tasks: Sequence[tuple[TrialTask, int]], epochs: int, folder: Path
) -> list[tuple[float, list[float]]]:
    """Trials run at once, each on its worker: for each, its overhead (its wall time from
    submission to its paused checkpoint, less its epochs: loading, checkpointing, the hand-offs,
    what SHA's trials pay at each rung), and each epoch's train + validate seconds (as a run's
    store keeps them)."""
    start = time.perf_counter()
    times: dict[int, list[float]] = {task.trial_id: [] for task, _ in tasks}
    ended: dict[int, float] = {}
    for task, worker in tasks:
        local.submit(task, worker=worker)
    deadline = time.monotonic() + TRIAL_TIMEOUT_S
    while len(ended) < len(tasks) and time.monotonic() < deadline:
        for event in local.poll(1.0):
            seen = times.get(event.trial_id)
            if seen is None:
                continue
            if event.kind == EventKind.FAILED:
                raise BashtError(f"profile: the trial failed: {event.error}")
            if event.kind == "report":
                seen.append(event.train_s + event.validate_s)
                if event.epoch < epochs:
                    local.command(event.trial_id, CONTINUE)
                else:
                    local.command(event.trial_id, PAUSE, str(folder / f"{event.trial_id}.ckpt"))
            elif event.kind == EventKind.PAUSED:
                ended[event.trial_id] = time.perf_counter() - start
    if len(ended) < len(tasks):
        raise BashtError(
            f"profile: the trial did not finish {epochs} epochs in {TRIAL_TIMEOUT_S} s"
        )
    return [
        (max(0.0, ended[task.trial_id] - sum(times[task.trial_id])), times[task.trial_id])
        for task, _ in tasks
    ]


def profile_dict(
    experiment: Experiment, instance: Any, measured: Measured, scaling: float | None = None
) -> dict[str, Any]:
    """The profile file's content (`basht.plan.profile.load_profile` reads it back); checked as
    a profile first (one GPU count needs `scaling`)."""
    price = parse_instance(instance)
    Profile(price, measured.epoch_s, measured.startup_s, scaling, overhead_s=measured.overhead_s)
    host = platform.node() or "this machine"
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return {
        "instance": instance,
        "epoch_s": {k: [round(s, 6) for s in v] for k, v in measured.epoch_s.items()},
        "startup_s": [round(s, 6) for s in measured.startup_s],
        "overhead_s": [round(s, 6) for s in measured.overhead_s],
        **({"scaling": scaling} if scaling is not None else {}),
        **(
            {
                "power_w": {
                    "idle": round(measured.power_w[0], 1),
                    "busy": round(measured.power_w[1], 1),
                }
            }
            if measured.power_w is not None
            else {}
        ),
        "source": (
            f"measured by basht profile on {host}, {when}: {experiment.workload.name}, "
            f"{'a full instance of trials' if measured.full else 'one trial'} "
            f"of {experiment.name} ({measured.config}); a GPU emulated by "
            f"{experiment.resources.cpus_per_worker} core(s) of this machine, an instance by "
            "its worker processes"
            + (
                f"; power_w: this whole machine, by {power_label(measured.power_source)}"
                if measured.power_w is not None
                else ""
            )
        ),
    }
