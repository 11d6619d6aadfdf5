"""PyTorch Lightning in Basht: the ready workload `lightning` on the example's module as it is, the
callback in the example's own script run as a trial, and the example run through the CLI."""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import yaml

from basht.bench.preflight import preflight
from basht.errors import WorkloadError
from basht.experiment import load_experiment
from basht.workloads import resolve_workload
from basht.workloads.base import Resources
from tests.cli import basht, cli_env
from tests.integrations.framework_trials import (
    EXAMPLES,
    assert_asha_paused_resumed_and_stopped,
    copy_example,
    run_script,
)

# Each test trains real Lightning models (seconds, and 5 s to import it): the full suite's lane.
pytestmark = pytest.mark.integration
if importlib.util.find_spec("lightning") is None:
    pytest.skip(
        "lightning is not installed (pip install 'basht[lightning]')", allow_module_level=True
    )

FOLDER = EXAMPLES / "lightning"
PARAMS = {
    "module": "digits_lightning:DigitsClassifier",
    "datamodule": "digits_lightning:DigitsData",
    "monitor": "val_acc",
}
CONFIG = {"lr": 0.01, "hidden": 32, "dropout": 0.2, "batch_size": 64}
ONE_CPU = Resources(cpus=1, seed=3)


@pytest.fixture(autouse=True)
def _example_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FOLDER))


def _loaded(config: dict[str, Any] = CONFIG, **params: Any) -> Any:
    workload = resolve_workload("lightning")(seed=0, **{**PARAMS, **params})
    workload.load(dict(config), ONE_CPU)
    return workload


def _resumed(state: Any) -> Any:
    """A new workload continuing from `state`, as a worker does for a promoted trial."""
    workload = _loaded()
    workload.load_state_dict(state)
    return workload


# -- the ready workload --------------------------------------------------------------------


def test_pausing_after_each_epoch_ends_where_training_straight_through_does():
    straight = _loaded()
    straight.train(3)
    paused = _loaded()
    for _ in range(3):
        paused.train(1)
        paused.validate()
        state = paused.state_dict()
        paused.close()
        paused = _resumed(state)  # a new object: nothing carries over but the checkpoint
    assert paused.epochs_done == straight.epochs_done == 3
    assert paused.validate() == {k: v for k, v in straight.validate().items() if k != "train_loss"}
    paused.train(1)
    straight.train(1)
    assert paused.validate() == straight.validate()  # bitwise: the generators came back too


def test_validate_reports_what_the_epoch_logged_and_test_runs_the_test_step():
    workload = _loaded()
    workload.train(2)
    metrics = workload.validate()
    assert {"val_acc", "val_loss", "train_loss"} <= metrics.keys()
    assert all(isinstance(v, float) for v in metrics.values())
    assert 0.5 < metrics["val_acc"] <= 1.0
    assert set(workload.test()) == {"test_acc", "test_loss"}


def test_the_config_goes_to_each_class_that_takes_it():
    workload = _loaded({**CONFIG, "hidden": 17})
    assert workload._model.hparams.hidden == 17 and workload._model.hparams.lr == 0.01
    assert workload._data.batch_size == 64


def test_a_config_key_nobody_takes_is_one_line():
    with pytest.raises(WorkloadError, match=r"unknown key 'momentum'.*batch_size.*lr"):
        _loaded({**CONFIG, "momentum": 0.9})


def test_a_from_config_classmethod_builds_the_module():
    from tests.integrations.lightning_modules import FromConfig

    _loaded(
        {"learning_rate": 0.02, "batch_size": 32},
        module="tests.integrations.lightning_modules:FromConfig",
    )
    assert FromConfig.seen == {"learning_rate": 0.02, "batch_size": 32}


def test_a_monitor_that_was_not_logged_is_named_with_what_was():
    workload = _loaded(monitor="val_f1")
    workload.train(1)
    with pytest.raises(WorkloadError, match=r"'val_f1' was not logged .*train_loss, val_acc"):
        workload.validate()


@pytest.mark.parametrize(
    ("trainer", "message"),
    [
        ({"max_epochs": 3}, r"trainer\.max_epochs: set by Basht"),
        ({"gradient_clip": 1.0}, r"trainer\.gradient_clip: not an argument of lightning\.Trainer"),
    ],
)
def test_trainer_arguments_are_checked(trainer, message):
    with pytest.raises(WorkloadError, match=message):
        resolve_workload("lightning")(seed=0, **PARAMS, trainer=trainer)


