"""Preflight: what would fail a run later fails `basht validate` and `basht run` now, in one line."""

from __future__ import annotations

import copy
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from basht.bench.preflight import preflight
from basht.errors import ExperimentError
from basht.experiment import load_experiment
from basht.workloads.mnist import MnistMLP
from tests.cli import basht

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def _example(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "examples" / name).read_text())


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return basht(*args, cwd=cwd, timeout=120)


def _sleep_space(data: dict[str, Any]) -> None:
    data["workload"] = {"name": "sleep", "params": {"epoch_secs": 1}}
    data["space"] = {"x": {"type": "float", "low": -1.0, "high": 1.0}}


# (case, the example it starts from, the change, the key path and what the line must say)
CASES = [
    (
        "space key typo",
        "digits-asha.yaml",
        lambda d: d["space"].update(lrr=d["space"].pop("lr")),
        "space.lrr: unknown key 'lrr' (expected one of: lr,",
    ),
    (
        "unknown sleep param",
        "digits-random.yaml",
        _sleep_space,
        "workload.params.epoch_secs: unknown key (expected one of: epoch_s, optimum, fail_on)",
    ),
    (
        "unknown mnist param",
        "digits-asha.yaml",
        lambda d: d["workload"].update(name="mnist-mlp", params={"pth": "x"}),
        "workload.params.pth: unknown key (expected one of: path, validation_fraction, limit, lr,",
    ),
    (
        "unknown carbon zone",
        "digits-asha.yaml",
        lambda d: d["measure"].update(carbon={"region": "XX"}),
        "measure.carbon.region: unknown zone 'XX'",
    ),
    (
        "store not a URL",
        "digits-random.yaml",
        lambda d: d.update(store="notaurl"),
        "store: not a valid SQLAlchemy URL",
    ),
    (
        "mnist path missing",
        "digits-asha.yaml",
        lambda d: d["workload"].update(name="mnist-mlp", params={"path": "/nonexistent/mnist"}),
        "workload.params.path: /nonexistent/mnist is not a directory",
    ),
]


