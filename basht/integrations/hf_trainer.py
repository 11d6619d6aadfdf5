"""The Hugging Face Trainer in Basht: the ready workload `hf-trainer` tunes a model with
`transformers.Trainer` as it is, and `BashtCallback` lets a Trainer script of one's own run as a
Basht trial.

Both pause and resume through the Trainer's own checkpoint folder (`checkpoint-<step>`: weights,
`optimizer.pt`, `scheduler.pt`, `rng_state.pth`, `trainer_state.json`), which
`trainer.train(resume_from_checkpoint=...)` continues from, random generators included: a trial
paused and resumed ends with the metrics of one trained straight through (bitwise on a CPU; see
docs/how-to/hf-trainer.md).

transformers is imported on first use: `transformers is not installed: pip install
'basht[transformers]'` when it (or accelerate, which the Trainer needs) is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import shutil
import tempfile
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
__all__ = ["CHECKPOINT_NAME", "BashtCallback", "TrainerWorkload"]  # noqa: F822

log = logging.getLogger(__name__)

#: The folder a paused script's Trainer checkpoint is copied to, in `checkpoint_dir()`.
CHECKPOINT_NAME = "checkpoint"
_FORMAT = "basht-hf-trainer/1"
#: TrainingArguments the workload sets itself (the rest may come from the config or `params.args`).
_OWNED = (
    "output_dir",
    "num_train_epochs",
    "max_steps",
    "use_cpu",
    "report_to",
    "seed",
    "save_strategy",
    "save_steps",
    "save_total_limit",
    "save_only_model",
    "eval_strategy",
    "eval_steps",
    "load_best_model_at_end",
    "push_to_hub",
    "disable_tqdm",
)
#: What `trainer.evaluate()` says of its own speed, left out: Basht times every phase itself.
_TIMINGS = ("_runtime", "_samples_per_second", "_steps_per_second", "_model_preparation_time")
#: Schedules that do not depend on how many epochs the run has (see `TrainerWorkload`).
_FLAT = ("constant", "constant_with_warmup")


def _transformers() -> ModuleType:
    module = require("transformers", "transformers")
    require("accelerate", "transformers")  # the Trainer's, missing only in odd installs
    return module


# -- the callback, built on first use (it subclasses transformers' TrainerCallback) ------------


@functools.cache
def _callback_classes() -> tuple[type, type]:
    tf = _transformers()

    class StopAt(tf.TrainerCallback):
        """Ends `trainer.train` after `target` epochs, saving a checkpoint there, so that the
        number of epochs (the schedule's horizon) need not change from one call to the next."""

        def __init__(self, target: int) -> None:
            self.target = target

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if state.epoch is not None and round(state.epoch) >= self.target:
                control.should_training_stop = True
                control.should_save = True
            return control

    class BashtCallback(tf.TrainerCallback):
        """Reports each evaluation of `trainer.train` to Basht and does what Basht answers.

        `on_evaluate` reports the eval metrics (`step`: the epoch with `eval_strategy="epoch"`,
        else the global step); on STOP it sets `control.should_training_stop`; on PAUSE it also
        has the Trainer save its checkpoint, copied into `checkpoint_dir() / "checkpoint"`. Pass
        `resume_checkpoint()` to `trainer.train(resume_from_checkpoint=...)`: None unless the
        trial is resumed. Outside a trial, and for evaluations outside `trainer.train`, it does
        nothing. `metric`, when given, must be among the eval metrics.
        """

        def __init__(self, metric: str | None = None) -> None:
            self.metric = metric
            self.decision = Decision.CONTINUE  # the last answer
            self.paused = False  # saved and stopped on PAUSE
            self._training = False
            self._pausing = False

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._training = True

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._training = False

        def on_evaluate(
            self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any
        ) -> Any:
            if not self._training or not in_trial():
                return control
            values = floats(metrics or {})
            _check_metric(self.metric, values, "BashtCallback")
            by_epoch = args.eval_strategy == "epoch" and state.epoch is not None
            step = round(state.epoch) if by_epoch else int(state.global_step)
            self.decision = report(step=step, **values)
            if self.decision is not Decision.CONTINUE:
                control.should_training_stop = True
            if self.decision is Decision.PAUSE:
                control.should_save = True
                self._pausing = True
            return control

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not self._pausing:
                return
            self._pausing = False
            folder = pause_folder()
            if folder is None:
                return
            saved = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            shutil.copytree(saved, folder / CHECKPOINT_NAME, dirs_exist_ok=True)
            self.paused = True

        @staticmethod
        def resume_checkpoint() -> str | None:
            """The folder for `trainer.train(resume_from_checkpoint=...)`, or None."""
            folder = resume_from()
            if folder is None or not (folder / CHECKPOINT_NAME).is_dir():
                return None
            return str(folder / CHECKPOINT_NAME)

    # Named as the module's __getattr__ finds them, so that they pickle.
    StopAt.__qualname__ = StopAt.__name__ = "_StopAt"
    BashtCallback.__qualname__ = "BashtCallback"
    for cls in (StopAt, BashtCallback):
        cls.__module__ = __name__
    return StopAt, BashtCallback


def _check_metric(metric: str | None, metrics: Mapping[str, float], who: str) -> None:
    if metric is not None and metric not in metrics:
        found = ", ".join(sorted(metrics)) or "nothing"
        raise WorkloadError(
            f"{who}: metric {metric!r} is not among the eval metrics ({found}); "
            "compute_metrics names them, prefixed with 'eval_'"
        )


def __getattr__(name: str) -> Any:
    if name == "BashtCallback":
        return _callback_classes()[1]
    if name == "_StopAt":
        return _callback_classes()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextlib.contextmanager
def _quiet(tf: ModuleType) -> Iterator[None]:
    """Without transformers' info lines and progress bars: a trial prints nothing."""
    logs = tf.utils.logging
    verbosity, bars = logs.get_verbosity(), logs.is_progress_bar_enabled()
    logs.set_verbosity_error()
    logs.disable_progress_bar()
    try:
        yield
    finally:
        logs.set_verbosity(verbosity)
        if bars:
            logs.enable_progress_bar()


# -- the ready workload --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Splits:
    train: Any
    validation: Any
    test: Any = None
    data_collator: Any = None


class TrainerWorkload:
    """The ready workload `hf-trainer`: a model trained by `transformers.Trainer` as it is.

    Params: `model` and `data` (`package.module:function`), `compute_metrics` (the Trainer's,
    optional), `metric` (an eval metric `validate()` must report), `max_epochs` (the learning
    rate schedule's horizon) and `args` (more `TrainingArguments`). A trial's config keys that
    are `TrainingArguments` (learning_rate, weight_decay, per_device_train_batch_size, ...) go
    there; the others to the model function, and the data function, that name them. The data
    function returns `{"train": ..., "validation": ..., "test": ...}` (test and a
    `data_collator` optional) or a tuple `(train, validation[, test])`; it is given the
    experiment's `seed` when it takes one.

    `train(n)` continues `trainer.train` from the Trainer's own last checkpoint for n more
    epochs. The schedule runs over `num_train_epochs = max_epochs`; without `max_epochs` it
    would stretch with every call, so only a flat schedule is allowed then (the default:
    `constant`). `validate()` is `trainer.evaluate()`; state is the checkpoint folder's files.
    """

    workload_name = "hf-trainer"

    def __init__(
        self,
        seed: int = 0,
        *,
        model: str,
        data: str,
        compute_metrics: str | None = None,
        metric: str | None = None,
        max_epochs: int | None = None,
        args: Mapping[str, Any] | None = None,
    ) -> None:
        where = f"{self.workload_name}: workload.params"
        tf = _transformers()
        self.seed = int(seed)
        self.names = {"model": model, "data": data}
        self._model_fn = load_target(model, f"{where}.model")
        self._data_fn = load_target(data, f"{where}.data")
        self._metrics_fn = (
            None
            if compute_metrics is None
            else load_target(compute_metrics, f"{where}.compute_metrics")
        )
        if metric is not None and not isinstance(metric, str):
            raise WorkloadError(f"{where}.metric: expected a metric's name, got {metric!r}")
        if max_epochs is not None and (
            isinstance(max_epochs, bool) or not isinstance(max_epochs, int) or max_epochs < 1
        ):
            raise WorkloadError(
                f"{where}.max_epochs: expected a whole number >= 1, got {max_epochs!r}"
            )
        self.metric, self.max_epochs = metric, max_epochs
        self._fields = {f.name for f in dataclasses.fields(tf.TrainingArguments) if f.init}
        self._fixed = self._check_args(dict(args or {}), f"{where}.args")
        self._model: Any = None
        self._splits: _Splits | None = None
        self._args: dict[str, Any] = {}
        self._trainer: Any = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._last: Path | None = None  # the Trainer's latest checkpoint folder
        self._threads = 1
        self.epochs_done = 0

    @classmethod
    def prepare(cls, seed: int = 0, **params: Any) -> None:
        """The setup phase: import transformers and the user's module once per worker."""
        cls(seed=seed, **params)

    def about(self) -> dict[str, Any]:
        """Table 1's t, ts, m, ta (see `basht.workloads.base.Workload`)."""
        return {
            "dataset": f"the user's own, from {self.names['data']}",
            "dataset_mb": None,
            "model": f"built by {self.names['model']}",
            "training": "transformers.Trainer (its default optimizer unless the config says)",
        }

    def set_threads(self, threads: int) -> None:
        """A new width between epochs (Fluid)."""
        import torch

        self._threads = max(1, int(threads))
        torch.set_num_threads(self._threads)

    # -- Workload protocol -------------------------------------------------------------------

    def load(self, config: dict[str, Any], resources: TrialResources) -> None:
        """Read the data, build the model (seeded by `resources.seed`) and the Trainer's args."""
        tf = _transformers()
        where = f"{self.workload_name}: config"
        self.set_threads(resources.cpus)
        values = {k: plain(v) for k, v in config.items()}
        takers = {
            "TrainingArguments": self._fields - set(_OWNED),
            "model": self._model_fn,
            "data": self._data_fn,
        }
        owned = sorted(values.keys() & set(_OWNED))
        if owned:
            raise WorkloadError(
                f"{where}: {owned[0]!r} is set by Basht (the budget and the trial's resources)"
            )
        shares = share_out(values, takers, where)
        self._args = {**self._fixed, **shares["TrainingArguments"]}
        self._args.setdefault("lr_scheduler_type", "linear" if self.max_epochs else "constant")
        self._check_schedule(where)
        use_cpu = _use_device(resources)
        self._args.update(
            use_cpu=use_cpu,
            seed=int(resources.seed) % 2**32,  # numpy's seeds are 32-bit
            report_to=[],
            save_strategy="no",
            eval_strategy="no",
            disable_tqdm=True,
        )
        self._args.setdefault("logging_strategy", "no")
        self.close()  # a workload loaded again starts from an empty folder
        self._tmp = tempfile.TemporaryDirectory(prefix="basht-hf-trainer-")
        self._args["output_dir"] = self._tmp.name
        self._training_args(1, where)  # bad values fail here, not in the first epoch

        data_kwargs = dict(shares["data"])
        if "seed" not in data_kwargs and _takes(self._data_fn, "seed"):
            data_kwargs["seed"] = self.seed
        self._splits = _splits(call_with(self._data_fn, data_kwargs, where), self.names["data"])
        tf.set_seed(self._args["seed"])
        self._model = call_with(self._model_fn, shares["model"], where)
        self._trainer, self._last = None, None
        self.epochs_done = 0

    def train(self, epochs: int) -> None:
        """`epochs` more epochs: `trainer.train` resumed from the Trainer's last checkpoint."""
        tf = _transformers()
        self._require_loaded()
        if epochs < 0:
            raise WorkloadError(f"{self.workload_name}: epochs must be >= 0, got {epochs}")
        if epochs == 0:
            return
        target = self.epochs_done + epochs
        if self.max_epochs is not None and target > self.max_epochs:
            raise WorkloadError(
                f"{self.workload_name}: asked to train to epoch {target}, past "
                f"workload.params.max_epochs={self.max_epochs} (set it to search.max_budget)"
            )
        horizon = self.max_epochs or target
        trainer = self._new_trainer(horizon, target)
        resume = str(self._last) if self._last else None
        with _quiet(tf):
            trainer.train(resume_from_checkpoint=resume)
        self._last = Path(tf.trainer_utils.get_last_checkpoint(self._tmp.name))
        for older in self._last.parent.glob(f"{tf.trainer_utils.PREFIX_CHECKPOINT_DIR}-*"):
            if older != self._last:  # only the last is ever resumed from
                shutil.rmtree(older, ignore_errors=True)
        self._trainer = trainer
        self.epochs_done = round(trainer.state.epoch or target)

    def validate(self) -> dict[str, float]:
        """`trainer.evaluate()` on the validation split."""
        tf = _transformers()
        trainer = self._evaluator()
        with _quiet(tf):
            metrics = _model_metrics(trainer.evaluate())
        _check_metric(self.metric, metrics, self.workload_name)
        return metrics

    def test(self) -> dict[str, float]:
        """`trainer.evaluate()` on the test split, its metrics prefixed `test_`."""
        tf = _transformers()
        trainer = self._evaluator()
        assert self._splits is not None
        if self._splits.test is None:
            raise WorkloadError(f"{self.workload_name}: {self.names['data']} gives no test split")
        with _quiet(tf):
            metrics = trainer.evaluate(eval_dataset=self._splits.test, metric_key_prefix="test")
        return _model_metrics(metrics)

    def state_dict(self) -> dict[str, Any]:
        """The files of the Trainer's last checkpoint folder (as uint8 tensors), and epochs done."""
        import torch

        self._require_loaded()
        files: dict[str, Any] = {}
        if self._last is not None:
            for path in sorted(p for p in self._last.rglob("*") if p.is_file()):
                data = bytearray(path.read_bytes())
                files[path.relative_to(self._last).as_posix()] = (
                    torch.frombuffer(data, dtype=torch.uint8)
                    if data
                    else torch.empty(0, dtype=torch.uint8)
                )
        name = self._last.name if self._last else None
        return {"format": _FORMAT, "epochs": self.epochs_done, "name": name, "files": files}

    def load_state_dict(self, state: Any) -> None:
        """Continue from `state`: the folder is written back, the weights loaded from it."""
        self._require_loaded()
        if not isinstance(state, Mapping) or state.get("format") != _FORMAT:
            raise WorkloadError(f"{self.workload_name}: not a checkpoint of this workload")
        assert self._tmp is not None
        self.epochs_done = int(state["epochs"])
        self._trainer, self._last = None, None
        if not state["name"]:
            return
        folder = Path(self._tmp.name) / Path(state["name"]).name
        for relative, data in state["files"].items():
            path = folder / relative
            if not path.resolve().is_relative_to(folder.resolve()):
                raise WorkloadError(f"{self.workload_name}: checkpoint names a file outside it")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.numpy().tobytes())
        self._last = folder
        # The weights now, for an evaluate() before any train(): the Trainer's own loader.
        trainer = self._new_trainer(max(1, self.epochs_done), self.epochs_done)
        with _quiet(_transformers()):
            trainer._load_from_checkpoint(str(folder))
        trainer.state.epoch = float(self.epochs_done)  # as evaluate() reports it after training
        self._trainer = trainer

    def close(self) -> None:
        """Remove the output folder."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- helpers -----------------------------------------------------------------------------

    def _require_loaded(self) -> None:
        if self._model is None or self._tmp is None:
            raise WorkloadError(f"{self.workload_name}: call load(config, resources) first")

    def _check_args(self, args: dict[str, Any], where: str) -> dict[str, Any]:
        for key in args:
            if key in _OWNED:
                raise WorkloadError(
                    f"{where}.{key}: set by Basht (the budget and the trial's resources)"
                )
            if key not in self._fields:
                raise WorkloadError(
                    f"{where}.{key}: not an argument of transformers.TrainingArguments"
                )
        return {k: plain(v) for k, v in args.items()}

    def _check_schedule(self, where: str) -> None:
        """Without `max_epochs` each call's `num_train_epochs` is the epochs so far, so a
        schedule over the run would be recomputed every epoch: only flat ones are allowed."""
        if self.max_epochs is not None:
            return
        schedule = str(
            getattr(self._args["lr_scheduler_type"], "value", self._args["lr_scheduler_type"])
        )
        warmup = self._args.get("warmup_steps", 0)
        if schedule not in _FLAT or (isinstance(warmup, float) and 0 < warmup < 1):
            raise WorkloadError(
                f"{where}: lr_scheduler_type {schedule!r} (or a warmup ratio) spans the whole run: "
                "set workload.params.max_epochs to its length (search.max_budget)"
            )

    def _training_args(self, epochs: int, where: str) -> Any:
        tf = _transformers()
        try:
            return tf.TrainingArguments(**self._args, num_train_epochs=epochs)
        except (TypeError, ValueError) as err:
            raise WorkloadError(
                f"{where}: TrainingArguments: {' '.join(str(err).split())}"
            ) from None

    def _new_trainer(self, horizon: int, target: int) -> Any:
        tf = _transformers()
        assert self._splits is not None
        stop_at = _callback_classes()[0]
        with _quiet(tf):
            trainer = tf.Trainer(
                model=self._model,
                args=self._training_args(horizon, f"{self.workload_name}: config"),
                train_dataset=self._splits.train,
                eval_dataset=self._splits.validation,
                data_collator=self._splits.data_collator,
                compute_metrics=self._metrics_fn,
                callbacks=[stop_at(target)],
            )
        trainer.remove_callback(tf.trainer_callback.PrinterCallback)
        return trainer

    def _evaluator(self) -> Any:
        self._require_loaded()
        if self._trainer is None:
            self._trainer = self._new_trainer(max(1, self.epochs_done), self.epochs_done)
        return self._trainer


def _splits(value: Any, source: str) -> _Splits:
    """The data function's result as train/validation/test."""
    if isinstance(value, Mapping):
        train = value.get("train")
        validation = value.get("validation", value.get("eval"))
        test, collator = value.get("test"), value.get("data_collator")
    elif isinstance(value, tuple | list) and len(value) in (2, 3):
        train, validation, test, collator = *value, *([None] * (4 - len(value)))
    else:
        train = validation = test = collator = None
    if train is None or validation is None:
        raise WorkloadError(
            f"{source}: expected {{'train': ..., 'validation': ..., 'test': ...}} or "
            f"(train, validation[, test]), got {type(value).__name__}"
        )
    return _Splits(train, validation, test, collator)


def _model_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The evaluation's numbers about the model: its timings and the epoch count left out."""
    return {k: v for k, v in floats(metrics).items() if k != "epoch" and not k.endswith(_TIMINGS)}


def _takes(call: Any, name: str) -> bool:
    try:
        return name in inspect.signature(call).parameters
    except (TypeError, ValueError):
        return False


def _use_device(resources: TrialResources) -> bool:
    """Whether the Trainer runs on the CPU; a GPU trial's device is made the current one."""
    if resources.accelerator != "gpu" or not resources.device.startswith("cuda"):
        return True
    import torch

    _, _, index = resources.device.partition(":")
    device = int(index or 0)
    torch.cuda.set_device(device)
    torch.cuda.set_per_process_memory_fraction(resources.device_share, device)
    return False
