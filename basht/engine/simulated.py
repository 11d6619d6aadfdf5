"""A simulated executor: virtual workers on a virtual clock, driven by learning-curve models."""

from __future__ import annotations

import hashlib
import math
import operator
import struct
from collections.abc import Callable
from heapq import heappop, heappush
from math import isfinite
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np

from basht.engine.base import Executor
from basht.engine.messages import CONTINUE, TrialEvent, TrialTask
from basht.engine.packing import TrialLoad, fifo_widths, fluid_widths
from basht.errors import BashtError
from basht.states import Command, EventKind

_MASK64 = (1 << 64) - 1
_LOADED, _REPORT = EventKind.LOADED, EventKind.REPORT  # bound once: a simulation makes 1e6
try:  # the C function behind NormalDist().inv_cdf: the same quantile without a method call
    from statistics import _normal_dist_inv_cdf as _normal_quantile
except ImportError:  # pragma: no cover - other Pythons

    def _normal_quantile(p: float, mu: float, sigma: float) -> float:
        return NormalDist(mu, sigma).inv_cdf(p)


_SIX_WORDS = struct.Struct("<6Q")


class LearningCurve(Protocol):
    """A trial's course: `(config, epoch)` -> (value after `epoch` epochs, that epoch's seconds).

    `epoch` counts from 1. A curve must be a pure function of its arguments, so a simulated trial
    that is paused and resumed sees the same values as one that ran straight through.
    """

    def __call__(self, config: dict[str, Any], epoch: int) -> tuple[float, float]: ...


class FunctionCurve:
    """Any user function `(config, epoch) -> (value, seconds)` as a learning curve."""

    def __init__(self, fn: Callable[[dict[str, Any], int], tuple[float, float]]):
        self.fn = fn

    def __call__(self, config: dict[str, Any], epoch: int) -> tuple[float, float]:
        value, seconds = self.fn(config, epoch)
        return float(value), float(seconds)


