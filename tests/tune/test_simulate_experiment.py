"""`basht simulate`: an experiment's search with each pruner, replaying measured curves."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import pytest

from basht.engine import RecordedCurves
from basht.errors import BashtError
from basht.experiment import Experiment
from basht.tune.factory import make_algorithm
from basht.tune.simulate import median_time, simulate, simulate_experiment
from tests.cli import basht
from tests.conftest import BASE

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "benchmarks" / "data" / "digits-curves.json.gz"


def _curves(rows: int = 30, epochs: int = 9) -> RecordedCurves:
    """Rows that rise to 0.5 + i/100 (row 29 best, at 0.79), each epoch one second."""
    values = [[(0.5 + i / 100) * (1 - 0.5**e) for e in range(1, epochs + 1)] for i in range(rows)]
    return RecordedCurves(
        metric="accuracy",
        mode="max",
        configs=[{"row": i} for i in range(rows)],
        values=values,
        seconds=[[1.0] * epochs for _ in range(rows)],
        load_s=0.5,
    )


def _experiment(**search) -> Experiment:
    data = copy.deepcopy(BASE)
    data["search"].update({"max_budget": 9, "eta": 3, "max_trials": 60, **search})
    data["resources"]["workers"] = 4
    return Experiment.from_dict(data)


def test_each_pruner_is_simulated_as_the_run_would_build_it():
    experiment, curves = _experiment(), _curves()
    target = curves.target(0.1)
    rows = simulate_experiment(
        experiment, curves, pruners=["sha", "asha"], seeds=[0, 1], target=target
    )
    assert [r["pruner"] for r in rows] == ["sha", "asha"]
    assert rows[1]["algorithm"].endswith("pruner asha (promotion)")
    for row in rows:
        variant = experiment.model_copy(
            update={"search": experiment.search.model_copy(update={"pruner": row["pruner"]})}
        )
        by_hand = [
            simulate(
                make_algorithm(variant.model_copy(update={"seed": seed})),
                4,
                curves.with_seed(seed),
                target=target,
                seed=seed,
                load_s=0.5,
            )
            for seed in (0, 1)
        ]
        assert row["workers"] == 4 and row["target"] == target
        assert row["reached"] == sum(r.time_to_target_s is not None for r in by_hand)
        assert row["median_time_to_target_s"] == median_time([r.time_to_target_s for r in by_hand])


def test_without_a_target_every_run_goes_to_its_end():
    rows = simulate_experiment(_experiment(), _curves(), pruners=["none"], seeds=[0], workers=2)
    (row,) = rows
    assert row["target"] is None and row["median_time_to_target_s"] is None
    assert row["median_trained_to_max"] == 60  # no pruning: all 60 trials to 9 epochs
    assert row["median_makespan_s"] == pytest.approx(60 * (9 + 0.5) / 2)


def test_a_target_no_row_reaches_is_never_reached():
    rows = simulate_experiment(_experiment(), _curves(), pruners=["asha"], seeds=[0], target=0.99)
    assert rows[0]["reached"] == 0 and rows[0]["median_time_to_target_s"] is None


def test_median_time_counts_never_as_slowest():
    assert median_time([1.0, None, 3.0]) == 3.0
    assert median_time([1.0, None, None]) is None
    assert not math.isinf(median_time([2.0]))


@pytest.mark.parametrize(
    "search, message",
    [
        (
            {"metric": "loss", "mode": "min"},
            "tunes 'loss' (min) but the curves recorded 'accuracy'",
        ),
        ({"max_budget": 27}, "search.max_budget is 27; the curves end at epoch 9"),
        ({"max_trials": None, "target": 0.7}, "needs search.max_trials"),
        ({"sampler": "tpe"}, "recorded curves are drawn by row, not by value"),
    ],
)
def test_an_experiment_the_curves_cannot_answer_is_refused(search, message):
    with pytest.raises(BashtError, match=re.escape(message)):
        simulate_experiment(_experiment(**search), _curves(), seeds=[0])


def test_unknown_pruners_are_refused():
    with pytest.raises(BashtError, match="pruners must be among"):
        simulate_experiment(_experiment(), _curves(), pruners=["sha", "pbt"])
    with pytest.raises(BashtError, match="got 'pbt'"):  # names what was wrong
        simulate_experiment(_experiment(), _curves(), pruners=["sha", "pbt"])


@pytest.mark.parametrize(
    "table, message",
    [
        ({"configs": 5}, "configs must be a list of objects"),
        ({"values": [["a"] * 9]}, "values row 0 holds 'a', not a number"),
        ({"values": [[None] * 9]}, "values row 0 holds None, not a number"),
        ({"seconds": [[-1.0] * 9]}, "seconds row 0 holds -1.0, not a number of seconds >= 0"),
        ({"seconds": [1.0] * 9}, "seconds must be a list of rows"),
    ],
    ids=["configs", "string", "null", "negative-seconds", "flat-seconds"],
)
def test_a_malformed_table_is_refused_in_one_line_before_simulating(tmp_path, table, message):
    curves = _curves(rows=1)
    data = {
        "format": "basht-recorded-curves/1",
        "metric": curves.metric,
        "mode": curves.mode,
        "configs": curves.configs,
        "values": curves.values,
        "seconds": curves.seconds,
        **table,
    }
    path = tmp_path / "curves.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BashtError, match=re.escape(message)) as err:
        RecordedCurves.load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.integration
def test_basht_simulate_on_the_shipped_digits_curves():
    example = str(ROOT / "examples" / "digits-asha.yaml")
    proc = basht(
        "simulate", example, "--curves", str(DIGITS), "--workers", "25", "--target-top", "0.1",
        "--pruners", "sha,asha", "--seeds", "2", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["pruner"] for r in rows] == ["sha", "asha"]
    assert all(r["workers"] == 25 and r["seeds"] == [0, 1] for r in rows)
    assert rows[0]["target"] == RecordedCurves.load(DIGITS).target(0.1)
    table = basht("simulate", example, "--curves", str(DIGITS), "--pruners", "asha", "--seeds", "1")
    assert table.returncode == 0, table.stderr
    assert "2 simulated workers" in table.stdout and "asha" in table.stdout
    bad = basht("simulate", example, "--curves", str(DIGITS), "--pruners", "pbt")
    assert bad.returncode != 0
    assert "pruners must be among" in bad.stderr.strip().splitlines()[-1]
