"""lcbench: YAHPO Gym's LCBench surrogate, the learning curves of an MLP on 34 OpenML tasks.

The surrogate (an ONNX model, `data/lcbench/`, Apache-2.0, see its NOTICE.md) predicts, for one
configuration of Auto-PyTorch's funnel-shaped MLP on one task, the metrics after each of epochs
1..52 and the cumulative training time. No data is read and nothing is trained: a trial costs
an ONNX call per configuration (every epoch at once) and, on a real executor, a sleep of the
predicted time divided by `time_scale`; on the simulated executor (`LCBenchCurve`) the predicted
time moves the virtual clock.

Inputs are encoded as YAHPO Gym 1.0.2 encodes them (`yahpo_gym/benchmark_set.py`,
`BenchmarkSet._config_to_xs`; the names and their order in `yahpo_gym/benchmarks/lcbench.py`):
`x_cont` holds the raw values (no log transform; the model has its own) of epoch, batch_size,
learning_rate, momentum, weight_decay, num_layers, max_units, max_dropout as float32; `x_cat`
the task's integer code from `encoding.json`, as int32.
"""

from __future__ import annotations

import functools
import json
import math
import numbers
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from basht.errors import WorkloadError
from basht.workloads.base import Resources

__all__ = [
    "EPOCHS",
    "HYPERPARAMETERS",
    "LCBench",
    "LCBenchCurve",
    "OUTPUTS",
    "predict",
    "space",
    "tasks",
]

DATA = Path(__file__).resolve().with_name("data") / "lcbench"
NEEDS_ONNXRUNTIME = "workload lcbench needs onnxruntime: pip install 'basht[lcbench]'"

#: The budget: the surrogate predicts epochs 1..52 (LCBench trained every network for 50 epochs
#: plus its evaluations; config_space.json's `epoch` runs 1..52).
EPOCHS = 52
#: The tunable inputs, in the order the model reads them after `epoch` (yahpo_gym's cont_names).
HYPERPARAMETERS = (
    "batch_size",
    "learning_rate",
    "momentum",
    "weight_decay",
    "num_layers",
    "max_units",
    "max_dropout",
)
#: The model's outputs, in its order (yahpo_gym's y_names): `time` is cumulative seconds,
#: `val_accuracy` a percentage, the balanced accuracies fractions.
OUTPUTS = (
    "time",
    "val_accuracy",
    "val_cross_entropy",
    "val_balanced_accuracy",
    "test_cross_entropy",
    "test_balanced_accuracy",
)
_VALIDATION = ("val_accuracy", "val_cross_entropy", "val_balanced_accuracy")
_TEST = ("test_balanced_accuracy", "test_cross_entropy")
_MODES = {"val_accuracy": "max", "val_balanced_accuracy": "max", "val_cross_entropy": "min"}
# config_space.json's bounds are exp(log(bound)) (1e-4 comes out as 0.00010000000000000009):
# a value written as the bound itself must pass.
_REL_TOL = 1e-9


@functools.cache
def _config_space() -> tuple[tuple[str, ...], dict[str, dict[str, Any]], dict[str, int]]:
    """(tasks, {hyperparameter: its config_space.json entry}, {task: the model's code})."""
    space = json.loads((DATA / "config_space.json").read_text(encoding="utf-8"))
    entries = {hp["name"]: hp for hp in space["hyperparameters"]}
    codes = json.loads((DATA / "encoding.json").read_text(encoding="utf-8"))["OpenML_task_id"]
    # encoding.json also codes a task (167083) that config_space.json does not offer; YAHPO Gym
    # refuses it (set_instance checks the config space), and so do we.
    names = tuple(str(t) for t in entries["OpenML_task_id"]["choices"])
    return names, {name: entries[name] for name in HYPERPARAMETERS}, codes


def tasks() -> tuple[str, ...]:
    """The 34 OpenML task ids the surrogate covers, as strings ("3945", ...)."""
    return _config_space()[0]


