"""What the tracker tests share: a system under test that stores a few trials as an engine would
(energy accounts included) without a process of its own, and a run of it with trackers."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basht.bench import BestTrial, RunContext, run_benchmark
from basht.experiment import Experiment
from basht.store import Store

#: (configuration, final state, the accuracy reported at each epoch)
TRIALS: list[tuple[dict[str, Any], str, list[float]]] = [
    ({"x": 0.5, "n": 2}, "completed", [0.2, 0.4, 0.6]),
    ({"x": -0.5, "n": 1}, "stopped", [0.1]),
    ({"x": 0.25, "n": 4}, "failed", []),
]
#: Joules booked to trial `number` (its energy source: `rapl`): (number + 1) Wh.
JOULES_PER_TRIAL = 3600.0
SOURCE = "rapl"


def trial_kwh(number: int) -> float:
    return JOULES_PER_TRIAL * (number + 1) / 3.6e6


class TrialsSystem:
    """Stores TRIALS during its run phase, each with its reports; `after_trial(ctx, number)`
    runs after each one is stored (a test waits there for a tracker to have seen it)."""

    name = "trials"

    def __init__(
        self, ctx: RunContext, after_trial: Callable[[RunContext, int], None] | None = None
    ):
        self.ctx, self.after_trial = ctx, after_trial

    def deploy(self) -> None: ...

    def setup(self) -> None: ...

    def run(self) -> None:
        store, run_id = self.ctx.store, self.ctx.run_id
        for number, (config, state, values) in enumerate(TRIALS):
            trial_id = store.add_trial(
                run_id, number, config, len(values) or 1, state="running", worker=0
            )
            store.update_trial(trial_id, started_at=time.time())
            for epoch, value in enumerate(values, 1):
                metrics = {"accuracy": value, "loss": 1.0 - value, "note": None}
                store.add_report(trial_id, epoch, value, metrics, 0.01, 0.001)
            error = "boom" if state == "failed" else None
            store.update_trial(trial_id, state=state, ended_at=time.time(), error=error)
            if self.after_trial is not None:
                self.after_trial(self.ctx, number)

    def collect_results(self) -> BestTrial:
        config, _, values = TRIALS[0]
        return BestTrial(0, config, values[-1], len(values))

    def test(self, best: BestTrial) -> dict[str, float]:
        return {"accuracy": 0.55}

    def collect_metrics(self) -> dict[str, Any]:
        """Each trial's energy, as the monitor books it (it has closed by now)."""
        store, run_id = self.ctx.store, self.ctx.run_id
        keys = ("kind", "trial", "component", "source", "energy_j", "emissions_g")
        rows = [{k: getattr(a, k) for k in keys} for a in store.energy_accounts(run_id)]
        rows += [
            {
                "kind": "trial",
                "trial": number,
                "component": "cpu",
                "source": SOURCE,
                "energy_j": JOULES_PER_TRIAL * (number + 1),
                "emissions_g": 0.38 * (number + 1),
            }
            for number in range(len(TRIALS))
        ]
        store.replace_energy_accounts(run_id, rows)
        return {}

    def undeploy(self) -> None: ...


@dataclass(frozen=True)
class Tracked:
    store_url: str
    run_id: str
    results_dir: Path
    status: str


def tracked_run(
    spec: dict[str, Any],
    tmp_path: Path,
    trackers: list[Any],
    after_trial: Callable[[RunContext, int], None] | None = None,
) -> Tracked:
    """A run of TrialsSystem with `measure.trackers: trackers`, its results under tmp_path."""
    spec = {**spec, "measure": {**spec.get("measure", {}), "trackers": trackers}}
    result = run_benchmark(
        Experiment.from_dict(spec),
        results_root=tmp_path / "results",
        system_factory=lambda ctx: TrialsSystem(ctx, after_trial),
    )
    return Tracked(spec["store"], result.run_id, result.results_dir, result.status)


def stored_trials(tracked: Tracked) -> list[Any]:
    store = Store(tracked.store_url, create=False)
    try:
        return list(store.trials(tracked.run_id))
    finally:
        store.close()
