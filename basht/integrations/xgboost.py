"""XGBoost in Basht: a ready workload whose budget is boosting rounds, and a callback for a
training script of one's own run as a Basht trial.

`workload: {name: xgboost, params: {dataset: digits}}` tunes XGBoost's own parameters
(`max_depth`, `eta`, `min_child_weight`, `subsample`, ...) on a dataset bundled with
scikit-learn, or on the user's arrays (`data: "package.module:function"`). A trial keeps its
booster in memory and adds rounds to it, so ASHA can pause it (the model's bytes) and resume it
where it stopped. XGBoost is imported on first use.
"""

from __future__ import annotations

import functools
import logging
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from basht.errors import WorkloadError
from basht.integrations import _boosting as boosting
from basht.integrations._user_code import TrialResources, plain, require
from basht.integrations.reporter import (
    Decision,
    in_trial,
    pause_folder,
    report,
    resume_from,
)

if TYPE_CHECKING:
    import xgboost as xgb
    from xgboost.callback import TrainingCallback

    class BashtCallback(TrainingCallback):  # built on first use: see `_callback_class`
        decision: Decision

        def __init__(self, main: str | None = None) -> None: ...


__all__ = ["MODEL_FILE", "BashtCallback", "XGBoostWorkload", "resume_model"]

log = logging.getLogger(__name__)

#: The file a paused script's booster is saved as, in its checkpoint folder.
MODEL_FILE = "model.json"

# XGBoost's names (core and scikit-learn wrapper) for the keys Basht sets itself.
_RESERVED_GROUPS: dict[str, tuple[str, ...]] = {
    boosting.ROUNDS: ("num_boost_round", "num_round", "n_estimators"),
    boosting.THREADS: ("nthread", "n_jobs"),
    boosting.SEED: ("seed", "random_state"),
    boosting.EARLY_STOPPING: ("early_stopping_rounds",),
}
_RESERVED = {key: why for why, keys in _RESERVED_GROUPS.items() for key in keys}

_METRICS = {
    "binary": ["logloss", "error"],
    "multi": ["mlogloss", "merror"],
    "reg": ["rmse", "mae"],
}
_ERRORS, _LOGLOSSES = ("merror", "error"), ("mlogloss", "logloss")
_UNUSED = re.compile(r"Parameters: \{(?P<keys>[^}]*)\} (?:are|is) not used")


def _xgb() -> Any:
    return require("xgboost", "xgboost")


def _metric_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(m) for m in value]


def _task_params(params: Mapping[str, Any], n_classes: int) -> dict[str, Any]:
    """Objective, classes and metrics for the data, where the user's params leave them open."""
    out = dict(params)
    objective = out.get("objective")
    if objective is None:
        objective = (
            "reg:squarederror"
            if n_classes == 0
            else "binary:logistic"
            if n_classes == 2
            else "multi:softprob"
        )
        out["objective"] = objective
    family = str(objective).partition(":")[0]
    if family == "multi" and "num_class" not in out:
        out["num_class"] = n_classes
    metrics = _metric_list(out.pop("eval_metric", None))
    metrics += [m for m in _METRICS.get(family, []) if m not in metrics]
    if metrics:
        out["eval_metric"] = metrics
    return out


