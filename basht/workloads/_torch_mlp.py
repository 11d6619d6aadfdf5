"""A seeded, resumable PyTorch MLP trainer over in-memory arrays (digits-mlp and mnist-mlp)."""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from basht.errors import WorkloadError
from basht.workloads.base import Resources

if TYPE_CHECKING:  # torch is imported lazily so that importing this module stays cheap
    import torch

__all__ = ["HParams", "Splits", "TorchMLP", "parse_hparams"]

OPTIMIZERS = ("adam", "sgd", "adamw")
ALIASES = {"learning_rate": "lr", "hidden_layer_config": "hidden"}
_EVAL_CHUNK = 8192
_STATE_VERSION = 1


@dataclass(frozen=True)
class Splits:
    """The train/validation/test arrays of a workload; features 2-D float, labels 1-D int."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_val: np.ndarray
    y_val: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int

    def standardised(self) -> Splits:
        """Scale features with the train split's mean/std only, so no statistics leak from val/test.

        Computed once per (cached) Splits object and shared by every trial in the process; the
        trainer never writes to these arrays.
        """
        cached = self.__dict__.get("_standardised")
        if cached is not None:
            return cached
        mean = self.X_train.mean(axis=0, dtype=np.float64)
        std = self.X_train.std(axis=0, dtype=np.float64)
        std[std < 1e-12] = 1.0  # constant features (blank border pixels) stay at zero

        def scale(x: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(((x - mean) / std).astype(np.float32))

        out = Splits(
            scale(self.X_train),
            self.y_train,
            scale(self.X_val),
            self.y_val,
            scale(self.X_test),
            self.y_test,
            self.n_classes,
        )
        object.__setattr__(self, "_standardised", out)
        return out


@dataclass(frozen=True)
class HParams:
    """The MLP's hyperparameters after aliases, defaults and checks."""

    lr: float = 1e-3
    hidden: tuple[int, ...] = (64,)
    dropout: float = 0.0
    weight_decay: float = 0.0
    batch_size: int = 32
    optimizer: str = "adam"


KEYS: tuple[str, ...] = ("lr", "hidden", "dropout", "weight_decay", "batch_size", "optimizer")


