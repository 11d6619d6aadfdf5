"""A native run with several objectives or constraints: what it measures of each trial while it
runs, what it restores on resume, and which trial its test phase uses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from basht.energy.billing import billing_price, trial_cost_usd
from basht.errors import BashtError
from basht.experiment import Experiment
from basht.states import TrialState
from basht.store import Store, TrialReportRow, TrialRow
from basht.tune.objectives import ENERGY_METRICS, Objectives, Spent, measured_metrics

if TYPE_CHECKING:
    from basht.bench.lifecycle import RunContext

#: The measured metrics that need the instance's price (`measured_metrics` adds them only then).
COST_METRICS = frozenset({"train_cost_usd", "train_cost_usd_spent"})


def objectives_of(experiment: Experiment) -> Objectives | None:
    """The run's objectives when its algorithm ranks scores; None for one metric alone."""
    search = experiment.search
    return Objectives.from_search(search) if search.is_multi else None


class TrialMeter:
    """What a report of trial n adds: its time, energy, carbon and cost, spent and projected.

    Energy and carbon are what the node's monitor booked to the trial, each stretch between two
    reports times the share of it its epochs took (training and validation, not loading): a trial that happened
    to load first on a fresh worker is not charged for the import, and a trial's load is not
    timed apart from its first epoch finely enough to subtract it (a report and the load before
    it often reach the driver together). The source is the run's `measurement.energy_sources`
    (`estimate` where no counter exists). Cost is the trial's share of the instance's price for
    the time its epochs took.
    """

    def __init__(self, ctx: RunContext, objectives: Objectives):
        exp = ctx.experiment
        self.monitor = ctx.monitor
        wanted = set(objectives.names)
        if wanted & ENERGY_METRICS and self.monitor is None:
            names = ", ".join(sorted(wanted & ENERGY_METRICS))
            raise BashtError(f"search: {names} needs the run's energy monitor, which is off here")
        price, _ = billing_price(exp)
        self.usd_per_s = (
            trial_cost_usd(price, 1.0, exp.resources.cpus_per_worker)
            if price.usd_per_hour > 0
            else None
        )
        if wanted & COST_METRICS and self.usd_per_s is None:
            names = ", ".join(sorted(wanted & COST_METRICS))
            raise BashtError(
                f"search: {names} needs a price for the resources (measure.price, or a plan's), "
                "which is 0 here"
            )
        self.max_budget = exp.search.max_budget
        # Per trial at its last report: booked energy and carbon, epoch and load seconds, and
        # the energy and carbon its epochs spent.
        self._last: dict[int, tuple[float, float, float, float, float, float]] = {}

    def __call__(self, trial_id: int, time_s: float, load_s: float, epoch: int) -> dict[str, float]:
        spent = Spent(time_s)
        if self.monitor is not None:
            spent.energy_j, spent.carbon_g = self._epochs_part(trial_id, time_s, load_s)
        return measured_metrics(spent, epoch, self.max_budget, self.usd_per_s)

    def _epochs_part(self, trial_id: int, time_s: float, load_s: float) -> tuple[float, float]:
        """The energy and emissions of the trial's epochs: what was booked to it since its last
        report, times the part of the time since then that its epochs took; added up, so that
        a resumed segment's load never makes it fall."""
        assert self.monitor is not None
        energy, carbon = self.monitor.booked(trial_id)
        last = self._last.get(trial_id, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
        d_time, d_load = time_s - last[2], load_s - last[3]
        share = d_time / (d_time + d_load) if d_time + d_load > 0 else 1.0
        spent_energy = last[4] + max(0.0, energy - last[0]) * share
        spent_carbon = last[5] + max(0.0, carbon - last[1]) * share
        self._last[trial_id] = (energy, carbon, time_s, load_s, spent_energy, spent_carbon)
        return spent_energy, spent_carbon


def last_metrics(store: Store, run_id: str) -> dict[int, tuple[float, dict[str, Any]]]:
    """Per trial (by its row id): the seconds its stored epochs took and its last report's
    metrics, as a resumed run takes them over."""
    with store.session() as s:
        rows = s.execute(
            select(
                TrialReportRow.trial_id,
                func.sum(TrialReportRow.train_s + TrialReportRow.validate_s),
                func.max(TrialReportRow.id),
            )
            .join(TrialRow, TrialRow.id == TrialReportRow.trial_id)
            .where(TrialRow.run_id == run_id)
            .group_by(TrialReportRow.trial_id)
        ).all()
        last_ids = [last for _, _, last in rows]
        metrics = dict(
            s.execute(
                select(TrialReportRow.id, TrialReportRow.metrics).where(
                    TrialReportRow.id.in_(last_ids)
                )
            ).all()
        )
    return {trial: (float(time_s or 0.0), metrics[last]) for trial, time_s, last in rows}


def completed_metrics(store: Store, run_id: str) -> dict[int, Mapping[str, Any]]:
    """The last report's metrics of every completed trial, by trial number."""
    numbers = {
        row.id: row.number
        for row in store.trials(run_id)
        if row.state == TrialState.COMPLETED and row.value is not None
    }
    return {
        numbers[row_id]: metrics
        for row_id, (_, metrics) in last_metrics(store, run_id).items()
        if row_id in numbers
    }


def chosen_trial(store: Store, run_id: str, objectives: Objectives) -> int | None:
    """The trial the test phase uses, by the experiment's rule (`search.choose`), among the
    completed trials that reported every objective; None when none did."""
    scored = {
        n: m for n, m in completed_metrics(store, run_id).items() if objectives.missing(m) is None
    }
    return objectives.choose(scored)
