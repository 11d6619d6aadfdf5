"""The Workload protocol: the seed's trial sub-phases (load, train, validate) plus test and checkpoints."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class WorkloadRef:
    """Which workload to build, and how: `name` is built in or `package.module:attr`, and the
    memory each of its trials may use (`resources.memory_per_worker_mb`, `Resources.memory_mb`)."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    experiment_seed: int = 0
    memory_mb: int = 2048


_SHARE_EPS = 1e-9


def check_share(share: float) -> float:
    """A device share must be 1/2^k or a whole number of devices, so that shares pack exactly."""
    if share >= 1:
        if abs(share - round(share)) > _SHARE_EPS:
            raise ValueError(f"a width above one GPU must be whole, got {share:g}")
        return float(round(share))
    k = round(-math.log2(share)) if share > 0 else -1
    if k < 0 or abs(share - 2.0**-k) > _SHARE_EPS:
        raise ValueError(f"a GPU share below one must be 1/2, 1/4, 1/8..., got {share:g}")
    return share


@dataclass(frozen=True)
class Resources:
    """What a trial may use, and the seed that makes it reproducible.

    `memory_mb` is the memory a trial may use (`resources.memory_per_worker_mb`): Ray reserves
    it, and a workload can size its buffers or batches by it; nothing enforces it.

    `seed` is the trial's own seed (model initialisation, shuffling, dropout); the data split is
    seeded by the experiment seed given to the workload's constructor, so every trial sees the same
    train/validation/test split.

    `devices` lets the engine grow a trial to several devices (one data-parallel replica each, the
    global batch size kept) or shrink it back; empty means the single `device`. `device_share` is
    the fraction of each device the trial may use, below 1 when trials are packed onto one GPU.
    """

    cpus: int = 1
    accelerator: str = "cpu"
    device: str = "cpu"
    memory_mb: int = 2048
    seed: int = 0
    devices: tuple[str, ...] = ()
    device_share: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.devices, str):  # tuple("cuda:0") would silently become six "devices"
            raise ValueError(f"Resources.devices must be a sequence of names, got {self.devices!r}")
        object.__setattr__(self, "devices", tuple(str(d) for d in self.devices))
        share = self.device_share
        if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0 < share <= 1:
            raise ValueError(f"Resources.device_share must be in (0, 1], got {share!r}")

    @property
    def replicas(self) -> tuple[str, ...]:
        """The devices to train on, one model replica each, in order; replica 0 evaluates."""
        return self.devices or (self.device,)


@runtime_checkable
class Workload(Protocol):
    """A model and its data. The engine times each call separately (the seed's trial sub-phases).

    Constructed as `Workload(seed=<experiment seed>, **workload.params)` once per trial.
    """

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        """Read the data and build the model for `config`."""

    def train(self, epochs: int) -> None:
        """Train `epochs` more epochs."""

    def validate(self) -> dict[str, float]:
        """Metrics on the validation split."""

    def test(self) -> dict[str, float]:
        """Metrics on the held-out test split; called for the best configuration only."""

    def state_dict(self) -> Any:
        """Everything needed to continue exactly where training stands (model, optimiser, RNG)."""

    def load_state_dict(self, state: Any) -> None:
        """Restore what `state_dict` returned."""

    # Optional: `set_threads(n)` lets the engine change a running trial's width between epochs
    # (Fluid); without it the engine limits the worker process's thread pools itself.
    #
    # Optional: a classmethod `check_config(config, where="config")`, the preflight hook that
    # `basht validate` and `basht run` call before anything is written. `config` holds some of a
    # trial's hyperparameters (one space key with one of its values, or one value of every key);
    # raise WorkloadError with a message starting with `where` for a key the workload does not
    # take or a value it rejects. It must be cheap: no data, no model. Without it the space's
    # keys are not checked before the run.
    #
    # Optional: a class attribute `metrics`, the names `validate()` reports; `search.metric` is
    # then checked against it before the run, not found missing in every trial's report.
    #
    # Optional: `about()`, the seed's Table 1 variables the workload stands for, kept with the
    # run: `dataset` (t), `dataset_mb` (ts), `model` (m) and `training` (ta). It must be cheap:
    # no data loaded, no model built (see `about_workload`).


def about_workload(workload: Any) -> dict[str, Any] | None:
    """A built workload's `about()` with the four keys in order, or None when it has none."""
    about = getattr(workload, "about", None)
    if not callable(about):
        return None
    info = dict(about())
    return {key: info.get(key) for key in ("dataset", "dataset_mb", "model", "training")}


class TrialReporter(Protocol):
    """What a plain-function workload receives: `trial.report(step, accuracy=...)`."""

    def report(self, step: int, **metrics: float) -> None: ...


class StopTrial(Exception):
    """Raised inside a plain-function workload's `trial.report` when the tuner stops the trial."""