def canonical_keys(
    values: Mapping[str, Any], where: str, also: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Resolve aliases and reject unknown keys, so a typo in a config never goes unnoticed.

    `also`: other keys the caller accepts (a constructor's own params), named in the message only.
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = ALIASES.get(key, key)
        if name not in KEYS:
            known = ", ".join([*also, *KEYS, *ALIASES])
            raise WorkloadError(f"{where}: unknown key {key!r} (expected one of: {known})")
        if name in out:
            raise WorkloadError(f"{where}: {key!r} is an alias of {name!r}; give only one of them")
        out[name] = value
    return out


def parse_hparams(values: Mapping[str, Any], where: str) -> HParams:
    """Check types and ranges of canonical-keyed values (tuners hand over numpy scalars, tuples)."""
    hp: dict[str, Any] = {}
    for key, value in values.items():
        if key == "lr":
            hp[key] = _real(value, f"{where}: lr", low=0.0, low_inclusive=False)
        elif key == "weight_decay":
            hp[key] = _real(value, f"{where}: weight_decay", low=0.0)
        elif key == "dropout":
            p = _real(value, f"{where}: dropout", low=0.0)
            if p >= 1.0:
                raise WorkloadError(f"{where}: dropout must be below 1, got {value!r}")
            hp[key] = p
        elif key == "batch_size":
            hp[key] = _int(value, f"{where}: batch_size", low=1)
        elif key == "hidden":
            if isinstance(value, list | tuple):
                hp[key] = tuple(_int(w, f"{where}: hidden", low=1) for w in value)
            else:
                hp[key] = (_int(value, f"{where}: hidden", low=1),)
        elif key == "optimizer":
            name = str(value).lower() if isinstance(value, str) else None
            if name not in OPTIMIZERS:
                raise WorkloadError(
                    f"{where}: optimizer must be one of {', '.join(OPTIMIZERS)}, got {value!r}"
                )
            hp[key] = name
    return HParams(**hp)


def _real(value: Any, what: str, low: float, low_inclusive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise WorkloadError(f"{what} must be a number, got {value!r}")
    x = float(value)
    if not math.isfinite(x) or x < low or (x == low and not low_inclusive):
        bound = ">=" if low_inclusive else ">"
        raise WorkloadError(f"{what} must be finite and {bound} {low:g}, got {value!r}")
    return x


def _int(value: Any, what: str, low: int) -> int:
    # Integral floats (32.0) are accepted: some samplers return every number as a float.
    if isinstance(value, numbers.Real) and not isinstance(value, bool | numbers.Integral):
        if not float(value).is_integer():
            raise WorkloadError(f"{what} must be an integer, got {value!r}")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise WorkloadError(f"{what} must be an integer, got {value!r}")
    if int(value) < low:
        raise WorkloadError(f"{what} must be >= {low}, got {value!r}")
    return int(value)


def _to_cpu(obj: Any) -> Any:
    """Detached CPU copies of every tensor, so a checkpoint pickles without CUDA and never aliases."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, Mapping):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


class TorchMLP:
    """The Workload protocol for a ReLU MLP with softmax output; subclasses supply `_splits()`.

    Constructor params are defaults for every trial; the trial's `config` overrides them. Training
    uses its own RNG streams (a `torch.Generator` for minibatch order, a saved CPU RNG state for
    dropout) so that pausing and resuming, or other code in the same process drawing random
    numbers, never changes the result.

    With several devices (`Resources.devices`) the trial trains data-parallel: every global
    minibatch is split across one replica per device, so the engine can grow or shrink a trial
    between checkpoints without changing its learning dynamics (see `_parallel_step`).
    """

    workload_name = "torch-mlp"
    metrics = ("accuracy", "loss")  # what validate() and test() report
    #: Params a subclass's constructor takes itself (besides seed); the rest are config defaults.
    constructor_params: tuple[str, ...] = ()

    def __init__(self, seed: int = 0, **params: Any) -> None:
        self.seed = int(seed)
        where = f"{self.workload_name}: workload.params"
        self._defaults = canonical_keys(params, where, also=self.constructor_params)
        parse_hparams(self._defaults, where)
        self.hparams: HParams | None = None
        self._model: Any = None  # replica 0: the one that is optimised, evaluated and saved
        self._replicas: list[Any] = []
        self._optimizer: Any = None
        self._generator: Any = None
        self._rng_state: Any = None
        self._data: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._train_data: list[tuple[torch.Tensor, torch.Tensor]] = []  # per replica, on its device
        self._device: Any = None
        self._threads = 1
        self.epochs_done = 0

    def _splits(self) -> Splits:
        """The data, read or generated with `self.seed`; the same for every trial of a run."""
        raise NotImplementedError

    def _dataset(self) -> tuple[str, float | None]:
        """What the data is, and its size in MB, without reading it (for `about`)."""
        raise NotImplementedError

    def about(self) -> dict[str, Any]:
        """Table 1's t, ts, m, ta (see `basht.workloads.base.Workload`)."""
        dataset, size_mb = self._dataset()
        optimizer = self._defaults.get("optimizer", HParams.optimizer)
        return {
            "dataset": dataset,
            "dataset_mb": size_mb,
            "model": "MLP (PyTorch): hidden widths and dropout from the config",
            "training": f"minibatch {optimizer} on cross-entropy unless the config says otherwise",
        }

    @classmethod
    def check_config(cls, config: Mapping[str, Any], where: str = "config") -> None:
        """The preflight hook (see `basht.workloads.base.Workload`): the checks `load` makes on
        `config`'s keys and values, without data or torch."""
        parse_hparams(canonical_keys(config, where), where)

    def set_threads(self, threads: int) -> None:
        """A new width between epochs (Fluid); the result does not depend on it."""
        import torch

        self._threads = max(1, int(threads))
        torch.set_num_threads(self._threads)

    @classmethod
    def prepare(cls, seed: int = 0, **params: Any) -> None:
        """The setup phase: import torch and read the data once per worker, not in a trial's load."""
        import torch.optim  # noqa: F401

        cls(seed=seed, **params)._splits().standardised()

    # -- Workload protocol -------------------------------------------------------------------

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        """Read the data and build the model and optimiser, seeded from `resources.seed`.

        One replica per device in `resources.replicas`, all with the same initial weights; the
        optimiser belongs to replica 0, which is also the one evaluated and checkpointed.
        """
        import torch

        where = f"{self.workload_name}: config"
        values = {**self._defaults, **canonical_keys(config, where)}
        hp = parse_hparams(values, where)
        self._threads = max(1, int(resources.cpus))
        torch.set_num_threads(self._threads)
        devices = [self._usable_device(name) for name in resources.replicas]
        for device in devices:
            if device.type == "cuda":
                # Per process and device; set even at 1.0 so a reused worker drops an earlier limit.
                torch.cuda.set_per_process_memory_fraction(resources.device_share, device)
        self._device = devices[0]

        splits = self._splits().standardised()
        self._data = {
            name: (
                torch.from_numpy(x).to(self._device),
                torch.from_numpy(np.array(y, dtype=np.int64)).to(self._device),
            )
            for name, x, y in (
                ("train", splits.X_train, splits.y_train),
                ("val", splits.X_val, splits.y_val),
                ("test", splits.X_test, splits.y_test),
            )
        }

        x_train, y_train = self._data["train"]
        by_device = {self._device: (x_train, y_train)}
        for device in devices[1:]:  # replicas on one device share its copy ("cpu", "cpu": none)
            if device not in by_device:
                by_device[device] = (x_train.to(device), y_train.to(device))
        self._train_data = [by_device[device] for device in devices]

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(resources.seed)
            self._model = _build(splits.X_train.shape[1], hp, splits.n_classes).to(self._device)
            self._rng_state = torch.get_rng_state()  # continues into dropout, after init draws
        self._replicas = [self._model]
        self._replicas += [copy.deepcopy(self._model).to(device) for device in devices[1:]]
        self._generator = torch.Generator().manual_seed(resources.seed)
        self._optimizer = _optimizer(self._model, hp)
        self.hparams = hp
        self.epochs_done = 0

    def train(self, epochs: int) -> None:
        """Train `epochs` more epochs of shuffled minibatches."""
        import torch
        import torch.nn.functional as F

        self._require_loaded()
        assert self.hparams is not None
        if epochs < 0:
            raise WorkloadError(f"{self.workload_name}: epochs must be >= 0, got {epochs}")
        torch.set_num_threads(self._threads)
        x, y = self._data["train"]
        n, batch = len(y), self.hparams.batch_size
        model, opt = self._model, self._optimizer
        for replica in self._replicas:
            replica.train()
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self._rng_state)
            for _ in range(epochs):
                order = torch.randperm(n, generator=self._generator).to(self._device)
                for start in range(0, n, batch):
                    idx = order[start : start + batch]
                    if len(self._replicas) > 1:
                        self._parallel_step(idx)
                        continue
                    opt.zero_grad(set_to_none=True)
                    loss = F.cross_entropy(model(x[idx]), y[idx])
                    loss.backward()
                    opt.step()
                self.epochs_done += 1
            self._rng_state = torch.get_rng_state()

    def validate(self) -> dict[str, float]:
        """Accuracy and mean cross-entropy on the validation split."""
        return self._evaluate("val")

    def test(self) -> dict[str, float]:
        """Accuracy and mean cross-entropy on the test split."""
        return self._evaluate("test")

    def state_dict(self) -> dict[str, Any]:
        """A detached, picklable snapshot: model, optimiser, both RNG streams, epochs done."""
        self._require_loaded()
        assert self.hparams is not None
        return {
            "version": _STATE_VERSION,
            "workload": self.workload_name,
            "hparams": asdict(self.hparams),
            "model": _to_cpu(self._model.state_dict()),
            "optimizer": _to_cpu(self._optimizer.state_dict()),
            "generator": self._generator.get_state().clone(),
            "torch_rng": self._rng_state.clone(),
            "epochs": self.epochs_done,
        }

    def load_state_dict(self, state: Any) -> None:
        """Continue from `state`; call after `load(config)` with the config to continue with.

        The architecture and optimiser type must match the checkpoint. Learning rate and weight
        decay come from the current config, not the checkpoint, so a continued trial may change
        them (population-based schemes); with the same config the run continues bitwise.
        """
        self._require_loaded()
        assert self.hparams is not None
        name = self.workload_name
        if not isinstance(state, Mapping) or state.get("version") != _STATE_VERSION:
            raise WorkloadError(f"{name}: not a checkpoint of this workload (bad version)")
        saved = state.get("hparams", {})
        for key in ("hidden", "optimizer"):
            mine = getattr(self.hparams, key)
            theirs = tuple(saved.get(key, ())) if key == "hidden" else saved.get(key)
            if theirs != mine:
                raise WorkloadError(
                    f"{name}: checkpoint has {key}={theirs!r} but the config gives {mine!r}"
                )
        try:
            self._model.load_state_dict(state["model"])
            self._sync_replicas()  # a checkpoint may come from a run on more or fewer devices
            self._optimizer.load_state_dict(state["optimizer"])
            self._generator.set_state(state["generator"].clone())
            self._rng_state = state["torch_rng"].clone()
        except (KeyError, RuntimeError, ValueError) as err:
            msg = " ".join(str(err).split())
            raise WorkloadError(f"{name}: checkpoint does not fit the model ({msg})") from None
        for group in self._optimizer.param_groups:
            group["lr"] = self.hparams.lr
            group["weight_decay"] = self.hparams.weight_decay
        self.epochs_done = int(state["epochs"])

    # -- helpers -----------------------------------------------------------------------------

    def _usable_device(self, name: str) -> torch.device:
        """`name` as a torch.device, failing at load rather than mid-run if it cannot be used."""
        import torch

        try:
            device = torch.device(name)
            torch.empty(0, device=device)
        except (RuntimeError, AssertionError) as err:
            reason = " ".join(str(err).split())
            raise WorkloadError(
                f"{self.workload_name}: cannot use device {name!r} ({reason})"
            ) from None
        return device

    def _parallel_step(self, idx: torch.Tensor) -> None:
        """One optimiser step on the global minibatch `idx`, split across the replicas.

        Each replica takes a contiguous shard (sizes differ by at most one) and its mean loss
        weighted by its share of the batch, so the summed gradients are those of the global batch's
        mean loss: the same step as on one device, up to floating-point summation order. Dropout
        masks are drawn per shard, so with dropout > 0 the result differs from one device's (still
        reproducible for a given number of replicas). Shards run one after another in this process.
        """
        import torch
        import torch.nn.functional as F

        main = self._model
        for replica in self._replicas:
            replica.zero_grad(set_to_none=True)
        shards = torch.tensor_split(idx, len(self._replicas))
        for replica, (x, y), shard in zip(self._replicas, self._train_data, shards, strict=True):
            if len(shard) == 0:
                continue
            shard = shard.to(x.device)
            loss = F.cross_entropy(replica(x[shard]), y[shard]) * (len(shard) / len(idx))
            loss.backward()
        with torch.no_grad():
            for replica in self._replicas[1:]:
                for p0, p in zip(main.parameters(), replica.parameters(), strict=True):
                    if p.grad is None:
                        continue
                    grad = p.grad.to(p0.device)
                    if p0.grad is None:
                        p0.grad = grad.clone()
                    else:
                        p0.grad.add_(grad)
        self._optimizer.step()
        self._sync_replicas()

    def _sync_replicas(self) -> None:
        """Copy replica 0's weights to the others, which never step themselves."""
        import torch

        with torch.no_grad():
            for replica in self._replicas[1:]:
                for p0, p in zip(self._model.parameters(), replica.parameters(), strict=True):
                    p.copy_(p0)
                for b0, b in zip(self._model.buffers(), replica.buffers(), strict=True):
                    b.copy_(b0)

    def _require_loaded(self) -> None:
        if self._model is None:
            raise WorkloadError(f"{self.workload_name}: call load(config, resources) first")

    def _evaluate(self, split: str) -> dict[str, float]:
        import torch
        import torch.nn.functional as F

        self._require_loaded()
        torch.set_num_threads(self._threads)
        x, y = self._data[split]
        self._model.eval()
        total_loss, correct = 0.0, 0
        with torch.no_grad():
            for start in range(0, len(y), _EVAL_CHUNK):
                xb, yb = x[start : start + _EVAL_CHUNK], y[start : start + _EVAL_CHUNK]
                logits = self._model(xb)
                total_loss += float(F.cross_entropy(logits, yb, reduction="sum"))
                correct += int((logits.argmax(dim=1) == yb).sum())
        n = max(1, len(y))
        return {"accuracy": correct / n, "loss": total_loss / n}


def _build(n_in: int, hp: HParams, n_out: int) -> torch.nn.Module:
    from torch import nn

    layers: list[nn.Module] = []
    width = n_in
    for h in hp.hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        if hp.dropout > 0:
            layers.append(nn.Dropout(hp.dropout))
        width = h
    layers.append(nn.Linear(width, n_out))
    return nn.Sequential(*layers)


def _optimizer(model: torch.nn.Module, hp: HParams) -> torch.optim.Optimizer:
    import torch

    params = model.parameters()
    if hp.optimizer == "sgd":
        return torch.optim.SGD(params, lr=hp.lr, momentum=0.9, weight_decay=hp.weight_decay)
    if hp.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=hp.lr, weight_decay=hp.weight_decay)
    return torch.optim.Adam(params, lr=hp.lr, weight_decay=hp.weight_decay)