def _as_list(params: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """XGBoost's form for several values of one key (eval_metric)."""
    pairs: list[tuple[str, Any]] = []
    for key, value in params.items():
        if key == "eval_metric" and isinstance(value, list):
            pairs += [(key, m) for m in value]
        else:
            pairs.append((key, value))
    return pairs


def _one_line(err: BaseException) -> str:
    """XGBoost's message: its first line, without the time and the C++ source."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return re.sub(r"^\[[\d:]+\] \S+: ", "", first).strip()


def _parse_eval(text: str, name: str) -> dict[str, float]:
    """`[3]\tval-mlogloss:0.12\tval-merror:0.03` as {metric: value}."""
    found = {}
    for item in text.split()[1:]:
        metric, _, value = item.removeprefix(f"{name}-").rpartition(":")
        found[metric] = float(value)
    return found


class XGBoostWorkload:
    """xgboost: XGBoost's gradient-boosted trees; the budget counts boosting rounds.

    `workload.params`: `dataset` (digits, breast_cancer, wine, iris or diabetes; default
    digits) or `data` ("package.module:function" returning X_train, y_train, X_val, y_val,
    X_test, y_test), and any XGBoost parameter fixed for the run. The space tunes XGBoost's
    parameters, passed through as they are; threads and seed come from the trial's resources.
    `validate()` reports XGBoost's metrics by their names, plus `accuracy` and `logloss` for a
    classification (the objective and its metrics are chosen from the data unless given).
    """

    workload_name = "xgboost"

    def __init__(
        self, seed: int = 0, dataset: str | None = None, data: str | None = None, **params: Any
    ) -> None:
        self.seed = int(seed)
        where = f"{self.workload_name}: workload.params"
        self.source = boosting.check_source(dataset, data, where)
        boosting.check_reserved(params, _RESERVED, where)
        self._fixed = dict(params)
        self._params: dict[str, Any] = {}
        self._data: boosting.Data | None = None
        self._booster: xgb.Booster | None = None
        self._dtrain: xgb.DMatrix | None = None
        self._dval: xgb.DMatrix | None = None
        self.rounds_done = 0

    def about(self) -> dict[str, Any]:
        """Table 1's t, ts, m, ta (see `basht.workloads.base.Workload`)."""
        dataset, size_mb = boosting.describe_data(self.source)
        kind = self._fixed.get("booster", "gbtree")
        return {
            "dataset": dataset,
            "dataset_mb": size_mb,
            "model": f"XGBoost gradient-boosted trees ({kind})",
            "training": "boosting rounds, one per budget unit",
        }

    @classmethod
    def check_config(cls, config: Mapping[str, Any], where: str = "config") -> None:
        """The preflight hook: the keys Basht sets itself. XGBoost tells which keys it does not
        use only with the whole configuration (objective, booster), so `load` checks the rest."""
        boosting.check_reserved(config, {**_RESERVED, **boosting.NOT_TUNABLE}, where)

    @classmethod
    def prepare(
        cls, seed: int = 0, dataset: str | None = None, data: str | None = None, **params: Any
    ) -> None:
        """The setup phase: import XGBoost and split the data once per worker."""
        _xgb()
        boosting.load_data(boosting.check_source(dataset, data, "workload.params"), seed)

    def load(self, config: dict[str, Any], resources: TrialResources) -> None:
        """Build a booster for `config` on the train split; a key XGBoost does not use with
        this configuration (a misspelt one) or a bad value fails here."""
        xgb = _xgb()
        where = f"{self.workload_name}: config"
        config = {key: plain(value) for key, value in config.items()}  # numpy scalars too
        self.check_config(config, where)
        self._data = data = boosting.load_data(self.source, self.seed)
        params = _task_params({**self._fixed, **config}, data.n_classes)
        params["nthread"] = max(1, int(resources.cpus))
        params["seed"] = int(resources.seed) % 2**31
        self._params = params
        try:
            self._dtrain = xgb.DMatrix(data.X_train, label=data.y_train, nthread=params["nthread"])
            self._dval = xgb.DMatrix(data.X_val, label=data.y_val, nthread=params["nthread"])
            self._booster = self._new_booster(xgb, where)
        except (xgb.core.XGBoostError, ValueError, TypeError) as err:
            raise WorkloadError(f"{where}: {_one_line(err)}") from None
        self.rounds_done = 0

    def set_threads(self, threads: int) -> None:
        """A new width between rounds (Fluid)."""
        self._params["nthread"] = max(1, int(threads))
        if self._booster is not None:
            self._booster.set_param("nthread", self._params["nthread"])

    def train(self, epochs: int) -> None:
        """Add `epochs` boosting rounds to the booster."""
        booster, dtrain, _ = self._require_loaded()
        if epochs < 0:
            raise WorkloadError(f"{self.workload_name}: rounds must be >= 0, got {epochs}")
        for _ in range(epochs):
            booster.update(dtrain, self.rounds_done)
            self.rounds_done += 1

    def validate(self) -> dict[str, float]:
        """XGBoost's metrics on the validation split, plus accuracy and logloss."""
        _, _, dval = self._require_loaded()
        return self._evaluate(dval, "val")

    def test(self) -> dict[str, float]:
        """The same metrics on the held-out test split."""
        self._require_loaded()
        data = self._data
        assert data is not None
        dtest = _xgb().DMatrix(data.X_test, label=data.y_test, nthread=self._params["nthread"])
        return self._evaluate(dtest, "test")

    def state_dict(self) -> dict[str, Any]:
        """The model in XGBoost's own binary form and the rounds done."""
        booster, _, _ = self._require_loaded()
        return {
            "workload": self.workload_name,
            "model": bytes(booster.save_raw("ubj")),
            "rounds": self.rounds_done,
        }

    def load_state_dict(self, state: Any) -> None:
        """Continue from `state`: its model, trained on with the current config's parameters."""
        self._require_loaded()
        xgb = _xgb()
        try:
            if state["workload"] != self.workload_name:
                raise ValueError(state["workload"])
            model, rounds = bytearray(state["model"]), int(state["rounds"])
            booster = self._new_booster(xgb, f"{self.workload_name}: config", model)
        except (KeyError, TypeError, ValueError, xgb.core.XGBoostError) as err:
            raise WorkloadError(f"{self.workload_name}: not a checkpoint of this workload") from err
        self._booster, self.rounds_done = booster, rounds

    # -- helpers -----------------------------------------------------------------------------

    def _new_booster(self, module: Any, where: str, model: bytearray | None = None) -> Any:
        """A booster with the train and validation sets cached (their predictions are kept up
        to date round by round), configured now so that XGBoost's complaints come now."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            booster = module.Booster(
                _as_list(self._params), cache=[self._dtrain, self._dval], model_file=model
            )
            booster.eval_set([(self._dval, "val")], 0)  # configures the booster
        for warning in caught:
            unused = _UNUSED.search(str(warning.message))
            if not unused:
                log.warning("%s", str(warning.message).strip())
                continue
            keys = [k.strip().strip('"') for k in unused["keys"].split(",") if k.strip()]
            shown = ", ".join(repr(k) for k in keys)
            raise WorkloadError(
                f"{where}: unknown key{'s' if len(keys) > 1 else ''} {shown} "
                "(XGBoost does not use it with these parameters)"
            )
        return booster

    def _require_loaded(self) -> tuple[Any, Any, Any]:
        if self._booster is None or self._dtrain is None or self._dval is None:
            raise WorkloadError(f"{self.workload_name}: call load(config, resources) first")
        return self._booster, self._dtrain, self._dval

    def _evaluate(self, dmatrix: Any, name: str) -> dict[str, float]:
        booster, _, _ = self._require_loaded()
        found = _parse_eval(booster.eval_set([(dmatrix, name)], self.rounds_done), name)
        return boosting.common_metrics(found, _ERRORS, _LOGLOSSES)


# -- the callback, for a script of one's own ---------------------------------------------------


class _Reporting:
    """The body of `BashtCallback`; the class itself also derives from XGBoost's
    `TrainingCallback`, so it is built when first asked for (XGBoost imported then)."""

    def __init__(self, main: str | None = None) -> None:
        super().__init__()
        self.main = main
        self.decision = Decision.CONTINUE

    def after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Any]) -> bool:
        """Report the rounds done; True (XGBoost's "stop training") unless told to continue.

        The step is the booster's own count: `epoch` starts again at 0 in a run that continues
        a saved model (`xgb_model`)."""
        if not in_trial():
            return False
        results = [
            (data, metric, _last(values))
            for data, history in evals_log.items()
            for metric, values in history.items()
        ]
        metrics = boosting.common_metrics(
            boosting.named_metrics(results, self.main), _ERRORS, _LOGLOSSES
        )
        self.decision = report(model.num_boosted_rounds(), **metrics)
        if self.decision is Decision.PAUSE:
            _save(model)
        return self.decision is not Decision.CONTINUE


def _last(values: Any) -> float:
    value = values[-1]
    return float(value[0] if isinstance(value, tuple) else value)  # xgb.cv: (mean, std)


@functools.cache
def _callback_class() -> type:
    callback = _xgb().callback.TrainingCallback
    doc = """Report each boosting round to Basht, and end training when Basht says so.

    `xgb.train(..., callbacks=[BashtCallback()])`. Each round it reports `step` (rounds done)
    and the round's evaluation results, as `<set>-<metric>` for every set in `evals` and as
    bare names (`mlogloss`, and `accuracy`, `logloss` where XGBoost computed an error rate or a
    log-loss) for `main`, by default the last set. On `stop` it ends training; on `pause` it
    first saves the booster as `checkpoint_dir()/model.json`, which `resume_model()` finds when
    the trial is resumed. The last answer is kept in `decision`. Outside a Basht trial it does
    nothing.
    """
    return type("BashtCallback", (_Reporting, callback), {"__doc__": doc, "__module__": __name__})


def __getattr__(name: str) -> Any:
    if name == "BashtCallback":
        return _callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _save(model: Any) -> None:
    folder = pause_folder()
    if folder is None:
        return
    model.save_model(str(folder / MODEL_FILE))


def resume_model() -> Path | None:
    """The model to continue from (`xgb.train(..., xgb_model=resume_model())`): the one saved
    when this trial was paused, or None when it starts afresh (and outside a trial)."""
    folder = resume_from()
    if folder is None:
        return None
    path = folder / MODEL_FILE
    if not path.is_file():
        log.warning(
            "resumed from %s, which holds no %s: training starts afresh", folder, MODEL_FILE
        )
        return None
    return path
