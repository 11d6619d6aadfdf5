"""LightGBM in Basht: a ready workload whose budget is boosting rounds, and a callback for a
training script of one's own run as a Basht trial.

`workload: {name: lightgbm, params: {dataset: digits}}` tunes LightGBM's own parameters
(`num_leaves`, `learning_rate`, `min_child_samples`, ...) on a dataset bundled with
scikit-learn, or on the user's arrays (`data: "package.module:function"`). A trial keeps its
booster in memory and adds rounds to it, so ASHA can pause it (the model as text) and resume it
where it stopped. LightGBM is imported on first use.
"""

from __future__ import annotations

import functools
import logging
import re
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
    import lightgbm as lgb


__all__ = ["MODEL_FILE", "BashtCallback", "LightGBMWorkload", "resume_model"]

log = logging.getLogger(__name__)

#: The file a paused script's booster is saved as, in its checkpoint folder.
MODEL_FILE = "model.txt"

# LightGBM's names for the keys Basht sets itself, with their aliases (the Parameters page of
# LightGBM 4.7, https://lightgbm.readthedocs.io/en/latest/Parameters.html).
_RESERVED_GROUPS: dict[str, tuple[str, ...]] = {
    boosting.ROUNDS: (
        "num_iterations", "num_iteration", "n_iter", "num_tree", "num_trees", "num_round",
        "num_rounds", "nrounds", "num_boost_round", "n_estimators", "max_iter",
    ),
    boosting.THREADS: ("num_threads", "num_thread", "nthread", "nthreads", "n_jobs"),
    boosting.SEED: ("seed", "random_seed", "random_state"),
    boosting.EARLY_STOPPING: (
        "early_stopping_round", "early_stopping_rounds", "early_stopping", "n_iter_no_change",
    ),
}  # fmt: skip
_RESERVED = {key: why for why, keys in _RESERVED_GROUPS.items() for key in keys}

# Determinism: the same config and seed give the same model, and a resumed trial the model of
# one trained straight through.
_DEFAULTS: dict[str, Any] = {"verbosity": -1, "deterministic": True}

# The objectives (with their aliases) whose metrics the workload knows to add.
_FAMILIES = {
    **dict.fromkeys(["binary"], "binary"),
    **dict.fromkeys(
        ["multiclass", "softmax", "multiclassova", "multiclass_ova", "ova", "ovr"], "multiclass"
    ),
    **dict.fromkeys(
        ["regression", "regression_l2", "l2", "mean_squared_error", "mse", "l2_root"]
        + ["root_mean_squared_error", "rmse"],
        "regression",
    ),
}
_METRICS = {
    "binary": ["binary_logloss", "binary_error"],
    "multiclass": ["multi_logloss", "multi_error"],
    "regression": ["rmse", "l1"],
}
_ERRORS, _LOGLOSSES = ("multi_error", "binary_error"), ("multi_logloss", "binary_logloss")


def _lgb() -> Any:
    return require("lightgbm", "lightgbm")


@functools.cache
def _main_names() -> dict[str, str]:
    """{alias or name: LightGBM's main name}, from the table LightGBM itself resolves aliases
    with (a private one, so looked up with care); empty where this LightGBM has none, and then
    keys go to LightGBM unchecked."""
    aliases = getattr(getattr(_lgb().basic, "_ConfigAliases", None), "_get_all_param_aliases", None)
    if aliases is None:
        return {}
    return {alias: main for main, names in aliases().items() for alias in (main, *names)}


