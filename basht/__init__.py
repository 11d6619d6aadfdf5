"""Basht: sustainable, resource-aware hyperparameter tuning, and the benchmark that measures it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from basht.bench import RunResult, timed
from basht.errors import BashtError, ExperimentError
from basht.experiment import Experiment, load_experiment

__version__ = "0.1.0"

__all__ = [
    "BashtError",
    "Experiment",
    "ExperimentError",
    "RunResult",
    "load_experiment",
    "run",
    "timed",
]


def run(experiment: str | Path | Experiment | dict[str, Any], **kwargs: Any) -> RunResult:
    """Run the whole benchmark lifecycle for an experiment file, dict or Experiment."""
    from basht.bench import run_benchmark

    if isinstance(experiment, (str, Path)):
        experiment = load_experiment(experiment)
    elif isinstance(experiment, dict):
        experiment = Experiment.from_dict(experiment)
    return run_benchmark(experiment, **kwargs)
