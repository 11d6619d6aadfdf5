"""What a plan is estimated from: measured epoch times per GPU count, and instance start-up times.

A profile file (YAML or JSON) names the instance type and holds the measurements:

    instance: aws:p3.8xlarge          # provider:instance from the price sheet, or
                                      # {usd_per_hour: 12.24, gpus: 4, provider: aws}
    epoch_s: {1: [61.2, 60.8, 75.0], 2: [33.1, 32.9], 4: [19.0, 18.7]}   # one trial's epochs
    startup_s: [95, 110, 160]         # from request to a ready instance
    overhead_s: [4.1, 4.5]            # optional: a trial's seconds besides its epochs
    data: {gb: 12, usd_per_gb: 0.02}  # optional: what each launched instance pulls, at its price
    power_w: {idle: 400, busy: 1400}  # optional: a whole instance's draw, idle and all GPUs busy
    source: "ResNet-18 on CIFAR-10, profiled 2026-11-20"

The spread of the samples is what the simulator draws stragglers from. A GPU count that was not
profiled is scaled from the nearest one below by t(k) = t(k0)·(k/k0)^-b, with b fitted to the
profiled means (or given as `scaling` when only one count was profiled).

Data movement is billed per instance launched: each new instance pulls the dataset (and the
checkpoints it resumes) once, `data.gb` at `data.usd_per_gb` (the provider's transfer price).

With `power_w`, plans are also estimated in energy: every instance draws `idle` watts for its
whole life, and each busy GPU adds its share of `busy - idle` (an estimate from the two figures,
labelled so wherever it is shown).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from basht.energy.pricing import BILLING_RULES, PER_SECOND, Price, PriceError, lookup_price
from basht.errors import BashtError
from basht.experiment import read_document

_KEYS = {"instance", "epoch_s", "startup_s", "overhead_s", "scaling", "data", "power_w", "source"}


@dataclass(frozen=True)
class Profile:
    """One trial's seconds per epoch at each GPU count (samples), and instance start-up times."""

    price: Price
    epoch_s: Mapping[int, tuple[float, ...]]
    startup_s: tuple[float, ...] = (0.0,)
    scaling: float | None = None
    source: str = ""
    data_usd_per_instance: float = 0.0  # data movement: what each launched instance pulls costs
    # A trial's seconds besides its epochs, in each stage: loading data and model (or its
    # checkpoint), saving its checkpoint, the hand-offs with the driver.
    overhead_s: tuple[float, ...] = (0.0,)
    # A whole instance's watts (idle, all GPUs busy): what a plan's energy is estimated from.
    power_w: tuple[float, float] | None = None
    _sorted: dict[int, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.price.gpus < 1:
            raise BashtError(f"instance {self.price.instance or ''}: a plan needs GPU instances")
        if not self.epoch_s:
            raise BashtError("epoch_s: give the seconds per epoch at one GPU count at least")
        for gpus, samples in self.epoch_s.items():
            if gpus < 1 or not samples or not all(0 < s < 1e9 for s in samples):
                raise BashtError(
                    f"epoch_s.{gpus}: expected seconds > 0 (and below 1e9) at a GPU count >= 1"
                )
        if not self.startup_s or not all(0 <= s < 1e9 for s in self.startup_s):
            raise BashtError("startup_s: expected seconds >= 0 (and below 1e9)")
        if not self.overhead_s or not all(0 <= s < 1e9 for s in self.overhead_s):
            raise BashtError("overhead_s: expected seconds >= 0 (and below 1e9)")
        if not (math.isfinite(self.data_usd_per_instance) and self.data_usd_per_instance >= 0):
            raise BashtError("data: expected a cost >= 0 per instance launched")
        if self.power_w is not None:
            idle, busy = self.power_w
            if not (0 <= idle <= busy < 1e6):
                raise BashtError(
                    f"power_w: expected 0 <= idle <= busy watts, got idle {idle:g}, busy {busy:g}"
                )
        if self.scaling is not None and not (math.isfinite(self.scaling) and self.scaling > 0):
            raise BashtError(f"scaling: expected b > 0 in t(k) = t(1)·k^-b, got {self.scaling!r}")
        needed = {1 << i for i in range(self.price.gpus.bit_length())}  # 1, 2, 4 ... per trial
        if self.scaling is None and len(self.epoch_s) < 2 and needed - set(self.epoch_s):
            raise BashtError(
                f"epoch_s: profiled at {_gpus(next(iter(self.epoch_s)))} only; give times at more "
                "counts, or `scaling` (b in t(k) = t(1)·k^-b, 1 = perfect scaling)"
            )

    @property
    def gpus_per_instance(self) -> int:
        return self.price.gpus

    @property
    def exponent(self) -> float:
        """b of t(k) = t(1)·k^-b: given, or fitted to the profiled means (least squares in logs).
        A fit below 0 (more GPUs measured slower, as when they share a machine's cores) counts
        as 0: a count beyond those profiled is taken to be no faster, not slower still."""
        if self.scaling is not None:
            return self.scaling
        counts = sorted(self.epoch_s)
        if len(counts) < 2:
            return 1.0  # never used: every count a trial can get was profiled
        x = np.log(counts)
        y = np.log([np.mean(self.epoch_s[k]) for k in counts])
        return max(0.0, float(-np.polyfit(x, y, 1)[0]))

    def epoch_quantile(self, gpus: int, u: np.ndarray) -> np.ndarray:
        """Seconds per epoch at `gpus` GPUs for uniform draws `u` (the empirical distribution):
        the same `u` gives the same straggler under every plan (common random numbers)."""
        table = self._table(gpus)
        index = np.minimum((u * len(table)).astype(np.int64), len(table) - 1)
        return table[index]

    def startup_quantile(self, u: np.ndarray) -> np.ndarray:
        return _quantile(self.startup_s, u)

    def overhead_quantile(self, u: np.ndarray) -> np.ndarray:
        return _quantile(self.overhead_s, u)

    def trial_s(self, gpus: int, epochs: int) -> float:
        """A trial's expected seconds for `epochs` epochs at `gpus` GPUs, with its overhead."""
        return epochs * float(np.mean(self._table(gpus))) + float(np.mean(self.overhead_s))

    def scaled(self, factor: float) -> Profile:
        """This profile with every trial `factor` times as long (epochs and overhead; the
        start-up of an instance is the provider's, not the trial's): what a run that has seen
        its trials take `factor` times the profiled time expects of the rest."""
        if not (math.isfinite(factor) and factor > 0):
            raise BashtError(f"speed factor: expected a number > 0, got {factor!r}")
        return replace(
            self,
            epoch_s={k: tuple(s * factor for s in v) for k, v in self.epoch_s.items()},
            overhead_s=tuple(s * factor for s in self.overhead_s),
            source=f"{self.source or 'profile'}, trials x{factor:.3g} as measured in the run",
            _sorted={},
        )

    def samples(self) -> dict[str, Any]:
        """The measurements, as a profile file holds them (its instance aside): what a plan
        file keeps so that a run can plan again from them."""
        return {
            "epoch_s": {str(k): list(v) for k, v in sorted(self.epoch_s.items())},
            "startup_s": list(self.startup_s),
            "overhead_s": list(self.overhead_s),
            "scaling": self.scaling,
            "power_w": None
            if self.power_w is None
            else {"idle": self.power_w[0], "busy": self.power_w[1]},
            "source": self.source,
        }

    def _table(self, gpus: int) -> np.ndarray:
        table = self._sorted.get(gpus)
        if table is None:
            table = self._sorted[gpus] = self._samples_at(gpus)
        return table

    def _samples_at(self, gpus: int) -> np.ndarray:
        if gpus in self.epoch_s:
            return np.sort(np.asarray(self.epoch_s[gpus], dtype=float))
        below = [k for k in self.epoch_s if k < gpus]
        base = max(below) if below else min(self.epoch_s)
        factor = (gpus / base) ** -self.exponent
        return np.sort(np.asarray(self.epoch_s[base], dtype=float) * factor)


def _quantile(samples: tuple[float, ...], u: np.ndarray) -> np.ndarray:
    """The empirical distribution of `samples` at uniform draws `u`."""
    table = np.sort(np.asarray(samples, dtype=float))
    return table[np.minimum((u * len(table)).astype(np.int64), len(table) - 1)]


def load_profile(path: str | Path) -> Profile:
    """Read a profile file; every problem is one BashtError line naming the file and key."""
    path = Path(path)
    data = read_document(path)
    try:
        return profile_from_dict(data)
    except BashtError as err:
        raise BashtError(f"{path}: {err}") from None


def profile_from_dict(data: Any) -> Profile:
    if not isinstance(data, Mapping):
        raise BashtError("expected a mapping with instance, epoch_s and startup_s")
    if (unknown := _first_unknown(data, _KEYS)) is not None:
        raise BashtError(f"{unknown}: unknown key (expected one of: {', '.join(sorted(_KEYS))})")
    for key in ("instance", "epoch_s"):
        if key not in data:
            raise BashtError(f"{key}: missing required key")
    epoch_s = data["epoch_s"]
    if not isinstance(epoch_s, Mapping):
        raise BashtError("epoch_s: expected a mapping of GPU count to seconds per epoch")
    times: dict[int, tuple[float, ...]] = {}
    for key, samples in epoch_s.items():
        gpus = _gpu_count(key)
        if gpus in times:  # 1 and "1" are one count: its samples would be lost silently
            raise BashtError(f"epoch_s.{_shown_key(key)}: GPU count {gpus} given twice")
        times[gpus] = tuple(_number(s, f"epoch_s.{_shown_key(key)}") for s in _listed(samples))
    startup = tuple(_number(s, "startup_s") for s in _listed(data.get("startup_s", [0.0])))
    overhead = tuple(_number(s, "overhead_s") for s in _listed(data.get("overhead_s", [0.0])))
    scaling = None if data.get("scaling") is None else _number(data["scaling"], "scaling")
    return Profile(
        price=parse_instance(data["instance"]),
        epoch_s=times,
        startup_s=startup,
        scaling=scaling,
        source=str(data.get("source", "")),
        data_usd_per_instance=_data_usd(data.get("data")),
        overhead_s=overhead,
        power_w=_power(data.get("power_w")),
    )


def _power(spec: Any) -> tuple[float, float] | None:
    """`power_w: {idle, busy}`: a whole instance's watts, idle and with every GPU busy."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise BashtError("power_w: expected a mapping with idle and busy watts")
    if (unknown := _first_unknown(spec, {"idle", "busy"})) is not None:
        raise BashtError(f"power_w.{unknown}: unknown key (expected one of: busy, idle)")
    for key in ("idle", "busy"):
        if key not in spec:
            raise BashtError(f"power_w.{key}: missing required key")
    return _number(spec["idle"], "power_w.idle"), _number(spec["busy"], "power_w.busy")


def _data_usd(spec: Any) -> float:
    """`data: {gb, usd_per_gb}`: what moving the data onto one new instance costs."""
    if spec is None:
        return 0.0
    if not isinstance(spec, Mapping):
        raise BashtError("data: expected a mapping with gb and usd_per_gb")
    if (unknown := _first_unknown(spec, {"gb", "usd_per_gb"})) is not None:
        raise BashtError(f"data.{unknown}: unknown key (expected one of: gb, usd_per_gb)")
    values = []
    for key in ("gb", "usd_per_gb"):
        if key not in spec:
            raise BashtError(f"data.{key}: missing required key")
        value = _number(spec[key], f"data.{key}")
        if value < 0:
            raise BashtError(f"data.{key}: expected a number >= 0, got {value:g}")
        values.append(value)
    return values[0] * values[1]


def profile_from_run(
    store: Any,
    run_id: str,
    instance: str,
    *,
    scaling: float | None = None,
    startup_s: tuple[float, ...] = (0.0,),
) -> Profile:
    """A profile measured by a Basht run: every epoch its trials trained (train + validate
    seconds, as the store has them) is a sample of one trial on one GPU of `instance`, and each
    trial's load time per segment (its loads over the times it was started or resumed) a sample
    of its overhead (checkpoint saves are not timed in a run, so this is a floor).

    Run the profiling job on the instance type you plan for, one GPU per worker; the planner
    scales other GPU counts by `scaling` (b in t(k) = t(1)·k^-b), which a run at one width
    cannot measure.
    """
    run = store.get_run(run_id)
    seconds = tuple(r.train_s + r.validate_s for r in store.reports(run.id))
    seconds = tuple(s for s in seconds if s > 0)
    if not seconds:
        raise BashtError(f"run {run.id}: no epoch was reported, nothing to profile")
    starts: dict[int, int] = {}  # trial number -> segments (started once, resumed n times)
    for d in store.decisions(run.id):
        if d.op == "suggest":
            starts[d.trial] = starts.get(d.trial, 0) + 1
    overhead = tuple(
        t.load_s / starts[t.number]
        for t in store.trials(run.id)
        if t.load_s > 0 and starts.get(t.number)
    )
    price = parse_instance(instance)
    if scaling is None and price.gpus > 1:
        raise BashtError(
            f"run {run.id} measured one GPU per trial: give the scaling to more GPUs "
            "(b in t(k) = t(1)·k^-b; 1 = linear)"
        )
    return Profile(
        price=price,
        epoch_s={1: seconds},
        startup_s=startup_s,
        scaling=scaling,
        source=f"run {run.id}: {len(seconds)} epochs measured",
        overhead_s=overhead or (0.0,),
    )


def choose_profile(
    path: Path | None,
    run_id: str | None,
    open_store: Any,
    *,
    instance: str | None = None,
    scaling: float | None = None,
    startup_s: float | None = None,
) -> Profile:
    """The profile `basht plan` was given: a file, or a stored run with the instance it ran on
    (`open_store()` opens the store only then)."""
    if (path is None) == (run_id is None):
        raise BashtError("give --profile FILE or --from-run RUN (with --instance), one of them")
    if path is not None:
        given = [f"--{k}" for k, v in (("instance", instance), ("scaling", scaling),
                                       ("startup", startup_s)) if v is not None]  # fmt: skip
        if given:
            raise BashtError(
                f"{', '.join(given)}: only with --from-run (a profile file has its own)"
            )
        return load_profile(path)
    if instance is None:
        raise BashtError("--from-run: give --instance, the instance type the run measured")
    startup = (120.0 if startup_s is None else startup_s,)
    return profile_from_run(open_store(), run_id, instance, scaling=scaling, startup_s=startup)


def _gpu_count(key: Any) -> int:
    """A GPU count key of epoch_s: a whole number (1.5 GPUs is a typo, not 1 GPU)."""
    wrong = BashtError(
        f"epoch_s.{_shown_key(key)}: expected a whole GPU count with a list of seconds"
    )
    try:
        number = float(key)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past any float
        raise wrong from None
    if isinstance(key, bool) or not math.isfinite(number) or number != int(number):
        raise wrong
    return int(number)


def _first_unknown(spec: Mapping[Any, Any], known: set[str]) -> str | None:
    """The first key of `spec` (in sorted order, as shown) that is not `known`, shown; keys of
    any type (YAML gives ints, floats, None) are compared as text."""
    unknown = sorted(_shown_key(key) for key in spec if key not in known)
    return unknown[0] if unknown else None


def _shown_key(key: Any) -> str:
    """A key as a message shows it: quoted when it is empty, neither text nor a whole number,
    or holds spaces or control characters (a line break must not break the one-line message)."""
    text = str(key)
    if (
        isinstance(key, str | int)
        and text
        and text.isprintable()
        and not any(c.isspace() for c in text)
    ):
        return text
    return repr(key)


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def parse_instance(spec: Any) -> Price:
    """`provider:instance` from the price sheet, or an explicit price with GPUs per instance."""
    try:
        if isinstance(spec, str):
            provider, sep, instance = spec.partition(":")
            if not sep:
                raise BashtError(f"instance: expected provider:instance, got {spec!r}")
            return lookup_price(provider, instance)
        if isinstance(spec, Mapping):
            return _instance_from_mapping(spec)
    except PriceError as err:
        raise BashtError(f"instance: {err.reason}") from None
    raise BashtError(f"instance: expected provider:instance or a mapping, got {_shown_value(spec)}")


_DURATION = re.compile(
    r"^(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)(?P<unit>s?))?$"
)


def parse_duration(text: str) -> float:
    """Seconds in `5400`, `90m`, `1h30m` or `2h`."""
    match = _DURATION.match(text.strip())
    # A bare number after hours or minutes ("1h30") is ambiguous: 30 minutes, or 30 seconds?
    ambiguous = match is not None and bool(match["s"]) and not match["unit"]
    if ambiguous and (match["h"] or match["m"]):
        raise BashtError(f"deadline {text!r}: give the unit of its last number, e.g. 1h30m")
    if not text.strip() or match is None or not any(match.groupdict().values()):
        raise BashtError(f"deadline {text!r}: expected seconds or a time like 90m or 1h30m")
    parts = {k: float(v) for k, v in match.groupdict().items() if v and k != "unit"}
    return parts.get("h", 0.0) * 3600 + parts.get("m", 0.0) * 60 + parts.get("s", 0.0)


_INSTANCE_KEYS = ("usd_per_hour", "gpus", "provider", "name", "vcpus")


def _instance_from_mapping(spec: Mapping[str, Any]) -> Price:
    if (unknown := _first_unknown(spec, set(_INSTANCE_KEYS))) is not None:
        raise BashtError(
            f"instance.{unknown}: unknown key (expected one of: {', '.join(_INSTANCE_KEYS)})"
        )
    for key in ("usd_per_hour", "gpus"):
        if key not in spec:
            raise BashtError(f"instance.{key}: missing required key")
    provider = spec.get("provider")
    if provider is not None and (not isinstance(provider, str) or provider not in BILLING_RULES):
        raise BashtError(
            f"instance.provider: {_shown_value(provider)} is not one of {', '.join(BILLING_RULES)} "
            "(leave it out to bill per second)"
        )
    usd = _number(spec["usd_per_hour"], "instance.usd_per_hour")
    if not usd > 0:
        raise BashtError(f"instance.usd_per_hour: expected a price > 0, got {usd:g}")
    return Price(
        usd_per_hour=usd,
        vcpus=_count(spec.get("vcpus", 1), "instance.vcpus"),
        gpus=_count(spec["gpus"], "instance.gpus"),
        rule=BILLING_RULES.get(provider, PER_SECOND) if provider else PER_SECOND,
        provider=provider,
        instance=str(spec["name"]) if spec.get("name") else None,
        source="profile file",
    )


def _number(value: Any, key: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past any float
        raise BashtError(f"{key}: expected a number, got {_shown_value(value)}") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise BashtError(f"{key}: expected a number, got {_shown_value(value)}")
    return number


def _shown_value(value: Any) -> str:
    """A value as a message quotes it: a long one cut short (a list of a million samples, a
    400-digit number)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _count(value: Any, key: str) -> int:
    number = _number(value, key)
    if number != int(number) or number < 1:
        raise BashtError(f"{key}: expected a whole number >= 1, got {_shown_value(value)}")
    return int(number)


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"
