"""`search.asha_variant`: promotion or stopping chosen in the file, or by the workload (auto)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from basht.errors import BashtError, ExperimentError
from basht.experiment import Experiment, peer_limit
from basht.tune.factory import describe, make_algorithm
from basht.tune.simulate import simulate_experiment
from tests.conftest import BASE
from tests.tune.test_simulate_experiment import _curves


def _experiment(**search: Any) -> Experiment:
    data = copy.deepcopy(BASE)
    data["search"].update({"pruner": "asha", "max_budget": 9, "eta": 3, "max_trials": 60})
    data["search"].update(search)
    data["resources"]["workers"] = 4
    return Experiment.from_dict(data)


@pytest.mark.parametrize(
    "asked, can_checkpoint, runs",
    [
        ("auto", True, "promotion"),
        ("auto", False, "stopping"),
        ("stopping", True, "stopping"),  # a checkpointing workload may still be stopped
        ("promotion", True, "promotion"),
    ],
)
def test_the_file_or_the_workload_picks_the_variant(asked, can_checkpoint, runs):
    for pruner in ("asha", "async-hyperband"):
        experiment = _experiment(pruner=pruner, asha_variant=asked)
        algorithm = make_algorithm(experiment, can_checkpoint)
        assert algorithm.variant == runs
        assert describe(experiment, algorithm).endswith(f"pruner {pruner} ({runs})")


def test_promotion_is_refused_for_a_workload_that_cannot_checkpoint():
    with pytest.raises(BashtError, match="asha_variant: promotion pauses trials in checkpoints"):
        make_algorithm(_experiment(asha_variant="promotion"), can_checkpoint=False)


@pytest.mark.parametrize(
    "search, says",
    [
        ({"pruner": "sha", "asha_variant": "stopping"}, "is for pruner asha or async-hyperband"),
        ({"pruner": "none", "asha_variant": "promotion"}, "is for pruner asha or async-hyperband"),
        ({"asha_variant": "stopping", "max_budget": None, "target": 0.9}, "null .* only with"),
        ({"asha_variant": "sometimes"}, "asha_variant"),
    ],
)
def test_a_variant_that_cannot_apply_is_one_line(search, says):
    with pytest.raises(ExperimentError, match=says) as err:
        _experiment(**search)
    assert "\n" not in str(err.value)


def test_peers_that_only_stop_refuse_promotion_asked_for():
    for system in ("optuna", "raytune", "synetune"):
        assert peer_limit(_experiment(asha_variant="promotion"), system)[0] == (
            "search.asha_variant"
        )
        assert peer_limit(_experiment(asha_variant="stopping"), system) is None


def test_a_simulated_search_runs_the_variant_the_file_asks_for():
    curves = _curves()
    rows = {
        variant: simulate_experiment(
            _experiment(asha_variant=variant), curves, pruners=["asha"], seeds=[0, 1]
        )[0]
        for variant in ("promotion", "stopping")
    }
    assert rows["stopping"]["algorithm"].endswith("pruner asha (stopping)")
    assert rows["promotion"]["algorithm"].endswith("pruner asha (promotion)")
    # The same seeds and curves: only the variant differs, and with it what ran (stopping
    # decides at once, promotion waits for eta results at a rung).
    ran = ("median_makespan_s", "median_trained_to_max")
    assert [rows["stopping"][k] for k in ran] != [rows["promotion"][k] for k in ran]
