"""The ready LightGBM and XGBoost workloads: rounds as the budget, exact pause/resume, data and
config checks, and the one-line error when the library is missing."""

from __future__ import annotations

import pickle
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from basht.bench.preflight import preflight
from basht.errors import ExperimentError, WorkloadError
from basht.experiment import Experiment
from basht.workloads import Workload, resolve_workload
from basht.workloads.base import Resources

R = Resources(cpus=1, seed=7)


@dataclass(frozen=True)
class Lib:
    name: str
    cls: type
    config: dict[str, Any]  # a deterministic configuration
    sampled: dict[str, Any]  # one that draws rows or features at random
    bad_value: dict[str, Any]
    threads_key: str


def _lib(name: str) -> Lib:
    pytest.importorskip(name)
    if name == "lightgbm":
        from basht.integrations.lightgbm import LightGBMWorkload

        return Lib(
            name,
            LightGBMWorkload,
            {"num_leaves": 15, "learning_rate": 0.1},
            {"num_leaves": 15, "bagging_fraction": 0.6, "bagging_freq": 1},
            {"num_leaves": 1},
            "num_threads",
        )
    from basht.integrations.xgboost import XGBoostWorkload

    return Lib(
        name,
        XGBoostWorkload,
        {"max_depth": 4, "eta": 0.3},
        {"max_depth": 4, "subsample": 0.6},
        {"max_depth": -1},
        "nthread",
    )


@pytest.fixture(params=["lightgbm", "xgboost"])
def lib(request: pytest.FixtureRequest) -> Lib:
    return _lib(request.param)


def _new(lib: Lib, **params: Any) -> Any:
    """A workload on breast cancer unless told otherwise: one tree a round keeps tests quick."""
    if "data" not in params:
        params.setdefault("dataset", "breast_cancer")
    return lib.cls(seed=0, **params)


def _trained(lib: Lib, config: dict[str, Any], rounds: int, resources: Resources = R, **params):
    w = _new(lib, **params)
    w.load(config, resources)
    w.train(rounds)
    return w


def _resumed(lib: Lib, config: dict[str, Any], first: int, then: int, **params: Any) -> Any:
    """Train `first` rounds, checkpoint through pickle, go on round by round in a new instance
    (as the engine does)."""
    state = pickle.loads(pickle.dumps(_trained(lib, config, first, **params).state_dict()))
    w = _new(lib, **params)
    w.load(config, R)
    w.load_state_dict(state)
    for _ in range(then):
        w.train(1)
    return w


# -- data used through `data: "module:function"` ----------------------------------------------