def space() -> dict[str, dict[str, Any]]:
    """The surrogate's seven hyperparameters as an experiment file's `space` (its ranges and log
    scales, from config_space.json, the bounds rounded as param_set.R writes them)."""
    out: dict[str, dict[str, Any]] = {}
    for name, hp in _config_space()[1].items():
        kind = "int" if hp["type"] == "uniform_int" else "float"
        low, high = (float(f"{hp[k]:.12g}") for k in ("lower", "upper"))
        if kind == "int":
            low, high = int(low), int(high)
        out[name] = {"type": kind, "low": low, "high": high, "log": bool(hp["log"])}
    return out


def _check_task(task: Any, where: str) -> str:
    names = tasks()
    if isinstance(task, bool) or not isinstance(task, str | numbers.Integral):
        given = None
    else:
        given = str(task).strip()
    if given not in names:
        raise WorkloadError(
            f"{where}: unknown task {task!r} (one of the surrogate's {len(names)} OpenML tasks: "
            f"{', '.join(names[:5])}, ..., {names[-1]})"
        )
    return given


def _check_time_scale(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise WorkloadError(
            f"{where}: must be a number > 0 (surrogate seconds per real second; .inf: no "
            f"sleeping), got {value!r}"
        )
    return float(value)


def _encode(config: Mapping[str, Any], where: str) -> tuple[float, ...]:
    """The seven inputs in the model's order; a key the config leaves out takes the surrogate's
    default (config_space.json), as a fixed value of a space that does not tune it."""
    entries = _config_space()[1]
    for key in config:
        if key not in entries:
            raise WorkloadError(
                f"{where}: unknown key {key!r} (expected one of: {', '.join(HYPERPARAMETERS)}; "
                "the budget is the epoch)"
            )
    values = []
    for name, hp in entries.items():
        value = config.get(name, hp["default"])
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise WorkloadError(f"{where}: {name} must be a number, got {value!r}")
        x = float(value)
        if hp["type"] == "uniform_int" and not x.is_integer():
            raise WorkloadError(f"{where}: {name} must be an integer, got {value!r}")
        low, high = float(hp["lower"]), float(hp["upper"])
        if not (math.isfinite(x) and low - _REL_TOL * abs(low) <= x <= high + _REL_TOL * abs(high)):
            raise WorkloadError(
                f"{where}: {name} must lie in the surrogate's range [{low:.6g}, {high:.6g}], "
                f"got {value!r}"
            )
        values.append(x)
    return tuple(values)


_SESSION_LOCK = threading.Lock()
_SESSION: Any = None


def _session() -> Any:
    """The process's one ONNX session, made on first use. One thread: a call predicts 52 rows of
    a small MLP, and trials run side by side in their own processes."""
    global _SESSION
    if _SESSION is None:
        with _SESSION_LOCK:
            if _SESSION is None:
                try:
                    import onnxruntime
                except ImportError:
                    raise WorkloadError(NEEDS_ONNXRUNTIME) from None
                options = onnxruntime.SessionOptions()
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                _SESSION = onnxruntime.InferenceSession(
                    str(DATA / "model.onnx"),
                    sess_options=options,
                    providers=["CPUExecutionProvider"],
                )
    return _SESSION


def _run(task: str, rows: np.ndarray) -> np.ndarray:
    """The model on `rows` ((n, 8) float32: epoch then the seven inputs): (n, 6) float32."""
    code = _config_space()[2][task]
    x_cat = np.full((len(rows), 1), code, dtype=np.int32)
    return _session().run(None, {"x_cat": x_cat, "x_cont": rows})[0]


def predict(task: str | int, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Every epoch of each configuration, in one call: (len(configs), 52, 6) float32, the last
    axis in `OUTPUTS` order. Missing keys take the surrogate's defaults."""
    task = _check_task(task, "task")
    values = np.array([_encode(c, "config") for c in configs], dtype=np.float32).reshape(-1, 7)
    epochs = np.arange(1, EPOCHS + 1, dtype=np.float32)
    rows = np.empty((len(values), EPOCHS, 8), dtype=np.float32)
    rows[:, :, 0] = epochs
    rows[:, :, 1:] = values[:, None, :]
    return _run(task, rows.reshape(-1, 8)).reshape(len(values), EPOCHS, len(OUTPUTS))


#: Per task, what the surrogate gives at the last epoch over a large random sample: the best,
#: worst and median validation accuracy (the reference regret is measured against).
OPTIMA = DATA / "optima.json"
REFERENCE_SAMPLES = 100_000


def reference(task: str | int, samples: int = REFERENCE_SAMPLES, seed: int = 0) -> dict[str, Any]:
    """The best, worst and median `val_accuracy` at epoch 52 of `samples` configurations drawn
    uniformly (log-uniformly where the space says) from the surrogate's space: the optimum a
    search's regret is measured against, found as the YAHPO and HPOBench papers do, by sampling."""
    task = _check_task(task, "task")
    rng = np.random.default_rng(seed)
    rows = np.empty((samples, 8), dtype=np.float32)
    rows[:, 0] = EPOCHS
    for column, spec in enumerate(space().values(), start=1):
        low, high = float(spec["low"]), float(spec["high"])
        if spec.get("log"):
            drawn = np.exp(rng.uniform(np.log(low), np.log(high), samples))
        else:
            drawn = rng.uniform(low, high, samples)
        if spec["type"] == "int":
            drawn = np.clip(np.round(drawn), low, high)
        rows[:, column] = drawn
    if tuple(space()) != HYPERPARAMETERS:  # the columns are the model's inputs, in its order
        raise AssertionError(f"space order {tuple(space())} is not {HYPERPARAMETERS}")
    accuracy = _run(task, rows)[:, OUTPUTS.index("val_accuracy")].astype(np.float64)
    return {
        "best": float(accuracy.max()),
        "worst": float(accuracy.min()),
        "median": float(np.median(accuracy)),
        "samples": samples,
        "seed": seed,
        "epoch": EPOCHS,
    }


@functools.lru_cache(maxsize=1)
def optima() -> dict[str, dict[str, Any]]:
    """The stored `reference` of every task (written by `benchmarks/lcbench.py --optima`)."""
    try:
        return json.loads(OPTIMA.read_text())["tasks"]
    except (OSError, ValueError, KeyError):
        return {}


@functools.lru_cache(maxsize=4096)
def _curve(task: str, values: tuple[float, ...]) -> dict[str, tuple[float, ...]]:
    """One configuration's outputs at epochs 1..52 (index 0..51) as plain floats, plus
    `epoch_s`: each epoch's seconds, the rise of the running maximum of `time` (the surrogate's
    time dips now and then, by a few seconds in a few epochs per thousand; time spent stays spent)."""
    rows = np.empty((EPOCHS, 8), dtype=np.float32)
    rows[:, 0] = np.arange(1, EPOCHS + 1)
    rows[:, 1:] = values
    out = _run(task, rows).astype(np.float64)
    columns = {name: tuple(out[:, i].tolist()) for i, name in enumerate(OUTPUTS)}
    elapsed = np.maximum.accumulate(np.maximum(out[:, 0], 0.0))
    columns["epoch_s"] = tuple(np.diff(elapsed, prepend=0.0).tolist())
    return columns


class LCBench:
    """lcbench: the LCBench surrogate as a workload; a trial's budget is its epochs (1..52).

    Params: `task`, one of the surrogate's 34 OpenML task ids (default "3945"); `time_scale`
    (default 100), how much faster than predicted an epoch runs on a real executor: it sleeps the
    surrogate's seconds for the epoch divided by `time_scale` (`.inf`: no sleeping). At 100 a
    52-epoch trial on task 3945 sleeps about 2 s at the median configuration, 16 s for the
    slowest percent.

    Config keys: batch_size, learning_rate, momentum, weight_decay, num_layers, max_units,
    max_dropout, within the surrogate's ranges (`space()`); one left out takes its default.
    `validate()` gives val_accuracy (percent), val_cross_entropy and val_balanced_accuracy;
    `test()` test_balanced_accuracy and test_cross_entropy, at the epochs trained.
    """

    workload_name = "lcbench"
    metrics = _VALIDATION

    def __init__(self, seed: int = 0, task: str | int = "3945", time_scale: float = 100.0):
        where = f"{self.workload_name}: workload.params"
        self.seed = seed
        self.task = _check_task(task, f"{where}.task")
        self.time_scale = _check_time_scale(time_scale, f"{where}.time_scale")
        self.epoch = 0
        self._curve: dict[str, tuple[float, ...]] | None = None

    @classmethod
    def check_config(cls, config: Mapping[str, Any], where: str = "config") -> None:
        """The preflight hook (see `basht.workloads.base.Workload`): keys and ranges, no model."""
        _encode(config, where)

    @classmethod
    def prepare(cls, seed: int = 0, **params: Any) -> None:
        """The setup phase: import onnxruntime and read the model once per worker process."""
        _session()

    def about(self) -> dict[str, Any]:
        """Table 1's t, ts, m, ta (see `basht.workloads.base.Workload`)."""
        return {
            "dataset": f"OpenML task {self.task} (LCBench; predicted, no data is read)",
            "dataset_mb": None,
            "model": "funnel-shaped MLP (Auto-PyTorch), its curves from YAHPO Gym's LCBench "
            "surrogate",
            "training": "SGD, predicted: an epoch sleeps the surrogate's time / "
            f"{self.time_scale:g}",
        }

    def load(self, config: dict[str, Any], resources: Resources) -> None:
        """Predict the configuration's whole curve (one ONNX call, cached per process)."""
        self._curve = _curve(self.task, _encode(config, f"{self.workload_name}: config"))
        self.epoch = 0

    def _loaded(self) -> dict[str, tuple[float, ...]]:
        if self._curve is None:
            raise WorkloadError(f"{self.workload_name}: call load(config, resources) first")
        return self._curve

    def train(self, epochs: int) -> None:
        """Sleep the predicted seconds of the next `epochs` epochs, divided by `time_scale`."""
        curve = self._loaded()
        if isinstance(epochs, bool) or not isinstance(epochs, numbers.Integral) or epochs < 0:
            raise WorkloadError(f"{self.workload_name}: epochs must be an integer >= 0")
        end = self.epoch + int(epochs)
        if end > EPOCHS:
            raise WorkloadError(
                f"{self.workload_name}: the surrogate's curves end at epoch {EPOCHS}, not {end} "
                f"(search.max_budget must be at most {EPOCHS})"
            )
        seconds = sum(curve["epoch_s"][self.epoch : end]) / self.time_scale
        if seconds > 0.0:
            time.sleep(seconds)
        self.epoch = end

    def _at_epoch(self, names: Sequence[str]) -> dict[str, float]:
        curve = self._loaded()
        if self.epoch < 1:
            raise WorkloadError(f"{self.workload_name}: no metrics before the first epoch")
        return {name: curve[name][self.epoch - 1] for name in names}

    def validate(self) -> dict[str, float]:
        return self._at_epoch(_VALIDATION)

    def test(self) -> dict[str, float]:
        return self._at_epoch(_TEST)

    def state_dict(self) -> dict[str, Any]:
        return {"workload": self.workload_name, "task": self.task, "epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("workload") != self.workload_name:
            raise WorkloadError(f"{self.workload_name}: not a checkpoint of this workload")
        if state.get("task") != self.task:
            raise WorkloadError(
                f"{self.workload_name}: a checkpoint of task {state.get('task')}, not {self.task}"
            )
        self.epoch = int(state["epoch"])


# Where a configuration's predicted curve ends as its trial goes on: every call predicts one of
# these spans, whatever epoch was asked for, so a value never depends on how the trial got there.
_SPANS = (0, 4, 8, 16, 32, EPOCHS)


class _GrowingCurve:
    """One configuration's curve, predicted only as far as the trial has gone.

    Most simulated trials stop after an epoch or a few, and a call costs about 0.1 ms plus
    0.01 ms a row, so predicting all 52 epochs up front spent most of a simulation in the
    surrogate. The spans start at multiples of 4: the ONNX runtime's matrix kernel on x86-64
    computes rows in fours, and where it does a span's rows are exactly those of one call over
    all 52 epochs (float32 rounding apart elsewhere).
    """

    __slots__ = ("task", "values", "metric", "metric_values", "epoch_s", "_elapsed")

    def __init__(self, task: str, values: tuple[float, ...], metric: str):
        self.task, self.values, self.metric = task, values, metric
        self.metric_values: list[float] = []
        self.epoch_s: list[float] = []
        self._elapsed = 0.0  # the running maximum of `time` so far (time spent stays spent)

    def at(self, epoch: int) -> tuple[float, float]:
        while epoch > len(self.epoch_s):
            self._grow()
        return self.metric_values[epoch - 1], self.epoch_s[epoch - 1]

    def _grow(self) -> None:
        have = len(self.epoch_s)
        end = _SPANS[_SPANS.index(have) + 1]
        rows = np.empty((end - have, 8), dtype=np.float32)
        rows[:, 0] = np.arange(have + 1, end + 1)
        rows[:, 1:] = self.values
        out = _run(self.task, rows).astype(np.float64)
        self.metric_values += out[:, OUTPUTS.index(self.metric)].tolist()
        elapsed = np.maximum(np.maximum.accumulate(np.maximum(out[:, 0], 0.0)), self._elapsed)
        self.epoch_s += np.diff(elapsed, prepend=self._elapsed).tolist()
        self._elapsed = float(elapsed[-1])


class LCBenchCurve:
    """The surrogate as a learning curve for the simulated executor (`basht.engine.simulated`):
    `(config, epoch)` -> (`metric` after `epoch` epochs, the epoch's predicted seconds), the
    seconds unscaled, so the virtual clock runs in LCBench's own time.

    A configuration's epochs are predicted as its trial reaches them (`_GrowingCurve`), and kept.
    It has what `basht.tune.simulate.simulate_experiment` reads of recorded curves (`metric`,
    `mode`, `epochs`, `load_s`, `with_seed`), so an experiment file's search can be simulated on it.
    """

    epochs = EPOCHS
    load_s = 0.0
    by_value = (
        True  # a curve of the configuration's values, not of a recorded row: TPE may model it
    )

    def __init__(self, task: str | int = "3945", metric: str = "val_accuracy"):
        self.task = _check_task(task, "task")
        if metric not in _MODES:
            raise WorkloadError(f"metric must be one of {', '.join(_MODES)}, not {metric!r}")
        self.metric, self.mode = metric, _MODES[metric]
        known = optima().get(self.task) if metric == "val_accuracy" else None
        # The best and worst val_accuracy of a large sample (None: not stored for this metric).
        self.optimum = known["best"] if known else None
        self.worst = known["worst"] if known else None
        # id(config) -> (config, its curve); the stored reference keeps the id unused.
        self._cache: dict[int, tuple[Any, _GrowingCurve]] = {}

    def with_seed(self, seed: int) -> LCBenchCurve:
        """The same curves: the surrogate is deterministic (the seed varies the algorithm only)."""
        return self

    def __call__(self, config: dict[str, Any], epoch: int) -> tuple[float, float]:
        entry = self._cache.get(id(config))
        if entry is None or entry[0] is not config:
            curve = _GrowingCurve(self.task, _encode(config, "config"), self.metric)
            if len(self._cache) >= 65536:
                self._cache.clear()  # bounded: only running trials' configs need to stay
            entry = self._cache[id(config)] = (config, curve)
        if not 1 <= epoch <= EPOCHS:
            raise WorkloadError(f"the surrogate's curves run from epoch 1 to {EPOCHS}, not {epoch}")
        return entry[1].at(epoch)
