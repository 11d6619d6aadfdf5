"""Recorded curves: a real run's per-epoch reports as a table the simulator replays."""

from __future__ import annotations

import copy
import gzip
import json

import pytest

import basht
from basht.engine import RecordedCurves
from basht.errors import BashtError
from basht.space import Float, SearchSpace
from basht.store import Store
from basht.tune import ASHA, SHA, RandomSearch
from basht.tune.simulate import simulate


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A real run of the sleep workload that trains 6 configurations to 4 epochs, no stopping."""
    from tests.conftest import BASE

    tmp = tmp_path_factory.mktemp("recorded")
    spec = copy.deepcopy(BASE)
    spec["store"] = f"sqlite:///{tmp / 'basht.db'}"
    spec["search"].update(pruner="none", max_budget=4, max_trials=6)
    spec["measure"] = {"energy": "estimate"}
    result = basht.run(spec, results_root=tmp / "results")
    return spec["store"], result.run_id, tmp


def _table(values, mode="max", seconds=None):
    seconds = seconds or [[1.0] * len(row) for row in values]
    return RecordedCurves(
        metric="accuracy",
        mode=mode,
        configs=[{"i": i} for i in range(len(values))],
        values=values,
        seconds=seconds,
    )


@pytest.mark.integration
def test_a_run_becomes_a_table_of_its_stored_reports(recorded_run):
    url, run_id, _ = recorded_run
    curves = RecordedCurves.from_run(url, run_id)
    store = Store(url)
    trials = store.trials(run_id)
    reports = store.reports(run_id)
    store.close()
    assert (len(curves), curves.epochs) == (6, 4)
    assert (curves.metric, curves.mode) == ("accuracy", "max")
    assert curves.source["left_out"] == 0 and curves.source["workload"] == "sleep"
    by_trial = {t.id: t for t in trials}
    for report in reports:
        row = curves.configs.index(by_trial[report.trial_id].config)
        assert curves.values[row][report.epoch - 1] == report.value
        assert curves.seconds[row][report.epoch - 1] == report.train_s + report.validate_s
    assert curves.load_s > 0.0


@pytest.mark.integration
def test_saved_tables_load_back_gzipped_or_not(recorded_run, tmp_path):
    url, run_id, _ = recorded_run
    curves = RecordedCurves.from_run(url, "latest")
    assert curves.source["run"] == run_id
    for name in ("curves.json.gz", "curves.json"):
        loaded = RecordedCurves.load(curves.save(tmp_path / name))
        assert loaded.configs == curves.configs and loaded.metric == curves.metric
        assert loaded.values == [[round(v, 6) for v in row] for row in curves.values]
        for saved, measured in zip(loaded.seconds, curves.seconds, strict=True):
            assert saved == pytest.approx(measured, rel=1e-3)
    assert (tmp_path / "curves.json.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_a_configuration_replays_one_row_the_same_way_each_time():
    curves = _table([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], seconds=[[1, 2], [3, 4], [5, 6]])
    config = {"lr": 0.01, "width": 64}
    row = curves.row(config)
    assert curves(config, 2) == (curves.values[row][1], curves.seconds[row][1])
    assert curves.row(dict(config)) == row  # by value, not by identity
    assert curves.with_seed(0).row(config) == row
    rows = {RecordedCurves.row(curves.with_seed(s), config) for s in range(40)}
    assert rows == {0, 1, 2}  # another seed, another draw


def test_every_row_is_drawn_once_before_any_twice():
    curves = _table([[float(i)] for i in range(10)])
    space = SearchSpace({"x": Float(0.0, 1.0)})
    import numpy as np

    rng = np.random.default_rng(0)
    configs = [space.sample(rng) for _ in range(25)]
    rows = [curves.row(config) for config in configs]
    assert sorted(rows[:10]) == sorted(rows[10:20]) == list(range(10))  # two full passes
    assert len(set(rows[20:])) == 5 and rows[:10] != rows[10:20]  # each pass its own order
    assert [curves.row(dict(c)) for c in configs] == rows  # met again: the same row
    again = curves.with_seed(0)
    assert [again.row(c) for c in configs] == rows  # a seed is one order
    other = curves.with_seed(1)
    assert [other.row(c) for c in configs][:10] != rows[:10]


def test_as_many_trials_as_rows_replay_the_recorded_population():
    values = [[0.01 * ((7 * i) % 40), 0.01 * ((11 * i) % 40)] for i in range(40)]
    curves = _table(values)
    space = SearchSpace({"x": Float(0.0, 1.0)})
    for seed in range(5):  # drawn with replacement, the best row would be missed 1 time in 3
        algorithm = RandomSearch(space, metric="accuracy", max_budget=2, max_trials=40, seed=seed)
        result = simulate(algorithm, 3, curves.with_seed(seed))
        assert result.trials == 40
        assert result.best_value == max(max(row) for row in values)
        assert result.best_completed == max(row[1] for row in values)


def test_the_target_is_as_rare_as_asked():
    curves = _table([[0.1, 0.5], [0.9, 0.2], [0.3, 0.4], [0.7, 0.6]])
    assert curves.best() == [0.5, 0.9, 0.4, 0.7]
    assert curves.target(0.25) == 0.9  # one configuration in four
    assert curves.target(0.5) == 0.7
    assert curves.target(1.0) == 0.4
    low = _table([[0.1, 0.5], [0.9, 0.2], [0.3, 0.4], [0.7, 0.6]], mode="min")
    assert low.target(0.25) == 0.1
    with pytest.raises(BashtError, match="fraction"):
        curves.target(0.0)


@pytest.mark.integration
def test_algorithms_run_on_recorded_curves_and_stop_at_the_recorded_end(recorded_run):
    url, run_id, _ = recorded_run
    curves = RecordedCurves.from_run(url, run_id)
    space = SearchSpace({"x": Float(-1.0, 1.0)})
    asha = ASHA(space, metric="accuracy", max_budget=4, eta=2, max_trials=50, seed=1)
    result = simulate(asha, 4, curves, load_s=curves.load_s)
    assert result.trials == 50
    assert result.best_value == max(curves.best())  # 50 draws of 6 rows find the best
    too_long = SHA(space, metric="accuracy", max_budget=8, eta=2, max_trials=8)
    with pytest.raises(BashtError, match="recorded curves end at epoch 4; epoch 5 was asked"):
        simulate(too_long, 2, curves)


def _run(tmp_path, **changes):
    from tests.conftest import BASE

    spec = copy.deepcopy(BASE)
    spec["store"] = f"sqlite:///{tmp_path / 'basht.db'}"
    spec["measure"] = {"energy": "estimate"}
    for key, value in changes.items():
        spec[key].update(value)
    return spec["store"], basht.run(spec, results_root=tmp_path / "results").run_id


@pytest.mark.integration
def test_trials_stopped_early_are_left_out(tmp_path):
    url, run_id = _run(tmp_path, search={"pruner": "asha", "max_budget": 4, "eta": 2})
    store = Store(url)
    full = [t.config for t in store.trials(run_id) if t.budget == 4]
    store.close()
    curves = RecordedCurves.from_run(url, run_id)
    assert curves.configs == full and curves.source["left_out"] == 4 - len(full) > 0


@pytest.mark.integration
def test_a_run_with_no_full_curve_is_refused_in_one_line(tmp_path):
    with pytest.raises(BashtError, match="nothing to test"):  # every trial failed to load
        _run(
            tmp_path,
            workload={"params": {"fail_on": "boom"}},
            space={"x": {"type": "choice", "values": ["boom"]}},
            search={"pruner": "none", "max_trials": 2},
        )
    url = f"sqlite:///{tmp_path / 'basht.db'}"
    with pytest.raises(BashtError, match="has no trial with a value at every epoch 1..2"):
        RecordedCurves.from_run(url, "latest")


@pytest.mark.parametrize(
    "content, message",
    [
        (b"not json", "is not a recorded-curves file"),
        (json.dumps({"format": "other"}).encode(), "format 'basht-recorded-curves/1'"),
        (
            # mtime 0: the same bytes in every process, so parallel workers collect one test id
            gzip.compress(json.dumps({"format": "basht-recorded-curves/1"}).encode(), mtime=0),
            "miss the key 'metric'",
        ),
    ],
    ids=["not-json", "other-format", "gzipped-without-metric"],
)
def test_bad_files_get_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "curves.json"
    path.write_bytes(content)
    with pytest.raises(BashtError, match=message) as err:
        RecordedCurves.load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(BashtError, match="cannot read recorded curves"):
        RecordedCurves.load(tmp_path / "missing.json")


def test_bad_tables_are_refused():
    with pytest.raises(BashtError, match="no configurations"):
        _table([])
    with pytest.raises(BashtError, match="same number of epochs"):
        _table([[0.1, 0.2], [0.3]])
    with pytest.raises(BashtError, match="mode must be"):
        _table([[0.1]], mode="up")


@pytest.mark.integration
def test_basht_curves_writes_the_table_and_names_what_is_wrong(recorded_run, tmp_path):
    from tests.cli import basht as basht_cli

    url, run_id, _ = recorded_run
    out = tmp_path / "table.json.gz"
    proc = basht_cli("curves", run_id[:12], "--store", url, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"6 configurations x 4 epochs of accuracy (mode max) from run {run_id}" in proc.stdout
    assert RecordedCurves.load(out).configs == RecordedCurves.from_run(url, run_id).configs
    proc = basht_cli("curves", "nope", "--store", url, "--out", str(out))
    assert proc.returncode != 0
    assert "no run matching 'nope'" in proc.stderr.strip().splitlines()[-1]


def test_the_shipped_digits_table_loads_whole():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "digits-curves.json.gz"
    curves = RecordedCurves.load(path)
    assert (len(curves), curves.epochs, curves.metric, curves.mode) == (1000, 81, "accuracy", "max")
    assert curves.source["workload"] == "digits-mlp" and curves.source["left_out"] == 0
    assert all(0.0 <= v <= 1.0 for row in curves.values for v in row)
    assert all(s > 0.0 for row in curves.seconds for s in row)