def labelled_one_to_three(seed: int = 0) -> tuple[np.ndarray, ...]:
    """Three classes labelled 1, 2, 3 (the workload maps them onto 0..2)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 4))
    y = 1 + (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    return X[:200], y[:200], X[200:250], y[200:250], X[250:], y[250:]


def labelled_by_name() -> tuple[np.ndarray, ...]:
    """The same classes named by strings."""
    parts = list(labelled_one_to_three())
    for i in (1, 3, 5):
        parts[i] = np.array(["one", "two", "three"])[parts[i] - 1]
    return tuple(parts)


def a_regression() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    y = 2.0 * X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=300)
    return X[:200], y[:200], X[200:250], y[200:250], X[250:], y[250:]


def five_parts() -> tuple[np.ndarray, ...]:
    return labelled_one_to_three()[:5]


HERE = __name__


# -- behaviour -------------------------------------------------------------------------------


def test_the_builtin_names_resolve_to_the_workloads(lib: Lib) -> None:
    assert resolve_workload(lib.name) is lib.cls
    assert isinstance(lib.cls(), Workload)


def test_a_few_dozen_rounds_reach_high_accuracy_on_digits(lib: Lib) -> None:
    w = _trained(lib, lib.config, 30, dataset="digits")
    val, test = w.validate(), w.test()
    for metrics in (val, test):
        assert metrics["accuracy"] >= 0.93
        assert 0 < metrics["logloss"] < 0.5
        assert all(isinstance(v, float) for v in metrics.values())
    error = "multi_error" if lib.name == "lightgbm" else "merror"
    assert val["accuracy"] == 1.0 - val[error]
    assert w.rounds_done == 30


def test_train_adds_rounds_to_the_booster_it_keeps(lib: Lib) -> None:
    at_once = _trained(lib, lib.config, 6)
    w = _trained(lib, lib.config, 2)
    w.train(0)
    w.train(3)
    w.train(1)
    assert w.rounds_done == 6
    assert w.validate() == at_once.validate()


@pytest.mark.parametrize("dataset", ["breast_cancer", "digits"])  # one tree a round, or ten
def test_a_resumed_trial_ends_where_one_trained_straight_through_does(
    lib: Lib, dataset: str
) -> None:
    straight = _trained(lib, lib.config, 20, dataset=dataset)
    resumed = _resumed(lib, lib.config, 8, 12, dataset=dataset)
    assert resumed.rounds_done == 20
    assert resumed.validate() == straight.validate()
    assert resumed.test() == straight.test()
    twice = _resumed(lib, lib.config, 5, 0, dataset=dataset)  # paused again at once, resumed
    state = pickle.loads(pickle.dumps(twice.state_dict()))
    again = _new(lib, dataset=dataset)
    again.load(lib.config, R)
    again.load_state_dict(state)
    again.train(15)
    assert again.validate() == straight.validate()


def test_the_best_trial_is_tested_from_its_checkpoint_without_training(lib: Lib) -> None:
    straight = _trained(lib, lib.config, 12)
    w = _new(lib)
    w.load(lib.config, R)
    w.load_state_dict(straight.state_dict())
    assert w.test() == pytest.approx(straight.test(), rel=1e-12)
    assert w.validate() == pytest.approx(straight.validate(), rel=1e-12)


def test_state_dict_is_a_snapshot(lib: Lib) -> None:
    w = _trained(lib, lib.config, 5)
    state = w.state_dict()
    model = state["model"]
    w.train(5)
    assert state["rounds"] == 5 and state["model"] == model
    assert isinstance(model, (str, bytes))


def test_the_trial_seed_decides_the_random_draws(lib: Lib) -> None:
    a = _trained(lib, lib.sampled, 8).validate()
    b = _trained(lib, lib.sampled, 8).validate()
    c = _trained(lib, lib.sampled, 8, Resources(cpus=1, seed=8)).validate()
    assert a == b
    assert a != c


def test_threads_and_seed_come_from_the_resources(lib: Lib) -> None:
    w = _new(lib)
    w.load(lib.config, Resources(cpus=2, seed=11))
    assert w._params[lib.threads_key] == 2
    assert w._params["seed"] == 11
    w.train(2)
    w.set_threads(1)  # Fluid narrows it between rounds
    w.train(2)
    assert w._params[lib.threads_key] == 1
    assert w.rounds_done == 4 and w.validate()["accuracy"] > 0.5


def test_workload_params_are_defaults_and_the_config_overrides_them(lib: Lib) -> None:
    key, value = next(iter(lib.config.items()))
    from_config = _trained(lib, lib.config, 3).validate()
    w = _new(lib, **{key: value * 2})
    w.load(lib.config, R)
    w.train(3)
    assert w.validate() == from_config


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("n_estimators", "budget"),
        ("num_boost_round", "budget"),
        ("n_jobs", "cpus_per_worker"),
        ("seed", "experiment's seed"),
        ("random_state", "experiment's seed"),
        ("early_stopping_rounds", "pruner"),
        ("dataset", "workload.params"),
    ],
)
def test_keys_basht_sets_itself_are_refused(lib: Lib, key: str, fragment: str) -> None:
    with pytest.raises(WorkloadError, match=rf"^space\.{key}: '{key}' .*{fragment}"):
        lib.cls.check_config({key: 3}, f"space.{key}")
    with pytest.raises(WorkloadError, match=fragment):
        lib.cls(seed=0).load({key: 3}, R)
    if key not in ("dataset", "seed"):  # workload.params' own: the data and the split's seed
        with pytest.raises(WorkloadError, match=rf"workload.params: '{key}'"):
            lib.cls(seed=0, **{key: 3})


def test_lightgbm_knows_its_parameters_and_their_aliases() -> None:
    lib = _lib("lightgbm")
    lib.cls.check_config({"num_leaves": 7, "eta": 0.1, "min_data_in_leaf": 3, "lambda_l2": 1.0})
    with pytest.raises(WorkloadError, match=r"^space\.num_leafs: unknown key 'num_leafs'"):
        lib.cls.check_config({"num_leafs": 7}, "space.num_leafs")
    with pytest.raises(WorkloadError, match="'eta' and 'learning_rate' both set"):
        lib.cls.check_config({"eta": 0.1, "learning_rate": 0.2})
    with pytest.raises(WorkloadError, match="workload.params: unknown key 'bogus'"):
        lib.cls(seed=0, bogus=1)
    # An alias in the config overrides the main name in workload.params.
    w = _new(lib, learning_rate=0.5)
    w.load({"eta": 0.1, "num_leaves": 15}, R)
    w.train(3)
    assert w.validate() == _trained(lib, lib.config, 3).validate()


def test_xgboost_refuses_a_key_it_does_not_use_when_the_trial_loads() -> None:
    lib = _lib("xgboost")
    lib.cls.check_config({"max_dpeth": 3})  # XGBoost can tell only with the whole config
    with pytest.raises(WorkloadError, match=r"^xgboost: config: unknown key 'max_dpeth'"):
        lib.cls(seed=0).load({"max_dpeth": 3}, R)
    with pytest.raises(WorkloadError, match="'tweedie_variance_power'"):
        lib.cls(seed=0).load({"tweedie_variance_power": 1.5}, R)
    w = lib.cls(seed=0, dataset="diabetes", objective="reg:tweedie")
    w.load({"tweedie_variance_power": 1.5}, R)  # used by this objective


def test_a_bad_value_fails_the_load_in_one_line(lib: Lib) -> None:
    with pytest.raises(WorkloadError) as caught:
        lib.cls(seed=0).load(lib.bad_value, R)
    message = str(caught.value)
    assert message.startswith(f"{lib.name}: config: ") and "\n" not in message
    assert next(iter(lib.bad_value)).split("_")[-1] in message


@pytest.mark.parametrize("dataset", ["breast_cancer", "wine", "iris", "diabetes"])
def test_each_bundled_dataset_trains(lib: Lib, dataset: str) -> None:
    w = _trained(lib, {}, 10, dataset=dataset)
    metrics = w.validate()
    if dataset == "diabetes":
        assert "accuracy" not in metrics and metrics["rmse"] > 0
    else:
        assert metrics["accuracy"] > 0.8
    assert w.about()["dataset"].startswith(f"scikit-learn {dataset.replace('_', ' ')}")


def test_an_unknown_dataset_or_a_bad_data_name_is_refused(lib: Lib) -> None:
    with pytest.raises(WorkloadError, match=r"workload.params.dataset: unknown dataset 'mnist'"):
        lib.cls(seed=0, dataset="mnist")
    with pytest.raises(WorkloadError, match=r"workload.params.data: expected 'package.module"):
        lib.cls(seed=0, data="no_colon")
    with pytest.raises(WorkloadError, match="either dataset or data"):
        lib.cls(seed=0, dataset="wine", data=f"{HERE}:a_regression")


def test_the_users_own_data(lib: Lib) -> None:
    w = _trained(lib, {}, 10, data=f"{HERE}:labelled_one_to_three")
    assert w.validate()["accuracy"] > 0.8
    assert w.about()["dataset"] == f"the user's own, from {HERE}:labelled_one_to_three"
    assert w.about()["dataset_mb"] is None
    named = _trained(lib, {}, 10, data=f"{HERE}:labelled_by_name")
    assert named.validate()["accuracy"] == w.validate()["accuracy"]  # the same classes
    regression = _trained(lib, {}, 10, data=f"{HERE}:a_regression")
    assert "accuracy" not in regression.validate() and regression.validate()["rmse"] < 2.0
    with pytest.raises(WorkloadError, match=r"expected \(X_train, y_train"):
        lib.cls(seed=0, data=f"{HERE}:five_parts").load({}, R)
    with pytest.raises(WorkloadError, match="has no attribute 'no_such_function'"):
        lib.cls(seed=0, data=f"{HERE}:no_such_function").load({}, R)


def test_about_says_what_the_workload_stands_for(lib: Lib) -> None:
    about = lib.cls(seed=0).about()
    assert set(about) == {"dataset", "dataset_mb", "model", "training"}
    assert about["dataset"].startswith("scikit-learn digits")
    assert about["dataset_mb"] == pytest.approx(1797 * 65 * 8 / 1e6)
    assert "boosting rounds" in about["training"]


def test_calls_before_load_and_foreign_checkpoints_are_refused(lib: Lib) -> None:
    with pytest.raises(WorkloadError, match="call load"):
        lib.cls(seed=0).train(1)
    w = _new(lib)
    w.load(lib.config, R)
    with pytest.raises(WorkloadError, match="not a checkpoint of this workload"):
        w.load_state_dict({"workload": "digits-sgd", "model": "", "rounds": 1})
    with pytest.raises(WorkloadError, match="rounds must be >= 0"):
        w.train(-1)


def test_a_missing_library_is_one_line_that_says_how_to_install_it(
    lib: Lib, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = lib.cls(seed=0)
    monkeypatch.setitem(sys.modules, lib.name, None)  # `import <lib>` now raises ImportError
    expected = f"{lib.name} is not installed: pip install 'basht[{lib.name}]'"
    with pytest.raises(WorkloadError) as caught:
        w.load({}, R)
    assert str(caught.value) == expected
    with pytest.raises(WorkloadError, match=r"basht\[" + lib.name):
        lib.cls.prepare(seed=0)


def test_preflight_names_a_misspelt_key_in_the_space() -> None:
    _lib("lightgbm")
    experiment = Experiment.from_dict(
        {
            "name": "t",
            "workload": {"name": "lightgbm", "params": {"dataset": "wine"}},
            "space": {"num_leafs": {"type": "int", "low": 4, "high": 64}},
            "search": {"metric": "accuracy", "max_budget": 9, "max_trials": 2},
        }
    )
    with pytest.raises(ExperimentError, match=r"space\.num_leafs: unknown key 'num_leafs'"):
        preflight(experiment, "exp.yaml")
    with pytest.raises(ExperimentError, match=r"workload\.params\.bogus: unknown key"):
        preflight(
            Experiment.from_dict(
                {
                    "name": "t",
                    "workload": {"name": "lightgbm", "params": {"bogus": 1}},
                    "space": {"num_leaves": {"type": "int", "low": 4, "high": 64}},
                    "search": {"metric": "accuracy", "max_budget": 9, "max_trials": 2},
                }
            ),
            "exp.yaml",
        )
