"""The executor contract: every executor is an `Executor`, and a trial worker stays light."""

from __future__ import annotations

import inspect
import time

import pytest
import yaml

from basht.engine import COMPLETE, Executor, LocalExecutor, SimulatedExecutor, TrialTask
from basht.engine.ray import RayExecutor
from basht.plan.executor import PlanExecutor
from basht.store import Store
from basht.workloads.base import WorkloadRef
from tests.cli import basht


@pytest.mark.parametrize("cls", [LocalExecutor, SimulatedExecutor, RayExecutor, PlanExecutor])
def test_every_executor_implements_the_contract(cls):
    assert issubclass(cls, Executor)
    assert not inspect.isabstract(cls), cls.__abstractmethods__


@pytest.mark.integration
def test_a_spawned_worker_imports_no_store_report_or_cli():
    """Lazy package roots: a worker running a trial loads what the trial needs, not SQLAlchemy,
    rich, typer, pydantic, YAML or any `basht.report`, `basht.store` or `basht.cli` module."""
    ex = LocalExecutor(workers=1)
    ex.start()
    try:
        ex.setup(WorkloadRef("tests.engine.import_probe:probe"))
        ex.submit(TrialTask(1, {}, WorkloadRef("tests.engine.import_probe:probe"), seed=0))
        deadline, report = time.monotonic() + 60, None
        while report is None and time.monotonic() < deadline:
            for event in ex.poll(1.0):
                assert event.kind != "failed", event.error
                if event.kind == "report":
                    report = event
        assert report is not None, "no report from the worker"
        ex.command(1, COMPLETE)
    finally:
        ex.shutdown()
    assert report.metrics["driver_only"] == 0
    assert report.metrics["basht_modules"] > 0


@pytest.mark.integration
def test_a_worker_of_basht_run_imports_no_store_report_or_cli(tmp_path):
    """The same through the CLI, whose `__main__` each spawned worker would otherwise import."""
    spec = {
        "name": "import-probe",
        "workload": {"name": "tests.engine.import_probe:probe"},
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "search": {"metric": "driver_only", "mode": "min", "max_budget": 1, "max_trials": 2},
        "resources": {"workers": 1},
        "store": f"sqlite:///{tmp_path / 'basht.db'}",
    }
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = basht("run", "-q", str(path), "--results", str(tmp_path / "results"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    store = Store(spec["store"])
    trials = store.trials(store.list_runs(limit=1)[0].id)
    assert len(trials) == 2 and all(t.value == 0 for t in trials), [t.value for t in trials]
