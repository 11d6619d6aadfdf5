"""The Hugging Face Trainer in Basht: the ready workload `hf-trainer` on the example's tiny BERT,
the callback in the example's own script run as a trial, and the example run through the CLI."""

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

# Each test trains a real Trainer (seconds, and a second to import it): the full suite's lane.
pytestmark = pytest.mark.integration
if importlib.util.find_spec("transformers") is None:
    pytest.skip(
        "transformers is not installed (pip install 'basht[transformers]')", allow_module_level=True
    )

FOLDER = EXAMPLES / "hf-trainer"
PARAMS = {
    "model": "tiny_bert:build_model",
    "data": "tiny_bert:build_datasets",
    "compute_metrics": "tiny_bert:compute_metrics",
    "metric": "eval_accuracy",
    "max_epochs": 9,
}
CONFIG = {
    "learning_rate": 6e-3,
    "hidden_size": 16,
    "per_device_train_batch_size": 64,
    "dropout": 0.1,
}
ONE_CPU = Resources(cpus=1, seed=3)


@pytest.fixture(autouse=True)
def _example_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FOLDER))


def _loaded(config: dict[str, Any] = CONFIG, **params: Any) -> Any:
    workload = resolve_workload("hf-trainer")(seed=0, **{**PARAMS, **params})
    workload.load(dict(config), ONE_CPU)
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
        paused = _loaded()  # a new object: nothing carries over but the checkpoint
        paused.load_state_dict(state)
    assert paused.epochs_done == straight.epochs_done == 3
    assert paused.validate() == straight.validate()  # bitwise, from the checkpoint's weights
    paused.train(1)
    straight.train(1)
    assert paused.validate() == straight.validate()  # optimizer, schedule and generators too


def test_validate_is_evaluate_and_test_evaluates_the_test_split():
    workload = _loaded()
    workload.train(1)
    assert set(workload.validate()) == {"eval_loss", "eval_accuracy"}
    assert set(workload.test()) == {"test_loss", "test_accuracy"}


def test_config_keys_go_to_training_arguments_and_the_model_function():
    workload = _loaded({**CONFIG, "weight_decay": 0.01})
    assert workload._args["learning_rate"] == 6e-3 and workload._args["weight_decay"] == 0.01
    assert workload._model.config.hidden_size == 16
    assert workload._model.config.hidden_dropout_prob == 0.1


@pytest.mark.parametrize(
    ("config", "params", "message"),
    [
        ({"momentum": 0.9}, {}, r"unknown key 'momentum'"),
        ({"num_train_epochs": 3}, {}, r"'num_train_epochs' is set by Basht"),
        (
            {"lr_scheduler_type": "cosine"},
            {"max_epochs": None},
            r"set workload\.params\.max_epochs",
        ),
        ({"optim": "nope"}, {}, r"TrainingArguments: .*nope"),
    ],
)
def test_bad_config_is_one_line_at_load(config, params, message):
    with pytest.raises(WorkloadError, match=message):
        _loaded({**CONFIG, **config}, **params)


def test_a_flat_schedule_needs_no_max_epochs():
    workload = _loaded(max_epochs=None)
    assert workload._args["lr_scheduler_type"] == "constant"
    workload.train(1)
    assert workload.epochs_done == 1


def test_training_past_max_epochs_is_refused():
    workload = _loaded(max_epochs=1)
    workload.train(1)
    with pytest.raises(WorkloadError, match=r"past workload\.params\.max_epochs=1"):
        workload.train(1)


def test_a_metric_that_is_not_reported_is_named_with_what_is():
    workload = _loaded(metric="eval_f1")
    workload.train(1)
    with pytest.raises(WorkloadError, match=r"'eval_f1' is not among .*eval_accuracy, eval_loss"):
        workload.validate()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"output_dir": "x"}, r"args\.output_dir: set by Basht"),
        ({"lerning_rate": 1.0}, r"args\.lerning_rate: not an argument of .*TrainingArguments"),
    ],
)
def test_training_arguments_in_params_are_checked(args, message):
    with pytest.raises(WorkloadError, match=message):
        resolve_workload("hf-trainer")(seed=0, **PARAMS | {"args": args})


