"""Behaviour of the built-in digits workloads: accuracy, reproducibility, checkpoints, config checks."""

from __future__ import annotations

import pickle
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from basht.errors import WorkloadError
from basht.workloads import Workload, resolve_workload
from basht.workloads.base import Resources
from basht.workloads.digits import DigitsMLP, DigitsSGD, digits_splits

torch = pytest.importorskip("torch")

ONE_CPU = Resources(cpus=1, seed=7)
GOOD = {"lr": 0.01, "hidden": 64, "batch_size": 32}


def _trained(cls: type, config: dict[str, Any], epochs: int, resources: Resources = ONE_CPU) -> Any:
    w = cls(seed=0)
    w.load(config, resources)
    w.train(epochs)
    return w


def _resume(cls: type, config: dict[str, Any], first: int, then: int) -> Any:
    """Train `first` epochs, checkpoint through pickle, continue `then` epochs in a new instance."""
    state = pickle.loads(pickle.dumps(_trained(cls, config, first).state_dict()))
    w = cls(seed=0)
    w.load(config, ONE_CPU)
    w.load_state_dict(state)
    w.train(then)
    return w


def test_builtin_names_resolve_to_workloads() -> None:
    assert resolve_workload("digits-mlp") is DigitsMLP
    assert resolve_workload("digits-sgd") is DigitsSGD
    assert isinstance(DigitsMLP(), Workload)
    assert isinstance(DigitsSGD(), Workload)


def test_digits_mlp_reaches_high_accuracy() -> None:
    w = _trained(DigitsMLP, GOOD, 5)
    val, test = w.validate(), w.test()
    assert val["accuracy"] >= 0.9
    assert test["accuracy"] >= 0.9
    for metrics in (val, test):
        assert set(metrics) == {"accuracy", "loss"}
        assert all(isinstance(v, float) for v in metrics.values())
        assert 0 < metrics["loss"] < 1


def test_digits_mlp_untrained_is_near_chance() -> None:
    w = DigitsMLP()
    w.load(GOOD, ONE_CPU)
    assert w.validate()["accuracy"] < 0.5


@pytest.mark.parametrize("optimizer", ["adam", "sgd", "adamw"])
def test_pause_resume_is_bitwise_identical(optimizer: str) -> None:
    # Dropout makes the check cover the dropout RNG, not only the shuffling generator.
    config = {**GOOD, "optimizer": optimizer, "dropout": 0.2, "weight_decay": 1e-4}
    straight = _trained(DigitsMLP, config, 3)
    resumed = _resume(DigitsMLP, config, 2, 1)
    assert resumed.validate() == straight.validate()
    assert resumed.test() == straight.test()
    assert resumed.epochs_done == straight.epochs_done == 3


def test_sgd_pause_resume_is_bitwise_identical() -> None:
    config = {"alpha": 1e-3}
    straight = _trained(DigitsSGD, config, 3)
    resumed = _resume(DigitsSGD, config, 2, 1)
    assert resumed.validate() == straight.validate()
    assert np.array_equal(resumed._clf.coef_, straight._clf.coef_)
    assert resumed.epochs_done == 3


def test_state_dict_is_a_snapshot() -> None:
    w = _trained(DigitsMLP, GOOD, 1)
    state = w.state_dict()
    weights = {k: v.clone() for k, v in state["model"].items()}
    w.train(1)
    assert all(torch.equal(weights[k], state["model"][k]) for k in weights)
    assert state["epochs"] == 1


def test_training_ignores_other_users_of_the_global_rng() -> None:
    config = {**GOOD, "dropout": 0.3}
    straight = _trained(DigitsMLP, config, 2)
    w = DigitsMLP()
    torch.manual_seed(123)
    w.load(config, ONE_CPU)
    torch.rand(1000)
    w.train(1)
    before = torch.get_rng_state()
    w.train(1)
    assert torch.equal(before, torch.get_rng_state())  # the workload leaves the global RNG alone
    assert w.validate() == straight.validate()


def test_same_seed_same_result() -> None:
    for cls in (DigitsMLP, DigitsSGD):
        a = _trained(cls, {}, 2)
        b = _trained(cls, {}, 2)
        c = _trained(cls, {}, 2, Resources(cpus=1, seed=8))
        assert a.validate() == b.validate()
        if cls is DigitsMLP:
            assert a.validate() != c.validate()


def test_constructor_params_are_defaults_and_config_overrides() -> None:
    from_config = _trained(DigitsMLP, {"lr": 0.02, "hidden": 32}, 1).validate()
    w = DigitsMLP(seed=0, lr=0.5, hidden=32)
    w.load({"lr": 0.02}, ONE_CPU)
    w.train(1)
    assert w.validate() == from_config


