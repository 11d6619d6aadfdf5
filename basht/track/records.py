"""What a tracker is told about a run: small frozen records read from the store, never ORM rows,
so a tracker knows nothing of the store and the same records serve a live run and an export."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from basht.energy.billing import billing_price, node_prices, trial_cost_usd
from basht.energy.monitor import J_PER_KWH, UNMEASURED, source_label
from basht.experiment import DERIVED_KEYS, Experiment
from basht.metrics import trial_compute_s
from basht.report.runstats import phase_durations
from basht.store import Store
from basht.store.schema import TrialReportRow, TrialRow

#: What a run's folder holds that trackers keep as artifacts: results.json and the plots.
ARTIFACT_PATTERNS = ("results.json", "*.png")


@dataclass(frozen=True)
class RunInfo:
    """The run as a tracker opens it."""

    run_id: str
    name: str  # the experiment's name
    system: str
    executor: str
    results_dir: Path
    started_at: float  # unix seconds
    experiment: Experiment

    @property
    def metric(self) -> str:
        return self.experiment.search.metric

    def settings(self) -> dict[str, Any]:
        """The experiment's settings worth a parameter of the run: what was searched, and how."""
        e = self.experiment
        return {
            "system": e.system,
            "executor": e.executor,
            "workload": e.workload.name,
            "seed": e.seed,
            "search.sampler": e.search.sampler,
            "search.pruner": e.search.pruner,
            "search.metric": e.search.metric,
            "search.mode": e.search.mode,
            "search.max_trials": e.search.max_trials,
            "search.min_budget": e.search.min_budget,
            "search.max_budget": e.search.max_budget,
            "resources.workers": e.resources.workers,
            "resources.accelerator": e.resources.accelerator,
            "measure.energy": e.measure.energy,
            "space_size": e.space_size,
        }


@dataclass(frozen=True)
class TrialInfo:
    """A trial as it stands: told when first seen and whenever its state or budget changes."""

    number: int
    config: dict[str, Any]
    state: str
    budget: int  # epochs done
    value: float | None  # the search metric at its last report
    started_at: float | None
    ended_at: float | None

    @property
    def label(self) -> str:
        """Its name in a tracker, zero-padded so that trials sort in order."""
        return f"trial-{self.number:04d}"


@dataclass(frozen=True)
class ReportInfo:
    """One epoch's report of a trial."""

    trial: int  # the trial's number
    epoch: int
    value: float | None
    metrics: dict[str, float]
    at: float  # unix seconds


@dataclass(frozen=True)
class TrialOutcome:
    """A trial's final figures, known once the run's energy accounts are closed."""

    trial: TrialInfo
    duration_s: float  # d_i: load + train + validate
    energy_kwh: float | None  # None: no meter saw all of it (a lost Ray node)
    emissions_g: float | None
    cost_usd: float | None
    energy_source: str  # estimate | rapl | nvml | ... | unmeasured | none

    def figures(self) -> dict[str, float]:
        """The figures that are known, by the names trackers log them under."""
        named = {
            "energy_kwh": self.energy_kwh,
            "emissions_g": self.emissions_g,
            "cost_usd": self.cost_usd,
            "duration_s": self.duration_s,
        }
        return {k: v for k, v in named.items() if v is not None}


@dataclass(frozen=True)
class MetricInfo:
    """A Table 2 metric of the run, with its unit and, for an energy figure, its source."""

    name: str
    value: float | None
    unit: str
    source: str | None


@dataclass(frozen=True)
class RunEnd:
    """Everything a tracker flushes when the run is over."""

    status: str  # completed | failed | interrupted | running (an export of a live run)
    error: str | None
    best_trial: int | None
    best_value: float | None
    test_metrics: dict[str, Any]
    phases_s: dict[str, float]
    metrics: list[MetricInfo]
    outcomes: list[TrialOutcome]
    energy_source: str
    artifacts: list[Path] = field(default_factory=list)


def read_run(store: Store, run_id: str) -> RunInfo:
    run = store.get_run(run_id)
    spec = dict(store.get_experiment(run.experiment_id).spec)
    for derived in DERIVED_KEYS:
        spec.pop(derived, None)
    experiment = Experiment.from_dict(spec, f"run {run.id}")
    return RunInfo(
        run_id=run.id,
        name=experiment.name,
        system=run.system,
        executor=run.executor,
        results_dir=Path(run.results_dir),
        # The store keeps UTC without its zone: read it as UTC, not as local time.
        started_at=_utc_seconds(run.started_at) if run.started_at else 0.0,
        experiment=experiment,
    )