def test_a_missing_transformers_is_one_line(monkeypatch):
    from basht.integrations import hf_trainer

    monkeypatch.setitem(sys.modules, "transformers", None)
    hf_trainer._callback_classes.cache_clear()
    try:
        with pytest.raises(WorkloadError) as err:
            hf_trainer.TrainerWorkload(**PARAMS)
        assert str(err.value) == "transformers is not installed: pip install 'basht[transformers]'"
        with pytest.raises(WorkloadError, match=r"^transformers is not installed"):
            _ = hf_trainer.BashtCallback
    finally:
        hf_trainer._callback_classes.cache_clear()


def test_the_example_validates_from_its_folder(monkeypatch):
    monkeypatch.chdir(FOLDER)
    preflight(load_experiment(FOLDER / "asha.yaml"))


# -- the callback ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory):
    """The example's script as two trials at once: one stopped at epoch 2 (of 4), whose first
    two epochs are the straight-through reference, and one paused at epoch 1."""
    tmp_path = tmp_path_factory.mktemp("hf-trainer-script")
    script, epochs = FOLDER / "train.py", ("--epochs", "4")
    with ThreadPoolExecutor(2) as pool:
        stopped = pool.submit(run_script, script, tmp_path, "stopped", {2: "stop"}, args=epochs)
        paused = pool.submit(run_script, script, tmp_path, "paused", {1: "pause"}, args=epochs)
        return tmp_path, stopped.result(), paused.result()


@pytest.mark.integration
def test_stop_ends_the_script_early(script_runs):
    _, stopped, _ = script_runs
    assert stopped.code == 0, stopped.log
    assert stopped.steps == [1, 2]
    assert stopped.result["epochs"] == 2 and not stopped.result["paused"]
    assert {"eval_accuracy", "eval_loss"} <= set(stopped.metrics(2))


@pytest.mark.integration
def test_pause_saves_the_trainers_checkpoint_and_ends(script_runs):
    _, _, paused = script_runs
    assert paused.code == 0, paused.log
    assert paused.steps == [1] and paused.result["paused"]
    saved = {p.name for p in (paused.checkpoint_dir / "checkpoint").iterdir()}
    assert {"model.safetensors", "optimizer.pt", "rng_state.pth", "trainer_state.json"} <= saved


@pytest.mark.integration
def test_a_resumed_script_ends_where_training_straight_through_does(script_runs):
    tmp_path, stopped, paused = script_runs
    resumed = run_script(
        FOLDER / "train.py",
        tmp_path,
        "resumed",
        {2: "stop"},
        args=("--epochs", "4"),
        resume_from=paused.checkpoint_dir,
    )
    assert resumed.code == 0, resumed.log
    assert resumed.steps == [2]  # the Trainer went on from its checkpoint at epoch 1

    def model_metrics(trial: Any) -> dict[str, float]:  # timings differ from run to run
        return {k: v for k, v in trial.metrics(2).items() if k in ("eval_loss", "eval_accuracy")}

    # Bitwise: weights, optimizer, schedule and random generators came back from the checkpoint.
    assert model_metrics(resumed) == model_metrics(stopped)


# -- the example through the CLI ---------------------------------------------------------------


@pytest.mark.integration
def test_the_example_runs_and_asha_pauses_resumes_and_stops_trials(tmp_path):
    folder = copy_example("hf-trainer", tmp_path)
    spec = yaml.safe_load((folder / "asha.yaml").read_text())
    spec["search"].update(max_trials=5, max_budget=3)  # rungs at 1 and 3 epochs
    (folder / "asha.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = basht("run", "-q", "asha.yaml", cwd=folder, env=cli_env(), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_asha_paused_resumed_and_stopped(f"sqlite:///{folder / 'basht.db'}")