def test_legacy_aliases() -> None:
    a = _trained(DigitsMLP, {"learning_rate": 0.01, "hidden_layer_config": (16, 16)}, 1)
    b = _trained(DigitsMLP, {"lr": 0.01, "hidden": [16, 16]}, 1)
    assert a.validate() == b.validate()
    assert a.hparams is not None and a.hparams.hidden == (16, 16)


@pytest.mark.parametrize("cls", [DigitsMLP, DigitsSGD])
def test_unknown_config_key_is_rejected(cls: type) -> None:
    with pytest.raises(WorkloadError, match="'n_estimators'"):
        cls(seed=0).load({"n_estimators": 3}, ONE_CPU)
    with pytest.raises(WorkloadError, match="'bogus'"):
        cls(seed=0, bogus=1)


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"dropout": 1.0}, "dropout"),
        ({"optimizer": "rmsprop"}, "optimizer"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"lr": -1.0}, "lr"),
        ({"hidden": [64, "wide"]}, "hidden"),
        ({"lr": 0.1, "learning_rate": 0.1}, "alias"),
    ],
)
def test_bad_mlp_values_are_rejected(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(WorkloadError, match=fragment):
        DigitsMLP().load(config, ONE_CPU)


def test_integral_floats_and_numpy_scalars_are_accepted() -> None:
    w = DigitsMLP()
    w.load({"batch_size": 64.0, "hidden": np.int64(16), "lr": np.float64(0.01)}, ONE_CPU)
    assert w.hparams is not None and w.hparams.batch_size == 64 and w.hparams.hidden == (16,)


def test_checkpoint_of_another_architecture_is_rejected() -> None:
    state = _trained(DigitsMLP, {"hidden": 32}, 1).state_dict()
    w = DigitsMLP()
    w.load({"hidden": 16}, ONE_CPU)
    with pytest.raises(WorkloadError, match="hidden"):
        w.load_state_dict(state)


def test_split_is_the_same_for_every_trial() -> None:
    a, b = digits_splits(0), digits_splits(0)
    other = digits_splits(1)
    assert len(a.y_train) + len(a.y_val) + len(a.y_test) == 1797
    assert (len(a.y_train), len(a.y_val), len(a.y_test)) == (1078, 359, 360)
    # Stratified: every class appears in every split in about its overall share.
    for y in (a.y_val, a.y_test):
        assert np.bincount(y, minlength=10).min() >= 30
    assert not np.array_equal(a.X_val, other.X_val)
    # Different trials (trial seeds) of one experiment see exactly the same data.
    w1, w2 = DigitsMLP(seed=0), DigitsMLP(seed=0)
    w1.load(GOOD, Resources(cpus=1, seed=1))
    w2.load(GOOD, Resources(cpus=1, seed=2))
    for split in ("train", "val", "test"):
        assert all(torch.equal(x, y) for x, y in zip(w1._data[split], w2._data[split], strict=True))
    assert np.array_equal(b.y_test, a.y_test)
    assert a.X_train.min() >= 0.0 and a.X_train.max() <= 1.0


def test_sgd_metrics_depend_on_the_loss() -> None:
    log = _trained(DigitsSGD, {}, 3)
    hinge = _trained(DigitsSGD, {"loss": "hinge"}, 3)
    assert set(log.validate()) == {"accuracy", "loss"}
    assert set(hinge.test()) == {"accuracy"}
    assert log.validate()["accuracy"] >= 0.85
    assert hinge.validate()["accuracy"] >= 0.85


def test_sgd_before_training_is_chance() -> None:
    w = DigitsSGD()
    w.load({}, ONE_CPU)
    metrics = w.validate()
    assert metrics["accuracy"] < 0.2
    assert metrics["loss"] == pytest.approx(np.log(10))


@pytest.mark.parametrize(
    "config", [{"loss": "nope"}, {"alpha": -1.0}, {"learning_rate": "constant", "eta0": -1.0}]
)
def test_sgd_bad_values_fail_at_load(config: dict[str, Any]) -> None:
    with pytest.raises(WorkloadError, match="digits-sgd"):
        DigitsSGD().load(config, ONE_CPU)


@pytest.mark.integration
def test_digits_sgd_works_without_torch() -> None:
    # A finder that refuses torch, as if it were not installed (sys.modules["torch"] = None would
    # confuse scipy, which looks torch up in sys.modules).
    code = (
        "import sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] == 'torch':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "from basht.workloads import resolve_workload, Resources\n"
        "w = resolve_workload('digits-sgd')(seed=0)\n"
        "w.load({'alpha': 1e-3}, Resources())\n"
        "w.train(1)\n"
        "assert w.validate()['accuracy'] > 0.8\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