def _utc_seconds(moment: datetime) -> float:
    return moment.replace(tzinfo=UTC).timestamp()


def _trial(row: TrialRow) -> TrialInfo:
    return TrialInfo(
        number=row.number,
        config=dict(row.config or {}),
        state=row.state,
        budget=row.budget,
        value=row.value,
        started_at=row.started_at,
        ended_at=row.ended_at,
    )


def read_trials(store: Store, run_id: str) -> list[TrialInfo]:
    return [_trial(row) for row in store.trials(run_id)]


def read_reports(store: Store, run_id: str, after: int = 0) -> tuple[list[ReportInfo], int]:
    """The run's reports stored after the one with id `after`, in order, and the last id read
    (`after` again when there is none): a follower asks only for what is new."""
    query = (
        select(TrialReportRow, TrialRow.number)
        .join(TrialRow, TrialRow.id == TrialReportRow.trial_id)
        .where(TrialRow.run_id == run_id, TrialReportRow.id > after)
        .order_by(TrialReportRow.id)
    )
    with store.session() as s:
        rows = s.execute(query).all()
    reports = [
        ReportInfo(
            trial=number,
            epoch=row.epoch,
            value=row.value,
            metrics=dict(row.metrics or {}),
            at=row.at,
        )
        for row, number in rows
    ]
    return reports, (rows[-1][0].id if rows else after)


def read_end(store: Store, run_id: str, experiment: Experiment) -> RunEnd:
    run = store.get_run(run_id)
    accounts = store.energy_accounts(run_id)
    results_dir = Path(run.results_dir)
    return RunEnd(
        status=run.status,
        error=run.error,
        best_trial=run.best_trial,
        best_value=run.best_value,
        test_metrics=dict(run.test_metrics or {}),
        phases_s=phase_durations(store, run_id),
        metrics=[MetricInfo(m.name, m.value, m.unit, m.source) for m in store.metrics(run_id)],
        outcomes=_outcomes(store, run_id, experiment, accounts),
        energy_source=source_label(accounts) or "none",
        artifacts=artifacts(results_dir),
    )


def artifacts(results_dir: Path) -> list[Path]:
    """results.json and the plots in a run's folder, as far as they are there now."""
    found: list[Path] = []
    for pattern in ARTIFACT_PATTERNS:
        found += sorted(p for p in results_dir.glob(pattern) if p.is_file())
    return found


def _outcomes(
    store: Store, run_id: str, experiment: Experiment, accounts: Any
) -> list[TrialOutcome]:
    """Each trial's E_i, emissions and c_i as `basht.metrics` defines them (its cost: its share
    of the instance over d_i, on the same billing functions)."""
    energy_j: dict[int, float] = defaultdict(float)
    emissions_g: dict[int, float] = defaultdict(float)
    by_trial: dict[int, list[Any]] = defaultdict(list)
    unmeasured: set[int] = set()
    for a in accounts:
        if a.kind != "trial" or a.trial is None:
            continue
        if a.component == UNMEASURED:
            unmeasured.add(a.trial)
            continue
        energy_j[a.trial] += a.energy_j
        emissions_g[a.trial] += a.emissions_g
        by_trial[a.trial].append(a)
    price, _ = billing_price(experiment)
    cpus = experiment.resources.cpus_per_worker
    gpus = 1 if experiment.resources.accelerator == "gpu" or experiment.plan is not None else 0
    sized = node_prices(store, run_id, price, experiment.measure.price.vcpus is None)
    out = []
    for row in store.trials(run_id):
        duration_s = trial_compute_s(row.load_s, row.train_s, row.validate_s)
        cost = trial_cost_usd(sized.get(row.worker, price), duration_s, cpus, gpus)
        measured = row.number not in unmeasured
        out.append(
            TrialOutcome(
                trial=_trial(row),
                duration_s=duration_s,
                energy_kwh=energy_j.get(row.number, 0.0) / J_PER_KWH if measured else None,
                emissions_g=emissions_g.get(row.number, 0.0) if measured else None,
                cost_usd=cost if math.isfinite(cost) else None,
                energy_source=(source_label(by_trial[row.number]) or "none")
                if measured
                else UNMEASURED,
            )
        )
    return out


def numbers(values: dict[str, Any]) -> dict[str, float]:
    """The finite numbers among `values` (a report's metrics may hold a null, a NaN or a string
    that no tracker takes as a metric)."""
    out = {}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[key] = float(value)
    return out