def test_a_module_that_is_not_there_is_one_line():
    with pytest.raises(
        WorkloadError, match=r"workload\.params\.module: .* has no attribute 'Nope'"
    ):
        resolve_workload("lightning")(seed=0, module="digits_lightning:Nope")


def test_a_missing_lightning_is_one_line(monkeypatch):
    from basht.integrations import lightning

    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    lightning._callback_classes.cache_clear()
    try:
        with pytest.raises(WorkloadError) as err:
            lightning.LightningWorkload(**PARAMS)
        assert str(err.value) == "lightning is not installed: pip install 'basht[lightning]'"
        with pytest.raises(WorkloadError, match=r"^lightning is not installed"):
            _ = lightning.BashtCallback
    finally:
        lightning._callback_classes.cache_clear()


def test_the_example_validates_from_its_folder(monkeypatch):
    monkeypatch.chdir(FOLDER)
    preflight(load_experiment(FOLDER / "asha.yaml"))


# -- the callback ----------------------------------------------------------------------------


@pytest.mark.filterwarnings(
    "ignore:.*LeafSpec.*:DeprecationWarning", "ignore:.*LeafSpec.*:FutureWarning"
)
def test_outside_a_trial_the_callback_does_nothing(monkeypatch, tmp_path):
    from digits_lightning import DigitsClassifier, DigitsData

    from basht.integrations.lightning import BashtCallback

    for name in ("BASHT_REPORT_FD", "BASHT_DECISION_FD", "BASHT_RESUME_FROM"):
        monkeypatch.delenv(name, raising=False)
    callback = BashtCallback(monitor="val_acc")
    import lightning as L

    trainer = L.Trainer(
        max_epochs=2,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(DigitsClassifier(), datamodule=DigitsData(), ckpt_path=callback.resume_checkpoint())
    assert trainer.current_epoch == 2 and not callback.paused


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory):
    """The example's script as two trials at once: one stopped at epoch 4 (of 6), whose first
    four epochs are the straight-through reference, and one paused at epoch 2."""
    tmp_path = tmp_path_factory.mktemp("lightning-script")
    script = FOLDER / "train.py"
    with ThreadPoolExecutor(2) as pool:
        stopped = pool.submit(
            run_script, script, tmp_path, "stopped", {4: "stop"}, args=("--epochs", "6")
        )
        paused = pool.submit(
            run_script, script, tmp_path, "paused", {2: "pause"}, args=("--epochs", "6")
        )
        return tmp_path, stopped.result(), paused.result()


@pytest.mark.integration
def test_stop_ends_the_script_early(script_runs):
    _, stopped, _ = script_runs
    assert stopped.code == 0, stopped.log
    assert stopped.steps == [1, 2, 3, 4]
    assert stopped.result["epochs"] == 4 and not stopped.result["paused"]
    assert set(stopped.metrics(4)) == {"val_acc", "val_loss", "train_loss"}


@pytest.mark.integration
def test_pause_saves_lightnings_checkpoint_and_ends(script_runs):
    _, _, paused = script_runs
    assert paused.code == 0, paused.log
    assert paused.steps == [1, 2] and paused.result["paused"]
    assert (paused.checkpoint_dir / "last.ckpt").is_file()


@pytest.mark.integration
def test_a_resumed_script_ends_where_training_straight_through_does(script_runs):
    tmp_path, stopped, paused = script_runs
    resumed = run_script(
        FOLDER / "train.py",
        tmp_path,
        "resumed",
        {4: "stop"},
        args=("--epochs", "6"),
        resume_from=paused.checkpoint_dir,
    )
    assert resumed.code == 0, resumed.log
    assert resumed.steps == [3, 4]  # Lightning's fit loop went on from epoch 3
    # Bitwise: weights, optimiser, loops and random generators all came back from the checkpoint.
    assert resumed.metrics(4) == stopped.metrics(4)


# -- the example through the CLI ---------------------------------------------------------------


@pytest.mark.integration
def test_the_example_runs_and_asha_pauses_resumes_and_stops_trials(tmp_path):
    folder = copy_example("lightning", tmp_path)
    spec = yaml.safe_load((folder / "asha.yaml").read_text())
    spec["search"]["max_trials"] = 6
    (folder / "asha.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = basht("run", "-q", "asha.yaml", cwd=folder, env=cli_env(), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_asha_paused_resumed_and_stopped(f"sqlite:///{folder / 'basht.db'}")