def _write(tmp_path: Path, example: str, mutate, name: str = "exp.yaml") -> Path:
    data = copy.deepcopy(_example(example))
    data["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    mutate(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.integration
@pytest.mark.parametrize(
    ("case", "example", "mutate", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_validate_names_file_and_key(case, example, mutate, expected, tmp_path):
    path = _write(tmp_path, example, mutate)
    proc = _cli("validate", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    line = " ".join(proc.stderr.split())
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"{path}: {expected}" in line
    assert not (tmp_path / "basht.db").exists()


@pytest.mark.integration
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_still_validate(example):
    proc = _cli("validate", str(example))
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


@pytest.mark.integration
def test_run_with_a_space_typo_fails_before_anything_is_stored(tmp_path):
    path = _write(tmp_path, "digits-asha.yaml", CASES[0][2])
    store = tmp_path / "x.db"
    proc = _cli(
        "run", str(path), "--store", f"sqlite:///{store}", "--results", str(tmp_path / "r"), "-q"
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{path}: space.lrr: unknown key 'lrr'" in " ".join(proc.stderr.split())
    # No store opened, so no failed run left behind; no results folder either.
    assert not store.exists()
    assert not (tmp_path / "r").exists()


def _loaded(tmp_path: Path, mutate, example: str = "digits-asha.yaml"):
    return load_experiment(_write(tmp_path, example, mutate))


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["space"]["optimizer"].update(values=["adam", "rmsprop"]),
            "space.optimizer: optimizer must be one of adam, sgd, adamw, got 'rmsprop'",
        ),
        (
            lambda d: d["space"].update(
                dropout={"type": "float", "low": 0.0, "high": 1.0, "step": 0.5}
            ),
            "space.dropout: dropout must be below 1",
        ),
        (
            lambda d: d["space"].update(learning_rate={"type": "choice", "values": [0.1]}),
            "space: 'learning_rate' is an alias of 'lr'",
        ),
        (
            lambda d: d["workload"].update(params={"dropout": 2}),
            "workload.params: dropout must be below 1",
        ),
        (
            lambda d: (
                d["workload"].update(name="digits-sgd")
                or d.update(
                    space={"alpah": {"type": "float", "low": 1e-5, "high": 1e-2, "log": True}}
                )
            ),
            "space.alpah: unknown key 'alpah'",
        ),
        (
            lambda d: d["measure"].update(price={"provider": "aws", "instance": "m5.huge"}),
            "measure.price.instance: instance 'm5.huge' is not in the aws price sheet",
        ),
        (
            lambda d: d["measure"].update(price={"provider": "ibm", "usd_per_hour": 1.0}),
            "measure.price.provider: unknown provider 'ibm'",
        ),
        (
            lambda d: d.update(store="nosuchdb://x/y"),
            "store: not a valid SQLAlchemy URL",
        ),
        (
            lambda d: d["workload"].update(name="tests.user_workloads:Counter", params={"x": 1}),
            "workload.params.x: unknown key (expected one of: fail_value)",
        ),
    ],
)
def test_more_problems_are_one_line(mutate, expected, tmp_path):
    experiment = _loaded(tmp_path, mutate)
    with pytest.raises(ExperimentError) as info:
        preflight(experiment)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'exp.yaml'}: ")
    assert expected in message and "\n" not in message
    assert not (tmp_path / "basht.db").exists()


def test_good_files_pass(tmp_path):
    # The original grid form through the aliases; a mnist-mlp with its files' folder; a user
    # workload without the hook; a plain function workload.
    def legacy(d):
        del d["space"]
        d["hyperparameter"] = {
            "learning_rate": {"start": 0.001, "end": 0.003, "step_size": 0.001},
            "hidden_layer_config": {"start": [10], "end": [30, 30], "step_size": [10, 1]},
        }

    preflight(_loaded(tmp_path, legacy))
    preflight(
        _loaded(
            tmp_path,
            lambda d: d["workload"].update(name="mnist-mlp", params={"path": str(tmp_path)}),
        )
    )
    preflight(
        _loaded(tmp_path, lambda d: d["workload"].update(name="tests.user_workloads:Counter"))
    )
    preflight(
        _loaded(tmp_path, lambda d: d["workload"].update(name="tests.user_workloads:objective"))
    )


def test_source_defaults_to_the_experiment_file_and_can_be_given(tmp_path):
    experiment = _loaded(tmp_path, lambda d: d.update(store="notaurl"))
    assert experiment.source == str(tmp_path / "exp.yaml")
    assert experiment.model_copy(update={"seed": 1}).source == experiment.source
    with pytest.raises(ExperimentError, match=r"^elsewhere\.yaml: store: "):
        preflight(experiment, "elsewhere.yaml")


def test_mnist_constructor_params_match_its_signature():
    names = [
        p for p in inspect.signature(MnistMLP.__init__).parameters if p not in ("self", "seed")
    ]
    assert tuple(n for n in names if n != "params") == MnistMLP.constructor_params


def test_a_tpe_sampler_without_optuna_is_one_line_and_with_it_passes(tmp_path, monkeypatch):
    experiment = _loaded(tmp_path, lambda d: d["search"].update(sampler="tpe"))
    preflight(experiment)
    monkeypatch.setitem(sys.modules, "optuna", None)  # what `import optuna` meets without it
    with pytest.raises(ExperimentError) as info:
        preflight(experiment)
    assert str(info.value) == (
        f"{tmp_path / 'exp.yaml'}: search.sampler: tpe needs Optuna: pip install 'basht[tpe]'"
    )


@pytest.mark.parametrize(
    ("key", "change"),
    [
        ("search.objectives[1].metric", lambda s: s["objectives"][1].update(metric="f1")),
        ("search.constraints[0].metric", lambda s: s["constraints"][0].update(metric="f1")),
    ],
)
def test_an_objective_or_constraint_no_trial_reports_is_one_line(key, change, tmp_path):
    def mutate(data: dict[str, Any]) -> None:
        change(data["search"])
        if key.startswith("search.objectives"):
            data["search"]["constraints"] = []

    path = _write(tmp_path, "digits-energy.yaml", mutate)
    with pytest.raises(ExperimentError) as err:
        preflight(load_experiment(path))
    line = str(err.value)
    assert "\n" not in line and f"{key}: digits-mlp does not report 'f1'" in line
    assert "measured: train_energy_kwh" in line  # what Basht measures is offered too


def test_measured_objectives_and_constraints_pass_preflight(tmp_path):
    preflight(load_experiment(_write(tmp_path, "digits-energy.yaml", lambda d: None)))
