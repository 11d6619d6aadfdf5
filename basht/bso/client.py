"""The training-script side: ask the server for a batch size, report every epoch, stop when told.

Same shape and call order as Zeus's `BatchSizeOptimizer` (get_batch_size, on_train_begin,
on_evaluate, training_finished, a train-fail error), but energy comes from Basht's own
`EnergyMonitor`, so it also works on a machine without a GPU (the energy is then labelled
`estimate`, or `rapl` where RAPL counters are readable).

    bso = BatchSizeOptimizer("http://127.0.0.1:8000", JobSpec(job_id="mnist-1", ...))
    batch_size = bso.get_batch_size()
    bso.on_train_begin()
    for epoch in range(max_epochs):
        train_one_epoch(batch_size)   # calling bso.on_step_begin() before each step is optional
        bso.on_evaluate(validate())   # raises TrainFailError when this run is given up
        if bso.training_finished:
            break
    bso.end()

A job registered with `optimize_power_limit=True` also gets a GPU power limit per batch size: the
first run of a batch size profiles the limits just in time (during its first steps when the script
calls `on_step_begin`, else one limit per epoch), and every later run of it trains at the limit of
least cost. Setting limits needs root; see `power_limit` for what happens without.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from typing import Any, Protocol

from basht.bso.errors import BSOError, BSOOrderError, TrainFailError
from basht.bso.hardware import Hardware, detect
from basht.bso.http import BSOClient
from basht.bso.jit import JitProfiler
from basht.bso.power import PowerLimitMode, PowerLimits, open_power_limits
from basht.bso.spec import (
    Assignment,
    CreatedJob,
    JobSpec,
    JobSpecFromClient,
    PowerMeasurement,
    PowerProfile,
    TrainingResult,
    TrialId,
)

log = logging.getLogger(__name__)

WINDOW = "basht-bso"


class Measurement(Protocol):
    time_s: float
    energy_j: float
    source: str
    by_component: dict[str, float]


class Monitor(Protocol):
    """What the client needs of an energy monitor (`basht.energy.EnergyMonitor` has it)."""

    def begin_window(self, key: str) -> None: ...

    def end_window(self, key: str) -> Measurement: ...


class BatchSizeOptimizer:
    """One run of a recurring job, as a client of a BSO server.

    Registering happens in the constructor (the same spec again is fine; a changed spec under the
    same `job_id` is refused). Pass `max_power_w`, `number_of_gpus` and `gpu_model` to override
    what is detected (see `basht.bso.hardware`). `monitor` defaults to a Basht `EnergyMonitor`
    sampling every 0.1 s (NVML on GPU machines), which this object then owns and closes.
    With GPUs only their energy is reported, as Zeus does; without, the whole node's.

    `power_limit` matters only for a job that optimizes the power limit: "auto" sets limits
    through NVML where this machine allows it, and otherwise logs why not and trains at the
    current limit; "nvml" raises a `PowerLimitError` instead; "off" never touches them; or pass
    a `PowerLimits` of your own. Limits found at the start are put back at `end()`.
    `warmup_steps` and `profile_steps` are Zeus's per-limit profile lengths.
    """

    def __init__(
        self,
        server_url: str,
        job: JobSpec,
        monitor: Monitor | None = None,
        rank: int = 0,
        token: str | None = None,
        max_power_w: float | None = None,
        number_of_gpus: int | None = None,
        gpu_model: str | None = None,
        timeout_s: float = 10.0,
        power_limit: PowerLimitMode | PowerLimits = "auto",
        warmup_steps: int = 10,
        profile_steps: int = 40,
    ) -> None:
        if isinstance(power_limit, str) and power_limit not in ("auto", "nvml", "off"):
            raise BSOError(f"power_limit {power_limit!r}: expected auto, nvml, off or PowerLimits")
        self.rank = rank
        found = detect()
        self.hardware = Hardware(
            max_power_w if max_power_w is not None else found.max_power_w,
            number_of_gpus if number_of_gpus is not None else found.number_of_gpus,
            gpu_model if gpu_model is not None else found.gpu_model,
            found.max_power_source if max_power_w is None else "given",
            found.has_gpu,
        )
        self._http = BSOClient(server_url, token=token, timeout_s=timeout_s)
        spec = JobSpecFromClient.model_validate(
            {
                **job.model_dump(),
                "max_power": self.hardware.max_power_w,
                "number_of_gpus": self.hardware.number_of_gpus,
                "gpu_model": self.hardware.gpu_model,
            }
        )
        self.job: CreatedJob
        self.power_limits: PowerLimits | None = None
        self._own_limits = isinstance(power_limit, str)
        try:
            self.job, created = self._http.register(spec)
            if self.job.optimize_power_limit:
                self.power_limits = (
                    open_power_limits(power_limit) if isinstance(power_limit, str) else power_limit
                )
        except BaseException:
            self._http.close()
            raise
        log.info(
            "job %s %s (max power %.0f W, %s)",
            self.job.job_id,
            "registered" if created else "already registered",
            self.hardware.max_power_w,
            self.hardware.max_power_source,
        )
        self._own_monitor = monitor is None
        self.monitor: Monitor = monitor if monitor is not None else _default_monitor(found)
        self.power_limit_w: float | None = None  # the limit this run trains at, once known
        self._profile_steps = (warmup_steps, profile_steps)
        self._profiler: JitProfiler | None = None
        self.trial: TrialId | None = None
        self.training_finished = False
        self.converged: bool | None = None
        self.epoch = 0
        self.time_s = 0.0
        self.energy_j = 0.0
        self.energy_source: str | None = None
        self._window_open = False
        self._ended = False
        self._on_sigterm = False

    # -- the Zeus call order ----------------------------------------------------------------

    @property
    def current_batch_size(self) -> int:
        return self.trial.batch_size if self.trial else 0

    @property
    def trial_number(self) -> int:
        return self.trial.trial_number if self.trial else 0

    def get_batch_size(self) -> int:
        """The batch size for this run (asked once; later calls return the same)."""
        if self.rank != 0:
            raise BSOOrderError(
                "only rank 0 asks for a batch size; give the other ranks rank 0's answer "
                "with set_trial(batch_size, trial_number)"
            )
        if self.trial is None:
            trial = self._http.next_trial(self.job.job_id)
            if trial.batch_size not in self.job.batch_sizes:
                raise BSOError(f"the BSO server returned a batch size not in the job: {trial}")
            self._start(trial.trial_id())
            log.info("batch size %d (trial %d)", trial.batch_size, trial.trial_number)
            self._apply_power_limit(trial)
        return self.trial.batch_size  # type: ignore[union-attr]

    def set_trial(
        self, batch_size: int, trial_number: int, power_limit_w: float | None = None
    ) -> None:
        """For data-parallel ranks other than 0: adopt the trial rank 0 was given (and, on
        another node, its power limit `power_limit_w` once rank 0 knows it)."""
        self._start(
            TrialId(job_id=self.job.job_id, batch_size=batch_size, trial_number=trial_number)
        )
        if power_limit_w is not None and self.power_limits is not None:
            self.power_limits.set_w(power_limit_w)
            self.power_limit_w = power_limit_w

    def on_step_begin(self) -> None:
        """Optional, before each training step: lets a power-limit profile take a few dozen
        steps per limit (Zeus's way) instead of one epoch per limit."""
        if self._profiler is not None:
            self._profiler.on_step_begin()
            if self._profiler.done:
                self._send_profile()

    def on_train_begin(self) -> None:
        """Start measuring time and energy."""
        if self.trial is None:
            raise BSOOrderError("call get_batch_size before on_train_begin")
        self.training_finished = False
        self.monitor.begin_window(WINDOW)
        self._window_open = True

    def on_evaluate(self, metric: float) -> None:
        """Report the epoch's validation metric with the time and energy so far.

        Sets `training_finished` when the server says stop. Raises `TrainFailError` when the run
        is given up (early-stopped on cost, or out of epochs): relaunch the job and the next run
        gets another batch size. Each report also keeps the trial alive: after longer than the
        server's trial timeout without one, the server abandons the trial and this raises a
        `BSOServerError` with status 409.
        """
        if self.trial is None:
            raise BSOOrderError("call get_batch_size before on_evaluate")
        if self.training_finished:
            return
        if not self._window_open:
            raise BSOOrderError("call on_train_begin before on_evaluate")
        measurement = self.monitor.end_window(WINDOW)
        self._window_open = False
        self.epoch += 1
        self.time_s += measurement.time_s
        joules, self.energy_source = self._energy_of(measurement)
        self.energy_j += joules
        if self._profiler is not None:
            self._profiler.on_epoch_end(measurement.time_s, joules)
            if self._profiler.done:
                self._send_profile()
        try:
            answer = self._http.report(
                TrainingResult(
                    **self.trial.model_dump(),
                    time=self.time_s,
                    energy=self.energy_j,
                    metric=metric,
                    current_epoch=self.epoch,
                )
            )
        except BaseException:
            # Not reported (say the server is restarting): keep measuring and uncount the epoch,
            # so calling on_evaluate again resends it with the time and energy spent meanwhile.
            self.epoch -= 1
            self.monitor.begin_window(WINDOW)
            self._window_open = True
            raise
        if not answer.stop_train:
            self.monitor.begin_window(WINDOW)
            self._window_open = True
            return
        self.training_finished = True
        self.converged = answer.converged
        log.info(
            "trial %d finished: %s (%.0f J %s, %.1f s)",
            self.trial_number,
            answer.message,
            self.energy_j,
            self.energy_source,
            self.time_s,
        )
        if not answer.converged:
            raise TrainFailError(
                f"{answer.message}. Relaunch the job: the next run gets another batch size."
            )

    def end(self) -> None:
        """Tell the server this run is over (a run without a final result becomes Failed).

        Called at interpreter exit too, like Zeus's client, and on SIGTERM where the script has
        no handler of its own (the script then dies of the signal as before); calling it twice is
        harmless.
        """
        if self._ended:
            return
        self._ended = True
        atexit.unregister(self._end_at_exit)
        if (
            self._on_sigterm
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) == self._end_on_sigterm
        ):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # (the handler does nothing once ended)
        self._on_sigterm = False
        try:
            if self._profiler is not None:
                self._profiler.close()
                self._profiler = None
            if self._window_open:
                self.monitor.end_window(WINDOW)
                self._window_open = False
            if self.trial is not None:
                self._http.end_trial(self.trial)
        finally:
            if self.power_limits is not None and self._own_limits:
                self.power_limits.restore()
            if self._own_monitor:
                close = getattr(self.monitor, "close", None)
                if close is not None:
                    close()
            self._http.close()

    def _end_at_exit(self) -> None:
        """`end` at interpreter exit, where an error would print a traceback after the script's
        own output: a server that cannot be reached then is one logged line."""
        try:
            self.end()
        except BSOError as err:
            log.warning(
                "could not end trial %d of job %s: %s", self.trial_number, self.job.job_id, err
            )

    def _end_on_sigterm(self, signum: int, frame: object) -> None:
        """SIGTERM (a scheduler's stop, `kill`) runs no exit hook: end the trial first, then die
        of the signal as the script would have, so the server need not wait for the timeout."""
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._end_at_exit()
        os.kill(os.getpid(), signal.SIGTERM)

    def __enter__(self) -> BatchSizeOptimizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    # -- internals --------------------------------------------------------------------------

    def _start(self, trial: TrialId) -> None:
        self.trial = trial
        self.epoch = 0
        self.time_s = 0.0
        self.energy_j = 0.0
        atexit.register(self._end_at_exit)
        # Only where SIGTERM would kill the script outright: a handler of the script's own stays.
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        ):
            signal.signal(signal.SIGTERM, self._end_on_sigterm)
            self._on_sigterm = True

    def _apply_power_limit(self, trial: Assignment) -> None:
        """Train at the batch size's chosen limit, or start profiling the limits for it."""
        if not self.job.optimize_power_limit:
            return
        if self.power_limits is None:
            log.info("power limit left as it is: it cannot be set on this machine")
            return
        if trial.power_limit is not None:
            self.power_limits.set_w(trial.power_limit)
            self.power_limit_w = trial.power_limit
        elif trial.profile_power_limits:
            warmup, profile = self._profile_steps
            self._profiler = JitProfiler(
                self.power_limits,
                self.monitor,
                lambda m: self._energy_of(m)[0],
                self.power_limits.candidates_w(),
                warmup_steps=warmup,
                profile_steps=profile,
            )

    def _send_profile(self) -> None:
        """The profile is complete: the server picks the limit, and the run goes on at it."""
        assert self._profiler is not None and self.trial is not None
        measurements = [
            PowerMeasurement(power_limit=m.power_limit_w, time=m.time_s, energy=m.energy_j)
            for m in self._profiler.measurements
        ]
        self._profiler = None
        choice = self._http.report_power_profile(
            PowerProfile(**self.trial.model_dump(), measurements=measurements)
        )
        assert self.power_limits is not None
        self.power_limits.set_w(choice.power_limit)
        self.power_limit_w = choice.power_limit
        log.info("batch size %d: power limit %g W", choice.batch_size, choice.power_limit)

    def _energy_of(self, measurement: Measurement) -> tuple[float, str]:
        """The GPUs' energy when GPUs are measured (what Zeus reports), else the whole node's,
        with the source of what was counted: on a GPU machine that is NVML alone, not the CPU
        estimate beside it."""
        gpus = {c: j for c, j in measurement.by_component.items() if c.startswith("gpu")}
        if not gpus:
            return float(measurement.energy_j), measurement.source
        source_of = getattr(self.monitor, "source_of", {})
        sources = {source_of.get(c, measurement.source) for c in gpus}
        return float(sum(gpus.values())), "+".join(sorted(sources))


def _default_monitor(hardware: Hardware) -> Any:
    from basht.energy import EnergyMonitor, open_sources

    accelerator = "gpu" if hardware.has_gpu else "cpu"
    return EnergyMonitor(source=open_sources(accelerator=accelerator), sample_interval_s=0.1)
