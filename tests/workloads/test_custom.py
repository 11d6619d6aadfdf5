"""A user's class workload checked before the run: its methods and its `metrics` attribute."""

from __future__ import annotations

from typing import Any

import pytest

from basht.bench.preflight import preflight
from basht.errors import ExperimentError
from basht.experiment import Experiment


class Complete:
    metrics = ("accuracy",)

    def __init__(self, seed: int = 0):
        self.epoch = 0

    def load(self, config: dict[str, Any], resources: Any) -> None:
        pass

    def train(self, epochs: int) -> None:
        self.epoch += epochs

    def validate(self) -> dict[str, float]:
        return {"accuracy": 0.5}

    def test(self) -> dict[str, float]:
        return {"accuracy": 0.5}

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch = state["epoch"]


class NoTest(Complete):
    test = None


class TrainTakesNoEpochs(Complete):
    def train(self) -> None:  # type: ignore[override]
        self.epoch += 1


class MetricsAsOneString(Complete):
    metrics = "accuracyx"  # type: ignore[assignment]


class MetricsAsANumber(Complete):
    metrics = 5  # type: ignore[assignment]


def _check(spec: dict[str, Any], name: str) -> None:
    spec["workload"] = {"name": f"tests.workloads.test_custom:{name}", "params": {}}
    preflight(Experiment.from_dict(spec), "exp.yaml")


def test_a_complete_class_workload_passes(spec):
    _check(spec, "Complete")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("NoTest", "workload.name: tests.workloads.test_custom:NoTest has no method test()"),
        (
            "TrainTakesNoEpochs",
            "workload.name: tests.workloads.test_custom:TrainTakesNoEpochs.train() "
            "cannot be called as train(epochs)",
        ),
        ("MetricsAsOneString", "metrics must be a tuple of metric names"),
        ("MetricsAsANumber", "metrics must be a tuple of metric names"),
    ],
)
def test_a_class_workload_the_run_would_trip_over_is_one_line(spec, name, message):
    with pytest.raises(ExperimentError) as err:
        _check(spec, name)
    assert str(err.value).startswith("exp.yaml: ") and message in str(err.value)
    assert "\n" not in str(err.value)


class SavesNoState(Complete):
    @classmethod
    def can_checkpoint(cls, **params: Any) -> bool:
        return False


def objective(config: dict[str, Any], trial: Any) -> None:
    """A plain function workload: stopped at rungs, never paused."""


@pytest.mark.parametrize("name", ["SavesNoState", "objective"])
def test_promotion_for_a_workload_that_cannot_checkpoint_is_one_line(spec, name):
    """`basht validate` says it before the run, as the run would when it builds its algorithm."""
    spec["search"].update({"pruner": "asha", "eta": 2, "asha_variant": "promotion"})
    with pytest.raises(ExperimentError) as err:
        _check(spec, name)
    assert "asha_variant: promotion pauses trials in checkpoints" in str(err.value)
    assert "\n" not in str(err.value)
    spec["search"]["asha_variant"] = "stopping"
    _check(spec, name)
