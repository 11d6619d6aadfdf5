"""PyTorch Lightning in Basht: the ready workload `lightning` tunes a LightningModule as it is, and
`BashtCallback` lets a Lightning script of one's own run as a Basht trial.

Both pause and resume through Lightning's own checkpoint (`trainer.save_checkpoint`, then
`trainer.fit(ckpt_path=...)`): the weights, the optimisers and schedulers, the loops' progress and
the callbacks' states. Lightning keeps no random number generator in it, so the callbacks here add
theirs (torch, numpy, Python) as their callback state: shuffling and dropout of a resumed run go on
where they stopped, and a trial paused and resumed ends with the metrics of one trained straight
through (bitwise on a CPU; see docs/how-to/lightning.md).

Lightning is imported on first use: `lightning is not installed: pip install 'basht[lightning]'`
when it is missing.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import random
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from basht.errors import WorkloadError
from basht.integrations._user_code import (
    TrialResources,
    call_with,
    floats,
    load_target,
    plain,
    require,
    share_out,
)
from basht.integrations.reporter import (
    Decision,
    in_trial,
    pause_folder,
    report,
    resume_from,
)

# BashtCallback subclasses the framework's callback class: built on first use, by __getattr__.
__all__ = ["CHECKPOINT_NAME", "BashtCallback", "LightningWorkload"]  # noqa: F822

log = logging.getLogger(__name__)

#: The file a paused script's checkpoint is saved as, in `checkpoint_dir()`.
CHECKPOINT_NAME = "last.ckpt"
_FORMAT = "basht-lightning/1"
#: Trainer arguments the workload sets itself (the rest may be given in `params.trainer`).
_OWNED = (
    "max_epochs",
    "min_epochs",
    "max_steps",
    "accelerator",
    "devices",
    "num_nodes",
    "strategy",
    "logger",
    "callbacks",
    "enable_checkpointing",
    "enable_progress_bar",
    "enable_model_summary",
    "default_root_dir",
)


def _lightning() -> ModuleType:
    return require("lightning.pytorch", "lightning")


# -- random number generators, as data that `torch.load(weights_only=True)` reads back --------


def _rng_states() -> dict[str, Any]:
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: Mapping[str, Any]) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(states["torch"])
    kind, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


# -- the callbacks, built on first use (they subclass Lightning's Callback) --------------------


@functools.cache
def _callback_classes() -> tuple[type, type]:
    pl = _lightning()

    class RngStates(pl.Callback):
        """Keeps the random number generators in Lightning's checkpoint and restores them on
        resume (Lightning restores callbacks before the fit loop draws its first batch)."""

        @property
        def state_key(self) -> str:
            return type(self).__qualname__

        def state_dict(self) -> dict[str, Any]:
            return {"rng": _rng_states()}

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            if "rng" in state_dict:
                _set_rng_states(state_dict["rng"])

    class BashtCallback(RngStates):
        """Reports each validation of `trainer.fit` to Basht and does what Basht answers.

        `on_validation_end` reports `step=trainer.current_epoch + 1` with every number in
        `trainer.callback_metrics`; on STOP it sets `trainer.should_stop`; on PAUSE it also saves
        `trainer.save_checkpoint(checkpoint_dir() / "last.ckpt")` at the end of the epoch (where
        Lightning's own checkpoints resume from). Pass `resume_checkpoint()` to
        `trainer.fit(ckpt_path=...)`: None unless the trial is resumed. Outside a trial it does
        nothing (besides keeping the random generators in the checkpoints, as every Basht
        callback does). `monitor`, when given, must be among the logged metrics.
        """

        def __init__(self, monitor: str | None = None) -> None:
            super().__init__()
            self.monitor = monitor
            self.decision = Decision.CONTINUE  # the last answer
            self.paused = False  # saved and stopped on PAUSE
            self._pausing = False

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            if trainer.sanity_checking or trainer.state.fn != "fit" or not in_trial():
                return  # only the validations of trainer.fit are reports
            metrics = floats(trainer.callback_metrics)
            _check_monitor(self.monitor, metrics, "BashtCallback")
            self.decision = report(step=trainer.current_epoch + 1, **metrics)
            if self.decision is Decision.STOP:
                trainer.should_stop = True
            elif self.decision is Decision.PAUSE:
                self._pausing = True
                trainer.should_stop = True

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            if not self._pausing:
                return
            self._pausing = False
            folder = pause_folder()
            if folder is None:
                return
            trainer.save_checkpoint(folder / CHECKPOINT_NAME)
            self.paused = True

        @staticmethod
        def resume_checkpoint() -> str | None:
            """The checkpoint to pass to `trainer.fit(ckpt_path=...)`, or None for a new trial."""
            folder = resume_from()
            if folder is None or not (folder / CHECKPOINT_NAME).is_file():
                return None
            return str(folder / CHECKPOINT_NAME)

    # Named as the module's __getattr__ finds them, so that they pickle.
    RngStates.__qualname__ = RngStates.__name__ = "_RngStates"
    BashtCallback.__qualname__ = "BashtCallback"
    for cls in (RngStates, BashtCallback):
        cls.__module__ = __name__
    return RngStates, BashtCallback


def _check_monitor(monitor: str | None, metrics: Mapping[str, float], who: str) -> None:
    if monitor is not None and monitor not in metrics:
        logged = ", ".join(sorted(metrics)) or "nothing"
        raise WorkloadError(
            f"{who}: monitor {monitor!r} was not logged (logged: {logged}); "
            "log it with self.log() in validation_step"
        )


def __getattr__(name: str) -> Any:
    if name == "BashtCallback":
        return _callback_classes()[1]
    if name == "_RngStates":
        return _callback_classes()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Without Lightning's notes on hardware and data loader workers: a trial prints nothing."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
            warnings.filterwarnings("ignore", message=r".*LeafSpec.*is deprecated.*")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


# -- the ready workload --------------------------------------------------------------------


class LightningWorkload:
    """The ready workload `lightning`: a LightningModule (and a LightningDataModule) as they are.

    Params: `module` and `datamodule` (`package.module:Class`), `monitor` (a metric that
    `validate()` must report) and `trainer` (more `lightning.Trainer` arguments, such as
    `precision` or `gradient_clip_val`). A trial's config goes to the classes as keyword
    arguments, each the keys its `__init__` names (all of them with `**kwargs`), or whole to a
    `from_config(config)` classmethod where a class has one.

    `train(n)` runs `trainer.fit` for n more epochs from the last checkpoint, validation
    included as the module defines it; `validate()` returns what the last epoch logged
    (`trainer.callback_metrics`). State is Lightning's checkpoint with the random generators in it.
    """

    workload_name = "lightning"

    def __init__(
        self,
        seed: int = 0,
        *,
        module: str,
        datamodule: str | None = None,
        monitor: str | None = None,
        trainer: Mapping[str, Any] | None = None,
    ) -> None:
        where = f"{self.workload_name}: workload.params"
        pl = _lightning()
        self.seed = int(seed)
        self.names = {"module": module, "datamodule": datamodule}
        self._module_cls = load_target(module, f"{where}.module")
        self._data_cls = (
            None if datamodule is None else load_target(datamodule, f"{where}.datamodule")
        )
        if monitor is not None and not isinstance(monitor, str):
            raise WorkloadError(f"{where}.monitor: expected a metric's name, got {monitor!r}")
        self.monitor = monitor
        self._trainer_kwargs = _trainer_kwargs(pl, trainer, f"{where}.trainer")
        self._model: Any = None
        self._data: Any = None
        self._start_rng: dict[str, Any] = {}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._has_checkpoint = False
        self._metrics: dict[str, float] | None = None
        self._device: tuple[str, Any] = ("cpu", 1)
        self._threads = 1
        self.epochs_done = 0

    @classmethod
    def prepare(cls, seed: int = 0, **params: Any) -> None:
        """The setup phase: import Lightning and the user's module once per worker."""
        cls(seed=seed, **params)

    def about(self) -> dict[str, Any]:
        """Table 1's t, ts, m, ta (see `basht.workloads.base.Workload`)."""
        data = self.names["datamodule"]
        return {
            "dataset": f"the user's own, from {data}" if data else "the module's own dataloaders",
            "dataset_mb": None,
            "model": f"LightningModule {self.names['module']}",
            "training": "Lightning's fit loop with the module's configure_optimizers",
        }

    def set_threads(self, threads: int) -> None:
        """A new width between epochs (Fluid)."""
        import torch

        self._threads = max(1, int(threads))
        torch.set_num_threads(self._threads)

    # -- Workload protocol -------------------------------------------------------------------

    def load(self, config: dict[str, Any], resources: TrialResources) -> None:
        """Build the module (and data module) for `config`, seeded by `resources.seed`."""
        pl = _lightning()
        where = f"{self.workload_name}: config"
        self.set_threads(resources.cpus)
        self._device = _device(resources)
        takers: dict[str, Any] = {"module": _taker(self._module_cls)}
        if self._data_cls is not None:
            takers["datamodule"] = _taker(self._data_cls)
        shares = share_out({k: plain(v) for k, v in config.items()}, takers, where)
        pl.seed_everything(int(resources.seed) % 2**32, workers=True, verbose=False)
        if self._data_cls is not None:
            self._data = _build(self._data_cls, shares["datamodule"], where)
            if not isinstance(self._data, pl.LightningDataModule):
                raise WorkloadError(
                    f"{where}: {self.names['datamodule']} is not a LightningDataModule"
                )
        self._model = _build(self._module_cls, shares["module"], where)
        if not isinstance(self._model, pl.LightningModule):
            raise WorkloadError(f"{where}: {self.names['module']} is not a LightningModule")
        # Every fit starts from here: `setup()` draws the same (a random_split, say) each time,
        # and the checkpoint then restores the generators where training left them.
        self._start_rng = _rng_states()
        self.close()  # a workload loaded again starts from an empty folder
        self._tmp = tempfile.TemporaryDirectory(prefix="basht-lightning-")
        self._has_checkpoint = False
        self._metrics = None
        self.epochs_done = 0

    def train(self, epochs: int) -> None:
        """`epochs` more epochs: a `trainer.fit` resumed from the last checkpoint."""
        self._require_loaded()
        if epochs < 0:
            raise WorkloadError(f"{self.workload_name}: epochs must be >= 0, got {epochs}")
        if epochs == 0:
            return
        trainer = self._trainer(max_epochs=self.epochs_done + epochs)
        resume = str(self._checkpoint) if self._has_checkpoint else None
        _set_rng_states(self._start_rng)
        with _quiet():
            trainer.fit(self._model, datamodule=self._data, ckpt_path=resume, **_trusted(trainer))
            trainer.save_checkpoint(self._checkpoint)
        self._has_checkpoint = True
        self.epochs_done = int(trainer.current_epoch)
        self._metrics = floats(trainer.callback_metrics)

    def validate(self) -> dict[str, float]:
        """What the last epoch's validation logged; a `trainer.validate` if none ran since load."""
        self._require_loaded()
        if self._metrics is None:
            trainer = self._trainer(max_epochs=max(1, self.epochs_done))
            _set_rng_states(self._start_rng)
            with _quiet():
                trainer.validate(self._model, datamodule=self._data, verbose=False)
            self._metrics = floats(trainer.callback_metrics)
        _check_monitor(self.monitor, self._metrics, self.workload_name)
        return dict(self._metrics)

    def test(self) -> dict[str, float]:
        """What the module's `test_step` logs, by `trainer.test`."""
        self._require_loaded()
        from lightning.fabric.utilities.exceptions import MisconfigurationException

        trainer = self._trainer(max_epochs=max(1, self.epochs_done))
        _set_rng_states(self._start_rng)
        try:
            with _quiet():
                trainer.test(self._model, datamodule=self._data, verbose=False)
        except MisconfigurationException as err:
            raise WorkloadError(f"{self.workload_name}: {' '.join(str(err).split())}") from None
        return floats(trainer.callback_metrics)

    def state_dict(self) -> dict[str, Any]:
        """Lightning's checkpoint (as bytes in a uint8 tensor) and the epochs done."""
        import torch

        self._require_loaded()
        data = self._checkpoint.read_bytes() if self._has_checkpoint else b""
        return {
            "format": _FORMAT,
            "epochs": self.epochs_done,
            "checkpoint": torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else None,
        }

    def load_state_dict(self, state: Any) -> None:
        """Continue from `state`: the next `train` resumes Lightning's fit from its checkpoint."""
        import torch

        self._require_loaded()
        if not isinstance(state, Mapping) or state.get("format") != _FORMAT:
            raise WorkloadError(f"{self.workload_name}: not a checkpoint of this workload")
        self.epochs_done = int(state["epochs"])
        self._metrics = None
        if state["checkpoint"] is None:
            return
        self._checkpoint.write_bytes(state["checkpoint"].numpy().tobytes())
        self._has_checkpoint = True
        # The weights now, for a validate() or test() before any train().
        checkpoint = torch.load(self._checkpoint, map_location="cpu", weights_only=False)
        self._model.on_load_checkpoint(checkpoint)
        try:
            self._model.load_state_dict(checkpoint["state_dict"])
        except (KeyError, RuntimeError) as err:
            msg = " ".join(str(err).split())
            raise WorkloadError(
                f"{self.workload_name}: checkpoint does not fit the module ({msg})"
            ) from None

    def close(self) -> None:
        """Remove the checkpoint folder."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- helpers -----------------------------------------------------------------------------

    @property
    def _checkpoint(self) -> Path:
        assert self._tmp is not None
        return Path(self._tmp.name) / CHECKPOINT_NAME

    def _require_loaded(self) -> None:
        if self._model is None or self._tmp is None:
            raise WorkloadError(f"{self.workload_name}: call load(config, resources) first")

    def _trainer(self, max_epochs: int) -> Any:
        pl = _lightning()
        rng_states = _callback_classes()[0]
        accelerator, devices = self._device
        with _quiet():
            return pl.Trainer(
                max_epochs=max_epochs,
                accelerator=accelerator,
                devices=devices,
                logger=False,
                callbacks=[rng_states()],
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
                default_root_dir=self._tmp.name if self._tmp else None,
                **{"num_sanity_val_steps": 0, **self._trainer_kwargs},
            )


def _taker(cls: Any) -> Any:
    """Who takes a class's share of the config: all of it with `from_config`, else its signature."""
    return None if callable(getattr(cls, "from_config", None)) else cls


def _build(cls: Any, kwargs: dict[str, Any], where: str) -> Any:
    from_config = getattr(cls, "from_config", None)
    if callable(from_config):
        return call_with(from_config, {"config": kwargs}, where)
    return call_with(cls, kwargs, where)


def _trainer_kwargs(pl: ModuleType, given: Any, where: str) -> dict[str, Any]:
    """`params.trainer`, checked against `lightning.Trainer`'s arguments."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise WorkloadError(f"{where}: expected a mapping of Trainer arguments, got {given!r}")
    takes = set(inspect.signature(pl.Trainer.__init__).parameters) - {"self"}
    for key in given:
        if key in _OWNED:
            raise WorkloadError(
                f"{where}.{key}: set by Basht (the budget and the trial's resources)"
            )
        if key not in takes:
            raise WorkloadError(f"{where}.{key}: not an argument of lightning.Trainer")
    return dict(given)


def _device(resources: TrialResources) -> tuple[str, Any]:
    """Lightning's `accelerator` and `devices` for the trial's device (one per trial)."""
    if resources.accelerator != "gpu" or not resources.device.startswith("cuda"):
        return "cpu", 1
    import torch

    _, _, index = resources.device.partition(":")
    device = int(index or 0)
    torch.cuda.set_per_process_memory_fraction(resources.device_share, device)
    return "gpu", [device]


@functools.cache
def _trusted_fit(fit: Any) -> bool:
    return "weights_only" in inspect.signature(fit).parameters


def _trusted(trainer: Any) -> dict[str, Any]:
    """The checkpoint is this workload's own (read back from Basht's owner-only store), so it may
    hold what `torch.load(weights_only=True)` refuses, such as hyperparameters of any type."""
    return {"weights_only": False} if _trusted_fit(type(trainer).fit) else {}