def _canonical(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`values` under LightGBM's main names: an unknown key (a misspelt hyperparameter) or one
    set twice through aliases is an error, not a silent default."""
    boosting.check_reserved(values, _RESERVED, where)
    names = _main_names()
    if not names:
        return dict(values)
    found: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in values.items():
        main = names.get(key)
        if main is None:
            raise WorkloadError(
                f"{where}: unknown key {key!r} (not a LightGBM parameter; see "
                "https://lightgbm.readthedocs.io/en/latest/Parameters.html)"
            )
        if main in given:
            raise WorkloadError(f"{where}: {given[main]!r} and {key!r} both set {main!r}")
        found[main], given[main] = value, key
    return found


def _metric_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [m.strip() for m in value.split(",") if m.strip()]
    return [str(m) for m in value]


def _task_params(params: Mapping[str, Any], n_classes: int) -> dict[str, Any]:
    """Objective, classes and metrics for the data, where the user's params leave them open."""
    out = dict(params)
    objective = out.get("objective")
    if objective is None:
        objective = "regression" if n_classes == 0 else "binary" if n_classes == 2 else "multiclass"
        out["objective"] = objective
    family = _FAMILIES.get(objective)
    if family == "multiclass" and "num_class" not in out:
        out["num_class"] = n_classes
    metrics = _metric_list(out.get("metric"))
    if family is not None:
        metrics += [m for m in _METRICS[family] if m not in metrics]
    if metrics:
        out["metric"] = metrics
    if not out.get("force_row_wise"):
        # Skips LightGBM's timing test, which could pick the other layout (and another sum
        # order) in a resumed trial's process.
        out.setdefault("force_col_wise", True)
    return out


def _one_line(err: BaseException) -> str:
    """LightGBM's message without the C++ source it failed in."""
    text = " ".join(str(err).split()) or type(err).__name__
    return re.sub(r" at \S+, line \d+ ?\.?$", "", text)


class LightGBMWorkload:
    """lightgbm: LightGBM's gradient-boosted trees; the budget counts boosting rounds.

    `workload.params`: `dataset` (digits, breast_cancer, wine, iris or diabetes; default
    digits) or `data` ("package.module:function" returning X_train, y_train, X_val, y_val,
    X_test, y_test), and any LightGBM parameter fixed for the run. The space tunes LightGBM's
    parameters, passed through as they are; threads and seed come from the trial's resources.
    `validate()` reports LightGBM's metrics by their names, plus `accuracy` and `logloss` for a
    classification (the objective and its metrics are chosen from the data unless given).
    """

    workload_name = "lightgbm"

    def __init__(
        self, seed: int = 0, dataset: str | None = None, data: str | None = None, **params: Any
    ) -> None:
        self.seed = int(seed)
        where = f"{self.workload_name}: workload.params"
        self.source = boosting.check_source(dataset, data, where)
        self._fixed = _canonical(params, where)
        self._params: dict[str, Any] = {}
        self._data: boosting.Data | None = None
        self._booster: lgb.Booster | None = None  # trainable, with the validation set added
        self._resumed: lgb.Booster | None = None  # a checkpoint's model, continued at train()
        self.rounds_done = 0

    def about(self) -> dict[str, Any]:
        """Table 1's t, ts, m, ta (see `basht.workloads.base.Workload`)."""
        dataset, size_mb = boosting.describe_data(self.source)
        kind = self._fixed.get("boosting", "gbdt")
        return {
            "dataset": dataset,
            "dataset_mb": size_mb,
            "model": f"LightGBM gradient-boosted trees ({kind})",
            "training": "boosting rounds, one per budget unit",
        }

    @classmethod
    def check_config(cls, config: Mapping[str, Any], where: str = "config") -> None:
        """The preflight hook: LightGBM's own list of parameters and aliases, no data."""
        boosting.check_reserved(config, boosting.NOT_TUNABLE, where)
        _canonical(config, where)

    @classmethod
    def prepare(
        cls, seed: int = 0, dataset: str | None = None, data: str | None = None, **params: Any
    ) -> None:
        """The setup phase: import LightGBM and split the data once per worker."""
        _lgb()
        boosting.load_data(boosting.check_source(dataset, data, "workload.params"), seed)

    def load(self, config: dict[str, Any], resources: TrialResources) -> None:
        """Build a booster for `config` on the train split; fails early on a bad value."""
        lgb = _lgb()
        where = f"{self.workload_name}: config"
        config = {key: plain(value) for key, value in config.items()}  # numpy scalars too
        boosting.check_reserved(config, boosting.NOT_TUNABLE, where)
        self._data = boosting.load_data(self.source, self.seed)
        params = {**_DEFAULTS, **self._fixed, **_canonical(config, where)}
        params = _task_params(params, self._data.n_classes)
        params["num_threads"] = max(1, int(resources.cpus))
        params["seed"] = int(resources.seed) % 2**31
        self._params = params
        try:
            self._booster = self._new_booster(lgb)
        except (lgb.basic.LightGBMError, ValueError, TypeError) as err:
            raise WorkloadError(f"{where}: {_one_line(err)}") from None
        self._resumed = None
        self.rounds_done = 0

    def set_threads(self, threads: int) -> None:
        """A new width between rounds (Fluid)."""
        self._params["num_threads"] = max(1, int(threads))
        if self._booster is not None:
            self._booster.reset_parameter({"num_threads": self._params["num_threads"]})

    def train(self, epochs: int) -> None:
        """Add `epochs` boosting rounds to the booster (a resumed one continues its model)."""
        data = self._require_loaded()
        if epochs < 0:
            raise WorkloadError(f"{self.workload_name}: rounds must be >= 0, got {epochs}")
        if epochs == 0:
            return
        if self._booster is None:
            lgb = _lgb()
            train_set = lgb.Dataset(data.X_train, data.y_train, params=self._params)
            valid_set = lgb.Dataset(data.X_val, data.y_val, reference=train_set)
            self._booster = lgb.train(
                self._params,
                train_set,
                num_boost_round=epochs,
                init_model=self._resumed,
                valid_sets=[valid_set],
                valid_names=["val"],
                keep_training_booster=True,
            )
            self._resumed = None
        else:
            for _ in range(epochs):
                self._booster.update()
        self.rounds_done += epochs

    def validate(self) -> dict[str, float]:
        """LightGBM's metrics on the validation split, plus accuracy and logloss."""
        data = self._require_loaded()
        if self._booster is not None:
            results = [(r[0], r[1], r[2]) for r in self._booster.eval_valid()]
            return _metrics(results)
        return self._evaluate(data.X_val, data.y_val)

    def test(self) -> dict[str, float]:
        """The same metrics on the held-out test split."""
        data = self._require_loaded()
        return self._evaluate(data.X_test, data.y_test)

    def state_dict(self) -> dict[str, Any]:
        """The model as LightGBM's text (every round) and the rounds done."""
        self._require_loaded()
        return {
            "workload": self.workload_name,
            "model": self._model().model_to_string(num_iteration=-1),
            "rounds": self.rounds_done,
        }

    def load_state_dict(self, state: Any) -> None:
        """Continue from `state`: the next `train` adds rounds to its model, with the current
        config's parameters (LightGBM's own continued training, `init_model`)."""
        self._require_loaded()
        lgb = _lgb()
        try:
            if state["workload"] != self.workload_name:
                raise ValueError(state["workload"])
            model = lgb.Booster(model_str=state["model"])
            rounds = int(state["rounds"])
        except (KeyError, TypeError, ValueError, lgb.basic.LightGBMError) as err:
            raise WorkloadError(f"{self.workload_name}: not a checkpoint of this workload") from err
        self._booster, self._resumed, self.rounds_done = None, model, rounds

    # -- helpers -----------------------------------------------------------------------------

    def _new_booster(self, module: Any) -> lgb.Booster:
        data = self._require_loaded()
        train_set = module.Dataset(data.X_train, data.y_train, params=self._params)
        booster = module.Booster(self._params, train_set)
        booster.add_valid(module.Dataset(data.X_val, data.y_val, reference=train_set), "val")
        return booster

    def _model(self) -> lgb.Booster:
        model = self._booster if self._booster is not None else self._resumed
        assert model is not None
        return model

    def _require_loaded(self) -> boosting.Data:
        if self._data is None:
            raise WorkloadError(f"{self.workload_name}: call load(config, resources) first")
        return self._data

    def _evaluate(self, X: Any, y: Any) -> dict[str, float]:
        """LightGBM's own metrics of the model's predictions on (X, y): the predictions become
        the starting scores of a booster with no trees, which LightGBM then evaluates."""
        lgb = _lgb()
        raw = self._model().predict(X, raw_score=True, num_threads=self._params["num_threads"])
        scored = lgb.Booster(self._params, lgb.Dataset(X, y, init_score=raw, params=self._params))
        return _metrics([(r[0], r[1], r[2]) for r in scored.eval_train()])


def _metrics(results: list[tuple[str, str, float]]) -> dict[str, float]:
    found = {str(name): float(value) for _, name, value in results}
    return boosting.common_metrics(found, _ERRORS, _LOGLOSSES)


# -- the callback, for a script of one's own ---------------------------------------------------


class BashtCallback:
    """Report each boosting round to Basht, and end training when Basht says so.

    `lgb.train(..., callbacks=[BashtCallback()])`. Each round it reports `step` (rounds done)
    and the round's evaluation results, as `<set>-<metric>` for every set in `valid_sets` and
    as bare names (`multi_logloss`, and `accuracy`, `logloss` where LightGBM computed an error
    rate or a log-loss) for `main`, by default the last set. On `stop` it ends training
    (LightGBM's early-stopping exception); on `pause` it first saves the booster as
    `checkpoint_dir()/model.txt`, which `resume_model()` finds when the trial is resumed. The
    last answer is kept in `decision`. Outside a Basht trial it does nothing.
    """

    order = 30  # after LightGBM's own record/log callbacks, with its early stopping
    before_iteration = False

    def __init__(self, main: str | None = None) -> None:
        self.main = main
        self.decision = Decision.CONTINUE

    def __call__(self, env: Any) -> None:
        if not in_trial():
            return
        results = [(r[0], r[1], r[2]) for r in env.evaluation_result_list or ()]
        metrics = boosting.common_metrics(
            boosting.named_metrics(results, self.main), _ERRORS, _LOGLOSSES
        )
        self.decision = report(env.iteration + 1, **metrics)
        if self.decision is Decision.CONTINUE:
            return
        if self.decision is Decision.PAUSE:
            _save(env.model)
        raise _lgb().callback.EarlyStopException(env.iteration, env.evaluation_result_list)


def _save(model: Any) -> None:
    folder = pause_folder()
    if folder is None:
        return
    model.save_model(str(folder / MODEL_FILE), num_iteration=-1)


def resume_model() -> Path | None:
    """The model to continue from (`lgb.train(..., init_model=resume_model())`): the one saved
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
