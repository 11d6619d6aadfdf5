"""The lcbench workload: YAHPO Gym's LCBench surrogate read with onnxruntime, its curves, its
checks, a real `basht run` and a simulated run on the virtual clock."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from basht.bench.preflight import preflight
from basht.errors import ExperimentError, WorkloadError
from basht.experiment import Experiment, load_experiment
from basht.space import Choice, SearchSpace
from basht.store import Store
from basht.tune import ASHA, GridSearch
from basht.tune.simulate import simulate, simulate_experiment
from basht.workloads import Resources, Workload, lcbench, resolve_workload
from basht.workloads.lcbench import EPOCHS, OUTPUTS, LCBench, LCBenchCurve
from tests.cli import basht, cli_env

onnxruntime = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
R = Resources()
# A sane configuration: SGD with momentum on a two-layer funnel of 256 units.
SANE = {
    "batch_size": 64,
    "learning_rate": 0.01,
    "momentum": 0.9,
    "weight_decay": 1e-4,
    "num_layers": 2,
    "max_units": 256,
    "max_dropout": 0.1,
}
# What YAHPO Gym 1.0.2 feeds the model: `x_cont` in its cont_names order, raw values as float32.
CONT = ["batch_size", "learning_rate", "momentum", "weight_decay", "num_layers", "max_units"]
CONT += ["max_dropout"]


def _direct(task: str, config: dict[str, Any], epochs: list[int]) -> np.ndarray:
    """The model on its own session, inputs encoded by hand: (len(epochs), 6)."""
    codes = json.loads((lcbench.DATA / "encoding.json").read_text())["OpenML_task_id"]
    session = onnxruntime.InferenceSession(
        str(lcbench.DATA / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    x_cont = np.array([[e, *(config[k] for k in CONT)] for e in epochs], dtype=np.float32)
    x_cat = np.full((len(epochs), 1), codes[task], dtype=np.int32)
    return session.run(["output"], {"x_cat": x_cat, "x_cont": x_cont})[0]


def _course(config: dict[str, Any], task: str = "3945") -> list[dict[str, float]]:
    """validate() after each of the 52 epochs, and test() at the end, with no sleeping."""
    w = LCBench(task=task, time_scale=float("inf"))
    w.load(config, R)
    out = []
    for _ in range(EPOCHS):
        w.train(1)
        out.append(w.validate())
    out.append(w.test())
    return out


def test_the_builtin_name_resolves_to_the_workload() -> None:
    assert resolve_workload("lcbench") is LCBench
    assert isinstance(LCBench(), Workload)
    assert len(lcbench.tasks()) == 34 and lcbench.tasks()[0] == "3945"


def test_outputs_match_a_direct_onnxruntime_call() -> None:
    course = _course(SANE)
    batch = _direct("3945", SANE, list(range(1, EPOCHS + 1)))  # every epoch in one call
    for epoch, metrics in enumerate(course[:-1], start=1):
        for name, value in metrics.items():
            assert value == pytest.approx(float(batch[epoch - 1, OUTPUTS.index(name)]), rel=1e-5)
    for name, value in course[-1].items():
        assert value == pytest.approx(float(batch[-1, OUTPUTS.index(name)]), rel=1e-5)
    # One row per call, as YAHPO Gym's objective_function makes it: the same up to float32 rounding.
    for epoch in (1, 13, 52):
        row = _direct("3945", SANE, [epoch])[0]
        assert course[epoch - 1]["val_accuracy"] == pytest.approx(float(row[1]), rel=1e-5)
    # predict() batches configurations and epochs; its rows are the same model outputs.
    predicted = lcbench.predict(3945, [SANE, {**SANE, "num_layers": 4}])
    assert predicted.shape == (2, EPOCHS, len(OUTPUTS))
    np.testing.assert_allclose(predicted[0], batch, rtol=1e-5)


def test_a_sane_configuration_learns_and_time_adds_up() -> None:
    course = _course(SANE)
    accuracy = [m["val_accuracy"] for m in course[:-1]]
    assert 1.0 < accuracy[0] < accuracy[-1] <= 100.0  # a percentage that rises with the epochs
    assert accuracy[-1] - accuracy[0] > 10.0 and accuracy[-1] > 80.0
    assert all(0.0 < m["val_balanced_accuracy"] <= 1.0 for m in course[:-1])
    assert set(course[-1]) == {"test_balanced_accuracy", "test_cross_entropy"}
    curve = lcbench._curve("3945", lcbench._encode(SANE, "config"))
    time_s, epoch_s = np.array(curve["time"]), np.array(curve["epoch_s"])
    # Cumulative seconds: rising, but for a dip of a tenth of a second at epoch 27 (a surrogate's
    # wobble), which the epochs' seconds (the rise of the running maximum) absorb.
    assert 0 < time_s[0] < time_s[-1] and np.sum(np.diff(time_s) <= 0) <= 1
    assert np.diff(time_s).min() > -1.0
    assert np.all(epoch_s >= 0) and epoch_s.sum() == pytest.approx(time_s[-1])
    assert np.cumsum(epoch_s) == pytest.approx(np.maximum.accumulate(time_s))


def test_curves_are_deterministic() -> None:
    first = _course(SANE)
    lcbench._curve.cache_clear()  # predicted again, not read back from the cache
    assert _course(SANE) == first
    other = _course({**SANE, "learning_rate": 1e-4})
    assert other != first
    sim = LCBenchCurve("3945")
    assert [sim(dict(SANE), e)[0] for e in (1, 27, 52)] == [
        first[e - 1]["val_accuracy"] for e in (1, 27, 52)
    ]


@pytest.mark.parametrize("task", ["3945", "167104", "189909"])
def test_the_simulators_curve_grows_as_trials_go_and_is_the_whole_one(task) -> None:
    """The simulator predicts a configuration's epochs as its trial reaches them. A value must
    not depend on the order epochs were asked for (a simulation would then depend on how far its
    trials went), and it is the curve predicted at once, to float32 rounding."""
    from basht.tune.samplers import RandomSampler

    sampler = RandomSampler(lcbench.space(), 11)
    configs = [sampler.next() for _ in range(40)]
    in_order, jumping = LCBenchCurve(task), LCBenchCurve(task)
    for config in configs:
        whole = lcbench._curve(task, lcbench._encode(config, "config"))
        for epoch in (52, 1, 9, 27, 3, 33, 17, 5):  # jumping ahead, then back
            jumping(config, epoch)
        for epoch in range(1, EPOCHS + 1):  # as a trial goes, an epoch at a time
            value, seconds = in_order(config, epoch)
            assert (value, seconds) == jumping(config, epoch)
            assert value == pytest.approx(whole["val_accuracy"][epoch - 1], rel=1e-6)
            assert seconds == pytest.approx(whole["epoch_s"][epoch - 1], rel=1e-5, abs=1e-3)


def test_a_left_out_key_takes_the_surrogates_default() -> None:
    defaults = {k: v["default"] for k, v in lcbench._config_space()[1].items()}
    assert _course({"learning_rate": defaults["learning_rate"]}) == _course(defaults)


def test_train_sleeps_the_predicted_time_over_time_scale(monkeypatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(lcbench.time, "sleep", slept.append)
    w = LCBench(time_scale=50)
    w.load(SANE, R)
    w.train(3)
    w.train(1)
    time_s = lcbench._curve("3945", lcbench._encode(SANE, "config"))["time"]
    assert slept == pytest.approx([time_s[2] / 50, (time_s[3] - time_s[2]) / 50])
    assert w.epoch == 4


def test_a_paused_trial_resumes_where_it_stood() -> None:
    w = LCBench(time_scale=float("inf"))
    w.load(SANE, R)
    w.train(9)
    state = pickle.loads(pickle.dumps(w.state_dict()))
    resumed = LCBench(time_scale=float("inf"))
    resumed.load(SANE, R)
    resumed.load_state_dict(state)
    resumed.train(18)
    assert resumed.validate() == _course(SANE)[26]
    with pytest.raises(WorkloadError, match="task 3945, not 7593"):
        LCBench(task="7593").load_state_dict(state)


def test_unknown_task_is_one_line_naming_the_param() -> None:
    with pytest.raises(WorkloadError) as caught:
        LCBench(task="1234")
    message = str(caught.value)
    assert message.startswith("lcbench: workload.params.task: unknown task '1234'")
    assert "3945, 7593" in message and "\n" not in message
    # encoding.json codes 167083, which config_space.json (and so YAHPO Gym) does not offer.
    with pytest.raises(WorkloadError, match="unknown task"):
        LCBench(task="167083")
    assert LCBench(task=7593).task == "7593"
    experiment = load_experiment(ROOT / "examples" / "lcbench.yaml")
    bad = experiment.model_copy(
        update={"workload": experiment.workload.model_copy(update={"params": {"task": "x"}})}
    )
    with pytest.raises(ExperimentError, match=r"^exp\.yaml: workload\.params\.task: unknown task"):
        preflight(bad, "exp.yaml")


@pytest.mark.parametrize("scale", [0, -1, "fast", True])
def test_a_bad_time_scale_is_refused(scale: Any) -> None:
    with pytest.raises(WorkloadError, match=r"workload\.params\.time_scale: must be a number > 0"):
        LCBench(time_scale=scale)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"lr": 0.01}, "unknown key 'lr'"),
        ({"epoch": 3}, "unknown key 'epoch'"),
        (
            {"learning_rate": 0.5},
            r"learning_rate must lie in the surrogate's range \[0.0001, 0.1\]",
        ),
        ({"batch_size": 32.5}, "batch_size must be an integer"),
        ({"max_dropout": "high"}, "max_dropout must be a number"),
    ],
)
def test_configs_outside_the_surrogate_are_refused(config: dict[str, Any], says: str) -> None:
    with pytest.raises(WorkloadError, match=says):
        LCBench().load(config, R)
    with pytest.raises(WorkloadError, match=says):
        LCBench.check_config(config, "space")


def test_preflight_checks_the_space_against_the_surrogates_ranges() -> None:
    data = {
        "name": "t",
        "workload": {"name": "lcbench"},
        "space": {"learning_rate": {"type": "float", "low": 1e-5, "high": 0.1, "log": True}},
        "search": {"metric": "val_accuracy", "max_budget": 52, "max_trials": 2},
    }
    with pytest.raises(ExperimentError, match=r"space\.learning_rate: learning_rate must lie"):
        preflight(Experiment.from_dict(data), "exp.yaml")
    data["search"]["metric"] = "accuracy"
    data["space"] = lcbench.space()
    with pytest.raises(ExperimentError, match="search.metric"):
        preflight(Experiment.from_dict(data), "exp.yaml")


def test_the_example_uses_the_surrogates_space() -> None:
    experiment = load_experiment(ROOT / "examples" / "lcbench.yaml")
    assert {k: v.model_dump(exclude_defaults=True) for k, v in experiment.space.items()} == {
        k: {key: v for key, v in spec.items() if v is not False}
        for k, spec in lcbench.space().items()
    }
    assert experiment.search.max_budget == EPOCHS and experiment.search.pruner == "asha"


def test_epochs_past_the_surrogate_are_an_error() -> None:
    w = LCBench(time_scale=float("inf"))
    with pytest.raises(WorkloadError, match="call load"):
        w.train(1)
    w.load(SANE, R)
    with pytest.raises(WorkloadError, match="no metrics before the first epoch"):
        w.validate()
    w.train(52)
    with pytest.raises(WorkloadError, match="end at epoch 52, not 53"):
        w.train(1)


def test_a_missing_onnxruntime_is_one_line(monkeypatch) -> None:
    monkeypatch.setattr(lcbench, "_SESSION", None)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now fails
    with pytest.raises(WorkloadError) as caught:
        LCBench.prepare(seed=0, task="3945")
    assert str(caught.value) == "workload lcbench needs onnxruntime: pip install 'basht[lcbench]'"


def test_the_simulated_clock_runs_on_the_surrogates_time() -> None:
    # One worker, every configuration to 27 epochs, one after another: the virtual run takes the
    # predicted seconds of those epochs, summed.
    space = SearchSpace({"learning_rate": Choice((1e-3, 1e-2))})
    algorithm = GridSearch(space, metric="val_accuracy", max_budget=27)
    result = simulate(algorithm, 1, LCBenchCurve("3945"))
    predicted = lcbench.predict("3945", [{"learning_rate": 1e-3}, {"learning_rate": 1e-2}])
    elapsed = np.maximum.accumulate(predicted[:, :27, 0], axis=1)[:, -1]
    assert result.trials == 2
    assert result.makespan_s == pytest.approx(float(elapsed.sum()), rel=1e-5)
    assert result.best_value == pytest.approx(float(predicted[:, :27, 1].max()), rel=1e-5)


def test_a_simulated_asha_search_of_the_example() -> None:
    experiment = load_experiment(ROOT / "examples" / "lcbench.yaml")
    curve = LCBenchCurve(experiment.workload.params["task"], experiment.search.metric)
    (row,) = simulate_experiment(experiment, curve, pruners=["asha"], workers=8, seeds=[0])
    assert row["median_makespan_s"] > 60.0  # virtual: LCBench's own seconds, not the wall's
    assert row["median_wall_s"] < 2.0
    assert 90.0 < row["median_best_value"] <= 100.0

    def asha() -> ASHA:
        space = experiment.search_space
        return ASHA(space, metric="val_accuracy", max_budget=EPOCHS, max_trials=64)

    first, second = simulate(asha(), 8, curve), simulate(asha(), 8, LCBenchCurve("3945"))
    assert (first.makespan_s, first.best_value) == (second.makespan_s, second.best_value)
    with pytest.raises(ValueError, match="mode"):  # cross entropy goes down, accuracy up
        simulate(asha(), 8, LCBenchCurve("3945", "val_cross_entropy"))


@pytest.mark.integration
def test_basht_run_tunes_lcbench(tmp_path: Path) -> None:
    data = {
        "name": "lcbench-tiny",
        "seed": 0,
        "workload": {"name": "lcbench", "params": {"task": "7593", "time_scale": 2000}},
        "space": lcbench.space(),
        "search": {
            "pruner": "asha",
            "metric": "val_accuracy",
            "min_budget": 1,
            "max_budget": 9,
            "eta": 3,
            "max_trials": 6,
        },
        "resources": {"workers": 2},
        "store": f"sqlite:///{tmp_path / 'basht.db'}",
    }
    path = tmp_path / "lcbench-tiny.json"
    path.write_text(json.dumps(data))
    proc = basht("run", str(path), cwd=tmp_path, env=cli_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    store = Store(data["store"])
    (run,) = store.list_runs()
    assert run.status == "completed" and 0.0 < run.best_value <= 100.0
    reports = store.reports(run.id)
    assert reports and all(
        {"val_accuracy", "val_cross_entropy", "val_balanced_accuracy"} <= set(r.metrics)
        for r in reports
    )
    results = json.loads((tmp_path / "results" / run.id / "results.json").read_text())
    assert results["workload"]["name"] == "lcbench"
    assert "OpenML task 7593" in results["workload"]["dataset"]
    assert "test test_balanced_accuracy" in " ".join(proc.stdout.split())


def test_every_task_has_a_stored_optimum_from_a_large_sample() -> None:
    stored = lcbench.optima()
    assert set(stored) == set(lcbench.tasks())
    for reference in stored.values():
        assert reference["worst"] < reference["median"] < reference["best"] <= 100
        assert reference["samples"] >= 100_000
    # The sample is reproducible: a smaller one of the same seed never beats the stored best.
    small = lcbench.reference("3945", samples=2_000)
    assert small["best"] <= stored["3945"]["best"]


def test_the_curve_knows_its_task_optimum_and_regret_is_measured_against_it() -> None:
    from basht.tune.simulate import regret

    curve = LCBenchCurve("3945")
    best, worst = curve.optimum, curve.worst
    assert best == lcbench.optima()["3945"]["best"]
    got = regret(curve, [best - 1.0, best - 3.0, None])
    assert got["median_regret"] == pytest.approx(3.0)
    assert got["median_normalised_regret"] == pytest.approx(3.0 / (best - worst))
    assert regret(LCBenchCurve("3945", "val_cross_entropy"), [1.0]) == {}


@pytest.mark.integration
def test_basht_simulate_needs_no_curves_for_lcbench_and_reports_regret(tmp_path: Path) -> None:
    done = basht(
        "simulate",
        str(ROOT / "examples" / "lcbench.yaml"),
        "--seeds",
        "1",
        "--pruners",
        "asha,sha",
        "--json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["pruner"] for r in rows] == ["asha", "sha"]
    for row in rows:
        assert 0 <= row["median_normalised_regret"] <= 1
        assert row["optimum"] == lcbench.optima()["3945"]["best"]
    other = basht("simulate", str(ROOT / "examples" / "sleep-smoke.yaml"), cwd=tmp_path)
    assert other.returncode == 2
    assert "--curves" in other.stderr and "\n" not in other.stderr.strip()