def _splitmix64(x: int) -> int:
    """A cheap, well-mixed 64-bit integer hash (per-epoch noise without a generator's state)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


_LOG_HALF = math.log(0.5)
_TWO_52 = 2.0**52


class ConfigDigest:
    """48 bytes that identify (seed, config), the same on every run and in every process.

    The values are packed as doubles in name order, so no float is printed; configurations with
    other values (strings, lists) fall back to repr. The packing is made once per set of names.
    """

    def __init__(self, seed: int = 0):
        self.seed = seed
        # names in the config's order -> (prefix, a getter of the values in name order, packer)
        self._layouts: dict[tuple[str, ...], tuple[bytes, Callable[..., Any], struct.Struct]] = {}

    def __call__(self, config: dict[str, Any]) -> bytes:
        names = tuple(config)
        layout = self._layouts.get(names)
        if layout is None:
            layout = self._layouts[names] = self._layout(names)
        prefix, values, packer = layout
        try:
            packed = packer.pack(*values(config))
        except struct.error:
            packed = repr(sorted(config.items())).encode()
        return hashlib.blake2b(prefix + packed, digest_size=48).digest()

    def _layout(self, names: tuple[str, ...]) -> tuple[bytes, Callable[..., Any], struct.Struct]:
        ordered = tuple(sorted(names))
        prefix = b"%d|%s|" % (self.seed, "|".join(ordered).encode())
        values = operator.itemgetter(*ordered)
        if len(ordered) == 1:  # itemgetter of one name gives the value, not a tuple
            values = lambda config, _get=values: (_get(config),)  # noqa: E731
        return prefix, values, struct.Struct(f"<{len(names)}d")


class SyntheticCurve:
    """A seeded family of realistic learning curves, in the spirit of the ASHA paper's surrogates.

    Each configuration is hashed (its values in name order with the seed, so the result depends
    neither on call order nor on Python's hash seed) to its own parameters:

    - the final accuracy `a_inf`: skewed low, so most configurations are mediocre and few are good,
      and `diverge_p` of them never learn (they stay at `chance`, like a too-large learning rate);
    - the accuracy after the first epoch `a0` (a random fraction of the way to `a_inf`) and a
      rate `k` (lognormal, lower for better configurations): curves cross, and some slow starters
      end best, so stopping early is not trivially right;
    - the seconds per epoch: lognormal around `epoch_s`, mildly correlated with quality (bigger
      models tend to be better and slower), with a few percent of per-epoch jitter.

    value(epoch) = a_inf - (a_inf - a0) * epoch ** -k, plus deterministic noise of sd `noise`,
    clipped to [0, 1]. With `mode="min"` the curve reports the error `1 - value` instead. The
    landscape has no structure across neighbouring configurations: it suits random search and
    early-stopping methods (SHA, ASHA, Hyperband), not model-based samplers.
    """

    _RATE_QUALITY_CORR = -0.4  # good configurations tend to learn slower (small learning rates)
    _TIME_QUALITY_CORR = 0.3  # ...and to take longer per epoch (bigger models)

    def __init__(
        self,
        seed: int = 0,
        mode: str = "max",
        *,
        chance: float = 0.1,
        best: float = 0.95,
        noise: float = 0.005,
        epoch_s: float = 1.0,
        time_sigma: float = 0.5,
        diverge_p: float = 0.05,
    ):
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', not {mode!r}")
        if not 0.0 <= chance < best <= 1.0:
            raise ValueError("need 0 <= chance < best <= 1")
        self.seed, self.mode = seed, mode
        self.chance, self.best, self.noise = chance, best, noise
        self.epoch_s, self.time_sigma, self.diverge_p = epoch_s, time_sigma, diverge_p
        self._noise2, self._minimize = noise * 2.0, mode == "min"
        # The weights of the independent normal in the rate's and in the time's z, made once.
        rho_rate, rho_time = self._RATE_QUALITY_CORR, self._TIME_QUALITY_CORR
        self._rate_residual = math.sqrt(1 - rho_rate * rho_rate)
        self._time_residual = math.sqrt(1.0 - rho_time * rho_time)
        # id(config) -> `_entry(config)`; the stored reference keeps the id from being reused.
        self._cache: dict[int, tuple[Any, ...]] = {}
        self._digest = ConfigDigest(seed)

    def params(self, config: dict[str, Any]) -> tuple[float, float, float, float, int]:
        """(a_inf, a0, k, seconds per epoch, noise key) of one configuration."""
        w0, w1, w2, w3, w4, nkey = _SIX_WORDS.unpack(self._digest(config))
        # uniforms strictly inside (0, 1), each from the top 52 bits of a word
        u1 = ((w1 >> 12) + 0.5) / _TWO_52
        quality = u1**2.5
        chance = self.chance
        if ((w0 >> 12) + 0.5) / _TWO_52 < self.diverge_p:
            a_inf = a0 = chance
        else:
            a_inf = chance + (self.best - chance) * quality
            a0 = chance + (a_inf - chance) * 0.9 * (((w3 >> 12) + 0.5) / _TWO_52) ** 1.5
        z_quality = _normal_quantile(u1, 0.0, 1.0)
        z_rate = _normal_quantile(((w2 >> 12) + 0.5) / _TWO_52, 0.0, 1.0)
        rho = self._RATE_QUALITY_CORR
        k = math.exp(_LOG_HALF + 0.8 * (rho * z_quality + self._rate_residual * z_rate))
        z_other = _normal_quantile(((w4 >> 12) + 0.5) / _TWO_52, 0.0, 1.0)
        z_time = self._TIME_QUALITY_CORR * z_quality + self._time_residual * z_other
        seconds = self.epoch_s * math.exp(self.time_sigma * z_time)
        return a_inf, a0, k, seconds, nkey

    def _entry(self, config: dict[str, Any]) -> tuple[Any, ...]:
        """The cached form of `params` that `__call__` needs: (config, a_inf, a_inf - a0, -k,
        seconds, noise key), each computed as `__call__` used to, so values stay bit-identical."""
        a_inf, a0, k, seconds, nkey = self.params(config)
        entry = (config, a_inf, a_inf - a0, -k, seconds, nkey)
        if len(self._cache) >= 65536:
            self._cache.clear()  # bounded: only running trials' configs need to stay
        self._cache[id(config)] = entry
        return entry

    def __call__(self, config: dict[str, Any], epoch: int) -> tuple[float, float]:
        entry = self._cache.get(id(config))
        if entry is None or entry[0] is not config:
            entry = self._entry(config)
        _, a_inf, span, neg_k, seconds, nkey = entry
        h = _splitmix64(nkey ^ epoch)
        # Irwin-Hall of three 21-bit uniforms: near-normal, mean 1.5, sd 0.5.
        s = ((h & 0x1FFFFF) + ((h >> 21) & 0x1FFFFF) + ((h >> 42) & 0x1FFFFF)) / 2097152.0
        value = a_inf - span * epoch**neg_k + self._noise2 * (s - 1.5)
        value = 0.0 if value < 0.0 else 1.0 if value > 1.0 else value
        spread = ((h * 0x9E3779B97F4A7C15) >> 48) & 0xFFFF  # other bits than the noise's
        jitter = 1.0 + 0.1 * (spread / 65536.0 - 0.5)  # +-5 % per epoch
        if self._minimize:
            value = 1.0 - value
        return value, seconds * jitter


class SimulatedExecutor(Executor):
    """Runs trials on `workers` virtual workers against a virtual clock, in no real time.

    It behaves towards the Tuner like `LocalExecutor`: a submitted trial emits "loaded", then one
    "report" per epoch, and after each report waits for a command (continue, stop, pause,
    complete); an ending event frees its worker. Values and epoch durations come from `curve`;
    loading (and resuming, which costs nothing more) takes `load_s`. Checkpoint paths are only
    echoed back. `poll` never sleeps: it moves the clock to the earliest pending event and returns
    every event due then, so a run is deterministic for a given curve, seed and algorithm.

    Stragglers (RubberBand's simulator has them): each epoch, with probability `straggler_p`,
    takes `straggler_factor` times longer, drawn from a Generator seeded with `seed`.
    """

    def __init__(
        self,
        workers: int,
        curve: LearningCurve,
        *,
        load_s: float = 0.0,
        seed: int = 0,
        straggler_p: float = 0.0,
        straggler_factor: float = 4.0,
        metric: str = "value",
        scheduler: str | None = None,
        capacity: float | None = None,
        speedup: Callable[[dict[str, Any], float], float] | None = None,
        max_width: float | None = None,
        trace_best: str | None = None,
    ):
        """With `scheduler` ("fluid" or "fifo") trials get widths out of `capacity` as the real
        engine gives them (basht.engine.packing), and an epoch of width w takes the curve's
        seconds / speedup(config, w) (default w**0.8); without it every worker runs at the curve's
        pace. `trace_best` ("max" or "min") keeps the best reported value over time."""
        if workers < 1:
            raise ValueError("a simulated executor needs at least one worker")
        if trace_best not in (None, "max", "min"):
            raise ValueError(f"trace_best must be 'max', 'min' or None, not {trace_best!r}")
        if load_s < 0 or not 0.0 <= straggler_p <= 1.0 or straggler_factor < 0:
            raise ValueError("load_s and straggler_factor must be >= 0, straggler_p in [0, 1]")
        self.workers, self.curve, self.metric = workers, curve, metric
        self.load_s = float(load_s)
        self.straggler_p, self.straggler_factor = float(straggler_p), float(straggler_factor)
        self._rng = np.random.default_rng(seed)
        self._draws: list[float] = []
        self._now = 0.0
        # A calendar: the distinct times at which something is due (a heap of plain floats,
        # cheap to compare), and at each the (kind, trial_id, epoch, number, extra) due then, in
        # the order they were scheduled, so ties resolve the same way every run.
        self._times: list[float] = []
        self._due: dict[float, list[tuple[str, int, int, float, Any]]] = {}
        self._free = list(range(workers - 1, -1, -1))  # a stack: worker 0 is used first
        # trial_id -> [worker, config, epochs done once its pending report arrives, waiting]
        self._trials: dict[int, list[Any]] = {}
        self.scheduler = scheduler
        self.capacity = float(capacity if capacity is not None else workers)
        self.speedup = speedup or (lambda config, w: w**0.8)
        self.max_width = max_width or self.capacity
        self.widths: dict[int, float] = {}
        self._targets: dict[int, int | None] = {}
        self._epoch_s: dict[int, float] = {}
        self.busy_width_s = 0.0  # Σ width × time: what the packing kept busy
        # Due now, delivered first by the next poll: loaded events (when load_s is 0) and
        # (kind, trial, epoch, path) of trials a command ended.
        self._ready: list[Any] = []
        # With `trace_best`, the best value reported so far and (time, value) at each improvement:
        # what time-to-target is measured on.
        self._maximize = trace_best == "max"
        self.best: float | None = None
        self.trace: list[tuple[float, float]] | None = [] if trace_best else None

    # -- the clock --------------------------------------------------------------------------

    def now(self) -> float:
        """Virtual seconds since the executor was made."""
        return self._now

    @property
    def idle_workers(self) -> int:
        return len(self._free)

    @property
    def resume_costs(self) -> bool:
        # Without a load time a pause and a resume cost nothing on the virtual clock, and the
        # trial pauses as the algorithm says (simulations of it stay as they were).
        return self.load_s > 0

    @property
    def running(self) -> list[int]:
        return list(self._trials)

    @property
    def pending_events(self) -> int:
        return sum(len(due) for due in self._due.values()) + len(self._ready)

    def _schedule(self, at: float, item: tuple[str, int, int, float, Any]) -> None:
        """Make `item` due at `at`, after whatever was already due then."""
        due = self._due.get(at)
        if due is None:
            self._due[at] = [item]
            heappush(self._times, at)
        else:
            due.append(item)

    # -- trials -----------------------------------------------------------------------------

    def _checked(self, epoch: int, seconds: float) -> float:
        """The curve's seconds for `epoch`, validated, with a straggler's slowdown if one hits."""
        if not seconds >= 0.0:  # also catches NaN, which would break the clock's order
            raise ValueError(f"the curve gave {seconds!r} seconds for epoch {epoch}")
        if self.straggler_p > 0.0:
            if not self._draws:
                self._draws = self._rng.random(4096).tolist()
            if self._draws.pop() < self.straggler_p:
                seconds *= self.straggler_factor
        return seconds

    def submit(self, task: TrialTask) -> int:
        if not self._free:
            raise BashtError("no idle worker")
        trial_id = task.trial_id
        if trial_id in self._trials:
            raise BashtError(f"trial {trial_id} is already running")
        worker = self._free.pop()
        start, epoch, config = self._now + self.load_s, task.start_epoch + 1, task.config
        self._trials[trial_id] = [worker, config, epoch, False]
        value, seconds = self.curve(config, epoch)
        if not seconds >= 0.0 or self.straggler_p > 0.0:
            seconds = self._checked(epoch, seconds)
        if self.scheduler is not None:
            self._targets[trial_id] = task.target_budget
            self._epoch_s[trial_id] = seconds
            self._replan()
            seconds = self._at_width(trial_id, task.config, seconds)
        if self.load_s:
            self._schedule(start, (_LOADED, trial_id, epoch - 1, self.load_s, None))
        else:  # due now: delivered with the next poll, without a trip through the calendar
            self._ready.append(
                TrialEvent(
                    _LOADED, trial_id, worker, epoch - 1, {}, 0.0, 0.0, 0.0, None, None, start
                )
            )
        at, item = start + seconds, (_REPORT, trial_id, epoch, value, seconds)
        self._schedule(at, item)
        return worker

    def command(self, trial_id: int, command: str, path: str | None = None) -> None:
        """Answer a report: CONTINUE schedules the next epoch; the others end the trial now."""
        state = self._trials[trial_id]
        if not state[3]:
            raise BashtError(f"trial {trial_id} is not waiting for a command")
        state[3] = False
        if command == CONTINUE:
            epoch = state[2] = state[2] + 1
            value, seconds = self.curve(state[1], epoch)
            if not seconds >= 0.0 or self.straggler_p > 0.0:
                seconds = self._checked(epoch, seconds)
            if self.scheduler is not None:
                self._epoch_s[trial_id] = seconds
                seconds = self._at_width(trial_id, state[1], seconds)
            at, item = self._now + seconds, (_REPORT, trial_id, epoch, value, seconds)
            self._schedule(at, item)
        else:
            try:
                kind = Command(command).ending
            except (ValueError, KeyError):
                raise ValueError(f"unknown command {command!r}") from None
            self._ready.append((kind, trial_id, state[2], path))

    def _at_width(self, trial_id: int, config: dict[str, Any], seconds: float) -> float:
        width = self.widths.get(trial_id, 1.0)
        self.busy_width_s += width * seconds / self.speedup(config, width)
        return seconds / self.speedup(config, width)

    def _replan(self) -> None:
        """New widths for the running trials; each takes effect at the trial's next epoch."""
        loads = []
        for trial_id, state in self._trials.items():
            target = self._targets.get(trial_id)
            left = max(1, (target - state[2] + 1) if target is not None else 1)
            config = state[1]
            loads.append(
                TrialLoad(
                    trial_id,
                    left * self._epoch_s.get(trial_id, 1.0),
                    1.0,
                    self.max_width,
                    (lambda c: lambda w: self.speedup(c, w))(config),
                )
            )
        if self.scheduler == "fluid":
            self.widths = fluid_widths(loads, self.capacity)
        else:
            self.widths = fifo_widths(loads, self.capacity, self.capacity / self.workers)

    def wait_until(self, at: float) -> None:
        """The virtual clock moves to `at` (nothing runs meanwhile)."""
        self._now = max(self._now, at)

    def poll(self, timeout_s: float | None = None) -> list[TrialEvent]:
        """Every event due at the earliest pending time, with the clock moved there; never waits.

        Trials ended by a command and trials loaded in no time are due now: they come first, and
        the clock stays. Nothing pending means every running trial waits for a command: [] at once.
        """
        events: list[TrialEvent] = []
        times = self._times
        if self._ready:
            ready, self._ready = self._ready, []
            for item in ready:
                events.append(item if type(item) is TrialEvent else self._end(*item))
            if not times or times[0] > self._now:
                return events
        elif not times:
            return events
        at = heappop(times)
        self._now = at
        trials, metric = self._trials, self.metric
        trace, maximize, best = self.trace, self._maximize, self.best
        for kind, trial_id, epoch, number, extra in self._due.pop(at):
            state = trials[trial_id]
            if kind is _REPORT:
                state[3] = True
                events.append(
                    TrialEvent(
                        kind,
                        trial_id,
                        state[0],
                        epoch,
                        {metric: number},
                        0.0,
                        extra,
                        0.0,
                        None,
                        None,
                        at,
                    )
                )
                if (
                    trace is not None
                    and isfinite(number)
                    and (best is None or (number > best if maximize else number < best))
                ):
                    best = self.best = number
                    trace.append((at, number))
            else:
                events.append(
                    TrialEvent(
                        kind, trial_id, state[0], epoch, {}, number, 0.0, 0.0, None, None, at
                    )
                )
        return events

    def _end(self, kind: str, trial_id: int, epoch: int, path: str | None) -> TrialEvent:
        """Free the worker of a trial that a command ended."""
        state = self._trials.pop(trial_id)
        self._free.append(state[0])
        if self.scheduler is not None:
            self.widths.pop(trial_id, None)
            self._replan()
        return TrialEvent(kind, trial_id, state[0], epoch, {}, 0.0, 0.0, 0.0, path, None, self._now)
