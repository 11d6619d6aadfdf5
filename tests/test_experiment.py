"""The experiment file: valid forms load; every kind of bad input is one line, exit code 2."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import pytest

from basht.bench.preflight import preflight
from basht.cli import main
from basht.errors import ExperimentError
from basht.experiment import load_experiment


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["basht", *args])
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_valid_yaml_and_json_give_the_same_experiment(spec, write_spec, tmp_path):
    from_yaml = load_experiment(write_spec(spec))
    json_path = tmp_path / "exp.json"
    json_path.write_text(json.dumps(spec))
    assert load_experiment(json_path) == from_yaml
    assert from_yaml.space_size == "inf"


def test_space_size_is_derived_for_finite_spaces(spec, write_spec):
    spec["space"] = {
        "a": {"type": "choice", "values": [1, 2, 3]},
        "b": {"type": "int", "low": 0, "high": 9, "step": 3},
        "c": {"type": "float", "low": 0.0, "high": 0.5, "step": 0.1},
    }
    assert load_experiment(write_spec(spec)).space_size == 3 * 4 * 6


BAD = [
    ("unknown top key", lambda s: s.update(colour="red"), "colour: unknown key"),
    ("unknown nested key", lambda s: s["search"].update(prunr="asha"), "search.prunr: unknown key"),
    ("wrong type", lambda s: s["resources"].update(workers="two"), "resources.workers"),
    ("empty space", lambda s: s.update(space={}), "search space is empty"),
    ("low >= high", lambda s: s["space"]["x"].update(low=2.0), "space.x: low must be below high"),
    (
        "log with low <= 0",
        lambda s: s["space"]["x"].update(log=True),
        "space.x: log scale needs low > 0",
    ),
    (
        "unknown workload",
        lambda s: s["workload"].update(name="nope"),
        "workload.name: unknown workload",
    ),
    (
        "unimportable workload",
        lambda s: s["workload"].update(name="no_such_pkg.mod:f"),
        "workload.name: workload 'no_such_pkg.mod:f': cannot import",
    ),
    ("unknown pruner", lambda s: s["search"].update(pruner="median"), "search.pruner"),
    ("eta < 2", lambda s: s["search"].update(eta=1), "search.eta"),
    (
        "min_budget > max_budget",
        lambda s: s["search"].update(min_budget=5, max_budget=2),
        "search: min_budget must not exceed max_budget",
    ),
    ("workers < 1", lambda s: s["resources"].update(workers=0), "resources.workers"),
    ("bad name", lambda s: s.update(name="Has Spaces"), "name:"),
    ("negative seed", lambda s: s.update(seed=-1), "exp.yaml: seed: Input should be greater"),
    (
        "name too long for a run id",
        lambda s: s.update(name="n" * 100),
        "exp.yaml: name: String should have at most 99",
    ),
    ("missing workload", lambda s: s.pop("workload"), "workload: missing required key"),
    ("unknown param type", lambda s: s["space"]["x"].update(type="normal"), "space.x"),
    (
        "empty choice",
        lambda s: s["space"].update(c={"type": "choice", "values": []}),
        "space.c.values",
    ),
    (
        "grid over a real range",
        lambda s: s["search"].update(sampler="grid"),
        "sampler: grid needs a finite space",
    ),
    # Past the schema: what the run would resolve (basht.bench.preflight).
    (
        "space key the workload does not take",
        lambda s: (
            s["workload"].update(name="digits-mlp") or s.update(space={"lrr": s["space"]["x"]})
        ),
        "exp.yaml: space.lrr: unknown key 'lrr'",
    ),
    (
        "unknown workload param",
        lambda s: s["workload"].update(params={"epoch_secs": 1}),
        "exp.yaml: workload.params.epoch_secs: unknown key (expected one of: epoch_s,",
    ),
    (
        "unknown carbon zone",
        lambda s: s.update(measure={"carbon": {"region": "XX"}}),
        "exp.yaml: measure.carbon.region: unknown zone 'XX'",
    ),
    ("bad store URL", lambda s: s.update(store="notaurl"), "exp.yaml: store: not a valid"),
    (
        "a run that never ends",
        lambda s: s["search"].pop("max_trials") and s["search"].update(pruner="asha"),
        "exp.yaml: search: pruner asha with the random sampler never ends on its own: "
        "give max_trials, target or a budget (time_budget_s, energy_budget_kwh, ",
    ),
    (
        "simulated executor",
        lambda s: s.update(executor="simulated"),
        "exp.yaml: executor: simulated runs learning-curve models on a virtual clock from Python",
    ),
    (
        "a peer on Ray",
        lambda s: s.update(system="optuna", executor="ray"),
        "exp.yaml: executor: ray applies to system: native only; system: optuna runs",
    ),
    (
        "a peer on a GPU",
        lambda s: s.update(system="raytune") or s["resources"].update(accelerator="gpu"),
        "exp.yaml: resources.accelerator: gpu runs with system: native; system: raytune trains",
    ),
    (
        "tpe on Ray Tune",
        lambda s: s.update(system="raytune") or s["search"].update(sampler="tpe"),
        "exp.yaml: search.sampler: tpe runs with system native or optuna, not raytune",
    ),
    (
        "a peer on fluid",
        lambda s: s.update(system="optuna", engine={"scheduler": "fluid"}),
        "exp.yaml: engine.scheduler: fluid is Basht's engine; system: optuna places",
    ),
    (
        "prometheus energy without a server",
        lambda s: s.update(measure={"energy": "prometheus"}),
        "exp.yaml: measure.energy: prometheus needs measure.prometheus_url",
    ),
    (
        "prometheus energy from a server that does not answer",
        lambda s: s.update(
            measure={"energy": "prometheus", "prometheus_url": "http://127.0.0.1:1"}
        ),
        "exp.yaml: measure.energy: Prometheus http://127.0.0.1:1: cannot connect",
    ),
    (
        "unbounded ASHA for a plain function",
        lambda s: (
            s["workload"].update(name="tests.user_workloads:objective", params={})
            or s["search"].update(pruner="asha", max_budget=None, time_budget_s=10)
        ),
        "exp.yaml: search.max_budget: null (unbounded) needs a workload that checkpoints; "
        "tests.user_workloads:objective is a plain function",
    ),
    (
        "GPU shares that do not fit on the devices",
        lambda s: (
            s["resources"].update(accelerator="gpu", devices=["cuda:0"], workers=3)
            or s.update(engine={"min_width": 0.5})
        ),
        "exp.yaml: engine.min_width: 3 workers x 0.5 GPU do not fit on 1 devices",
    ),
    (
        "a metric the workload does not report",
        lambda s: s["search"].update(metric="f1"),
        "exp.yaml: search.metric: sleep does not report 'f1' (it reports accuracy, loss)",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "expected"), BAD, ids=[b[0] for b in BAD])
def test_bad_file_is_one_line_naming_file_and_key(
    case, mutate, expected, spec, write_spec, monkeypatch, capsys
):
    mutate(spec)
    path = write_spec(spec)
    code, out, err = _cli(monkeypatch, capsys, "validate", str(path))
    assert code == 2
    line = " ".join(err.split())
    assert len(err.strip().splitlines()) == 1, err
    assert str(path) in line
    assert expected in line
    assert "Traceback" not in err


def test_unknown_key_names_the_expected_keys(spec, write_spec):
    spec["resources"]["gpus"] = 1
    with pytest.raises(
        ExperimentError, match=r"resources\.gpus: unknown key \(expected one of: workers"
    ):
        load_experiment(write_spec(spec))


@pytest.mark.parametrize(
    ("content", "expected"),
    [("a: [1, 2", "not valid YAML"), ("- just\n- a list\n", "expected a mapping")],
)
def test_unparseable_file(content, expected, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ExperimentError, match=expected):
        load_experiment(path)


def test_missing_file(tmp_path):
    with pytest.raises(ExperimentError, match="no such file"):
        load_experiment(tmp_path / "nope.yaml")


@pytest.mark.integration
def test_validate_in_a_subprocess_has_no_traceback(spec, write_spec):
    spec["search"]["eta"] = 1
    path = write_spec(spec)
    proc = subprocess.run(
        [sys.executable, "-m", "basht.cli", "validate", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "search.eta" in proc.stderr and str(path) in " ".join(proc.stderr.split())


def test_validate_ok_prints_space_size(spec, write_spec, monkeypatch, capsys):
    spec["space"] = {"a": {"type": "choice", "values": [1, 2]}}
    code, out, _ = _cli(monkeypatch, capsys, "validate", str(write_spec(spec)))
    assert code == 0
    assert "pS = 2" in out


def test_original_hyperparameter_form_is_a_grid(spec, write_spec):
    del spec["space"]
    spec["hyperparameter"] = {
        "learning_rate": {"start": 0.001, "end": 0.003, "step_size": 0.001},
        "epochs": {"start": 1, "end": 5, "step_size": 2},
        "hidden_layer_config": {"start": [10], "end": [30, 30], "step_size": [10, 1]},
    }
    exp = load_experiment(write_spec(spec))
    assert exp.search.sampler == "grid"
    grid = list(exp.search_space.grid())
    assert exp.space_size == 3 * 3 * 6 == len(grid)
    assert {c["epochs"] for c in grid} == {1, 3, 5}
    assert sorted({c["learning_rate"] for c in grid}) == [0.001, 0.002, 0.003]
    layers = {tuple(c["hidden_layer_config"]) for c in grid}
    assert layers == {(10,), (20,), (30,), (10, 10), (20, 20), (30, 30)}


def test_hyperparameter_with_mixed_list_and_number_is_rejected(spec, write_spec):
    del spec["space"]
    spec["hyperparameter"] = {"h": {"start": [10], "end": 30, "step_size": [10, 1]}}
    with pytest.raises(ExperimentError, match="hyperparameter.h"):
        load_experiment(write_spec(spec))


def test_a_gpu_run_with_no_device_here_is_refused_before_it_runs(spec, write_spec):
    import torch

    spec["resources"]["accelerator"] = "gpu"
    path = write_spec(spec)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.cuda, "device_count", lambda: 0)
        with pytest.raises(ExperimentError, match="resources.accelerator: gpu, but no CUDA device"):
            preflight(load_experiment(path))
    spec["resources"]["devices"] = ["cpu", "cpu"]  # named devices are taken as they are
    preflight(load_experiment(write_spec(spec)))


def test_a_named_energy_counter_must_be_readable_here(spec, write_spec, tmp_path, monkeypatch):
    from basht.energy import rapl, sources

    monkeypatch.setattr(sources, "RaplSource", lambda: rapl.RaplSource(tmp_path / "no-powercap"))
    spec["measure"] = {"energy": "rapl"}
    with pytest.raises(ExperimentError, match=r"exp.yaml: measure.energy: RAPL: .*no-powercap"):
        preflight(load_experiment(write_spec(spec)))
    spec["measure"] = {"energy": "auto"}  # auto falls back to the labelled estimate
    preflight(load_experiment(write_spec(spec)))


def test_original_hyperparameter_whole_steps_stay_integers(spec, write_spec):
    # The schema reads step_size as a float (2 -> 2.0); the values must still be ints, or a
    # user workload's range(config["epochs"]) fails in every trial.
    del spec["space"]
    spec["hyperparameter"] = {
        "epochs": {"start": 1, "end": 5, "step_size": 2},
        "batch_size": {"start": 32, "end": 64, "step_size": 32.0},
        "lr": {"start": 1, "end": 2, "step_size": 0.5},
    }
    grid = list(load_experiment(write_spec(spec)).search_space.grid())
    assert sorted({c["epochs"] for c in grid}) == [1, 3, 5]
    assert all(type(c["epochs"]) is int and type(c["batch_size"]) is int for c in grid)
    assert sorted({c["lr"] for c in grid}) == [1.0, 1.5, 2.0]


@pytest.mark.parametrize(
    ("key", "entry", "expected"),
    [
        ("space", {"type": "float", "low": 0.0, "high": math.inf}, "space.x: low, high and step"),
        ("space", {"type": "float", "low": 0.0, "high": 1e3, "step": math.inf}, "must be finite"),
        ("space", {"type": "float", "low": math.nan, "high": 1.0}, "space.x: low, high and step"),
        ("hyperparameter", {"start": 0, "end": math.inf, "step_size": 1}, "hyperparameter.x: "),
        ("hyperparameter", {"start": 0, "end": 1, "step_size": 0}, "x.step_size: Input should"),
    ],
)
def test_non_finite_bounds_are_one_line_not_a_crash(key, entry, expected, spec, write_spec):
    # YAML's .inf and .nan are floats: accepted, they overflowed the grid or drew inf/nan.
    del spec["space"]
    spec[key] = {"x": entry}
    with pytest.raises(ExperimentError, match=re.escape(expected)) as raised:
        load_experiment(write_spec(spec)).space_size  # noqa: B018
    assert "constrained-" not in str(raised.value)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("name: café\n".encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset 9)"),
        (b"\x80\x81binary\xff garbage", "not UTF-8 text (byte 0x80 at offset 0)"),
    ],
)
def test_a_file_that_is_not_utf8_text_is_one_line_naming_it(tmp_path, content, said):
    """An experiment, plan or profile file in another encoding, or binary, is the user's to fix:
    one line naming the file and what is wrong, never a UnicodeDecodeError."""
    from basht.experiment import read_plan
    from basht.plan.profile import load_profile

    path = tmp_path / "file.yaml"
    path.write_bytes(content)
    for read, prefix in ((load_experiment, ""), (load_profile, ""), (read_plan, "plan ")):
        with pytest.raises(ExperimentError) as err:
            read(path)
        assert str(err.value) == f"{prefix}{path}: {said}"


def test_a_directory_given_as_a_file_is_one_line(tmp_path):
    with pytest.raises(ExperimentError, match=r": cannot read \(Is a directory\)$"):
        load_experiment(tmp_path)
