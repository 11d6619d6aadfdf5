"""Basht: sustainable, resource-aware hyperparameter tuning, and the benchmark that measures it.

The root imports nothing heavy: `basht.run`, `basht.Experiment` and the rest load on first use
(a spawned trial worker imports `basht.engine.worker` and must not pay for the store or reports).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from basht._lazy import lazy_exports

if TYPE_CHECKING:
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


def run(
    experiment: str | Path | Experiment | dict[str, Any],
    *,
    plan: str | Path | None = None,
    replan: bool = False,
    **kwargs: Any,
) -> RunResult:
    """Run the whole benchmark lifecycle for an experiment file, dict or Experiment; with `plan`
    (a `basht plan --json` file), on an elastic cluster that follows it, re-planned at each
    barrier with `replan`.

    Trials run in spawned processes that import the calling script: call this under
    `if __name__ == "__main__":` in a script.
    """
    from basht.bench import run_benchmark
    from basht.engine.local import refuse_in_a_starting_worker
    from basht.experiment import Experiment, load_experiment, with_plan

    refuse_in_a_starting_worker()
    if isinstance(experiment, (str, Path)):
        experiment = load_experiment(experiment)
    elif isinstance(experiment, dict):
        experiment = Experiment.from_dict(experiment)
    if plan is not None or replan:  # a RubberBand plan file (`basht plan --json`)
        experiment = with_plan(experiment, plan, replan=replan)
    return run_benchmark(experiment, **kwargs)


__getattr__, __dir__ = lazy_exports(__name__)  # after `run`, which is defined here
