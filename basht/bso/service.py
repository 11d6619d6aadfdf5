"""The optimizer's operations on its database: one transaction per request, safe with many workers.

Every operation on an existing job first takes that job's row lock (SELECT ... FOR UPDATE on
PostgreSQL, FOR SHARE to read a job's state; on SQLite the whole transaction is serialized by
BEGIN IMMEDIATE), then reads, decides and writes inside the same transaction. So two server
processes can never hand out the same trial number, lose a report, race on the job's minimum
cost, or show a job half-way through a change. Nothing is held in process memory.

The decisions are Zeus's (see `bandit`, `pruning` and `report`); the places where we differ from
Zeus are marked "Fix over Zeus".

Fix over Zeus: a trial whose client died without ending it (SIGKILL, a lost node) stays
Dispatched for ever in Zeus, and a pruning probe in that state stops pruning for good. Here every
report is a heartbeat, and when the job next asks for a batch size, its running trials that have
not reported for `trial_timeout_s` are marked Abandoned under the job's lock (see
`_abandon_silent`); no background task is needed, and a report and that decision can never
interleave.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from basht.bso import profiles
from basht.bso import rng as rngs
from basht.bso.bandit import ArmState, choose_arm, fit_arm, mab_window
from basht.bso.config import DEFAULT_CRASH_LIMIT, DEFAULT_TRIAL_TIMEOUT_S
from basht.bso.cost import zeus_cost
from basht.bso.db.schema import ArmRow, JobRow, TrialRow
from basht.bso.jit import LimitMeasurement, cheapest_limit
from basht.bso.pruning import Done, Explore, Probe, Wait, next_step
from basht.bso.spec import (
    Assignment,
    CreatedJob,
    JobSpecFromClient,
    PowerLimitChoice,
    PowerProfile,
    ReportResponse,
    Stage,
    TrainingResult,
    TrialId,
    TrialStatus,
    TrialType,
    spec_key,
)

log = logging.getLogger(__name__)

_SPEC_COLUMNS = tuple(CreatedJob.model_fields)


class ServiceError(Exception):
    """A request the server refuses; the HTTP layer answers `status_code` and {"message": ...}."""

    status_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(ServiceError):
    status_code = 400


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    status_code = 409


class Unprocessable(ServiceError):
    """Values that pass the request model but make no sense for this job: a FastAPI-style 422
    whose detail names `loc` (e.g. ("body", "time")) and the offending `value`."""

    status_code = 422

    def __init__(self, message: str, loc: tuple[str, ...], value: Any) -> None:
        super().__init__(message)
        self.loc = loc
        self.value = value


MAX_COST = 1e100
"""The largest cost a report may give (joules). Real costs are many orders of magnitude below;
the bound keeps the bandit's variance (cost squared) finite, as well as the cost itself."""


def _now() -> datetime:
    return datetime.now(UTC)


class BSOService:
    """Register jobs, hand out batch sizes, take reports, end trials, delete jobs.

    A running trial that sends no report for `trial_timeout_s` seconds is abandoned (0: never);
    a batch size whose pruning probe crashed `crash_limit` times in a row fails (0: never).
    """

    def __init__(
        self,
        engine: AsyncEngine,
        trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S,
        crash_limit: int = DEFAULT_CRASH_LIMIT,
    ) -> None:
        self.engine = engine
        self.trial_timeout_s = trial_timeout_s
        self.crash_limit = crash_limit
        self._sessions = async_sessionmaker(engine, expire_on_commit=False)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncSession]:
        async with self._sessions.begin() as session:
            yield session

    # -- POST /jobs ---------------------------------------------------------------------------

    async def register(self, spec: JobSpecFromClient) -> tuple[CreatedJob, bool]:
        """Create the job (True), or confirm an identical one exists (False); 409 if it differs.

        Without a `job_id` a new id `<prefix>-<8 hex>` is drawn, so such a registration always
        creates a job, as in Zeus. A concurrent insert of the same id loses on the primary key and
        is retried as a re-registration.
        """
        for _ in range(20):
            job_id = spec.job_id or f"{spec.job_id_prefix}-{secrets.token_hex(4)}"
            try:
                async with self._transaction() as s:
                    existing = await s.get(JobRow, job_id)
                    if existing is not None:
                        if spec.job_id is None:
                            continue  # an invented id that is taken: draw another
                        stored = _created_job(existing)
                        if spec_key(stored) != spec_key(spec.model_copy(update={"job_id": job_id})):
                            raise Conflict(
                                "JobSpec doesn't match with existing jobSpec. "
                                "Use a new job_id for different configuration"
                            )
                        return stored, False
                    s.add(_new_job_row(spec, job_id))
                    await s.flush()
                log.info("registered job %s", job_id)
                return CreatedJob.model_validate({**spec.model_dump(), "job_id": job_id}), True
            except IntegrityError:
                log.debug("job %s was registered concurrently; checking it again", job_id)
        raise ServiceError(f"could not register a job with prefix {spec.job_id_prefix!r}")

    # -- GET /jobs/batch_size -----------------------------------------------------------------

    async def next_trial(self, job_id: str) -> Assignment:
        """Open a trial with the batch size the job should train with next.

        Silent trials are abandoned first, so a probe whose client died is probed again instead
        of making every later request wait for it. A job that optimizes the power limit also
        gets the batch size's chosen limit, or, before the size has a profile, a request to
        profile the limits during this run.
        """
        async with self._transaction() as s:
            job = await _lock(s, job_id)
            if job is None:
                raise BadRequest(f"Unknown job({job_id}). Please register the job first")
            now = _now()  # after the lock: a report that got it first counts
            await _abandon_silent(s, job_id, self.trial_timeout_s, now)
            rng = None
            if job.stage == Stage.MAB:
                rng = rngs.load(job.rng_state)
                size = choose_arm(await _arms(s, job_id), rng, job.mab_num_explorations)
                kind = TrialType.MAB
            else:
                probes = await _probes(s, job, self.crash_limit)
                step = next_step(
                    job.batch_sizes, job.default_batch_size, job.num_pruning_rounds, probes
                )
                if isinstance(step, Explore):
                    size, kind = step.batch_size, TrialType.EXPLORATION
                elif isinstance(step, Wait):
                    size, kind = job.min_cost_batch_size, TrialType.CONCURRENT
                else:
                    arms = _start_mab(s, job, step, probes)
                    rng = rngs.load(job.rng_state)
                    size = choose_arm(arms, rng, job.mab_num_explorations)
                    kind = TrialType.MAB
            if rng is not None and job.mab_seed is not None:
                job.rng_state = rngs.dump(rng)
            number = (
                await s.scalar(
                    select(func.max(TrialRow.trial_number)).where(TrialRow.job_id == job_id)
                )
                or 0
            ) + 1
            s.add(
                TrialRow(
                    job_id=job_id,
                    trial_number=number,
                    batch_size=size,
                    type=kind.value,
                    status=TrialStatus.DISPATCHED.value,
                    start_timestamp=now,
                )
            )
            limit = await profiles.chosen_limit(s, job, size) if job.optimize_power_limit else None
        log.info("job %s trial %d: batch size %d (%s)", job_id, number, size, kind.value)
        if not job.optimize_power_limit:
            return Assignment(job_id=job_id, batch_size=size, trial_number=number)
        return Assignment(
            job_id=job_id,
            batch_size=size,
            trial_number=number,
            power_limit=limit,
            profile_power_limits=limit is None,
        )

    # -- POST /power_profiles -----------------------------------------------------------------

    async def report_power_profile(self, profile: PowerProfile) -> PowerLimitChoice:
        """Keep a batch size's power-limit profile (replacing an earlier one) and answer the limit
        of least cost, which every later trial of that batch size gets."""
        async with self._transaction() as s:
            job = await _lock(s, profile.job_id)
            if job is None:
                raise BadRequest(f"Unknown job {profile.job_id}")
            if not job.optimize_power_limit:
                raise BadRequest(
                    f"Job({profile.job_id}) does not optimize the power limit "
                    "(register it with optimize_power_limit: true)"
                )
            await _live_trial(s, profile.job_id, profile.batch_size, profile.trial_number)
            measurements = [
                LimitMeasurement(m.power_limit, m.time, m.energy) for m in profile.measurements
            ]
            await profiles.replace(
                s, job.job_id, profile.batch_size, profile.trial_number, measurements
            )
            limit = cheapest_limit(measurements, job.eta_knob, job.max_power)
        log.info(
            "job %s batch size %d: power limit %g W of %d profiled",
            profile.job_id,
            profile.batch_size,
            limit,
            len(measurements),
        )
        return PowerLimitChoice(
            job_id=profile.job_id, batch_size=profile.batch_size, power_limit=limit
        )

    # -- POST /report -------------------------------------------------------------------------

    async def report(self, result: TrainingResult) -> ReportResponse:
        """Decide after one epoch: keep training, or end the trial and learn from its cost.

        Training stops when the target is reached, when `max_epochs` is reached, or when the
        cost bound, beta_knob × the lowest cost of a recurrence (a run that reached the target,
        with the runs that failed since the converged run before it), is passed or would be by
        the next epoch (early stopping). The recurrence, as in the Zeus paper and its trace
        simulator: what getting one trained model cost is what a run is held against.

        Fixes over Zeus's server, costs it pays and Zeus's own trace simulator does not: the
        epoch that would cross the bound is not started (the latest epoch's cost is taken as
        the next one's; Zeus trains it and then calls the run failed, a whole epoch thrown away),
        a failed run never sets the bound alone (in Zeus a failed run cheaper than every
        converged one, out of epochs, lowers it, and later runs that would reach the target are
        cut off), and the bound counts recurrences, not single runs (a single converged run
        after failed ones makes a bound tighter than the paper's, which cuts off runs that
        would have converged).
        A NaN or infinite metric means the run diverged: it stops at once as a failure whose
        cost counts, so the bandit learns what the batch size cost (Zeus trains it on to the
        bound; refusing the report would crash the script and teach nothing). Every report is
        stored as the trial's progress and heartbeat; an abandoned trial's report is a 409.
        """
        async with self._transaction() as s:
            job = await _lock(s, result.job_id)
            if job is None:
                raise BadRequest(f"Unknown job {result.job_id}")
            trial = await _live_trial(s, result.job_id, result.batch_size, result.trial_number)
            if trial.status != TrialStatus.DISPATCHED:
                if trial.converged is None:
                    raise BadRequest(
                        f"Trial({trial.trial_number}) is already reported but converged is not set."
                    )
                return ReportResponse(
                    stop_train=True,
                    converged=trial.converged,
                    message=f"Result for this trial({trial.trial_number}) is already reported.",
                )

            cost_ub = float("inf")
            if job.beta_knob is not None and job.min_cost is not None:
                cost_ub = job.beta_knob * job.min_cost
            cost = zeus_cost(result.energy, result.time, job.eta_knob, job.max_power)
            if not cost <= MAX_COST:  # also catches an overflow to inf
                raise Unprocessable(
                    f"time {result.time:g} s and energy {result.energy:g} J give a cost of "
                    f"{cost:g} (eta_knob {job.eta_knob:g}, max_power {job.max_power:g} W), above "
                    f"the {MAX_COST:g} this server accepts",
                    ("body",),
                    {"time": result.time, "energy": result.energy},
                )
            within = cost_ub >= cost
            diverged = not math.isfinite(result.metric)
            if diverged:
                reached = False
            elif job.higher_is_better_metric:
                reached = job.target_metric <= result.metric
            else:
                reached = job.target_metric >= result.metric
            next_cost = cost + _epoch_cost(job, trial, result, cost)
            _record_progress(trial, result)
            affordable = next_cost <= cost_ub
            if affordable and result.current_epoch < job.max_epochs and not (reached or diverged):
                return ReportResponse(
                    stop_train=False,
                    converged=False,
                    message="Stop condition not met, keep training",
                )

            if reached and within:
                message = "Train succeeded"
            elif diverged:
                message = f"Batch Size({result.batch_size}) diverged: the metric is {result.metric}"
            elif not within:
                message = (
                    f"Batch Size({result.batch_size}) exceeded the cost upper bound: current "
                    f"cost({cost}) > beta_knob({job.beta_knob})*min_cost({job.min_cost})"
                )
            elif not reached and result.current_epoch < job.max_epochs:
                message = (
                    f"Batch Size({result.batch_size}) stopped before epoch "
                    f"{result.current_epoch + 1}: its cost (about {next_cost:g}) would exceed "
                    f"beta_knob({job.beta_knob})*min_cost({job.min_cost})"
                )
            else:
                message = f"Train failed to converge within max_epoch({job.max_epochs})"

            if job.stage == Stage.MAB:
                await _refit_arm(s, job, trial, cost)
            trial.status = TrialStatus.SUCCEEDED.value
            trial.end_timestamp = trial.last_report_at
            trial.converged = reached and within
            if trial.converged:
                recurrence = job.failed_cost + cost
                job.failed_cost = 0.0
                if job.min_cost is None or job.min_cost > recurrence:
                    job.min_cost = recurrence
                    job.min_cost_batch_size = result.batch_size
            else:
                job.failed_cost += cost
            converged = trial.converged
        log.info("job %s trial %d: %s", result.job_id, result.trial_number, message)
        return ReportResponse(stop_train=True, converged=converged, message=message)

    # -- PATCH /trials ------------------------------------------------------------------------

    async def end_trial(self, trial_id: TrialId) -> None:
        """Mark a trial that never reported a final result as Failed (Zeus's client calls this at
        exit, always). A finished trial is left as it is."""
        async with self._transaction() as s:
            await _lock(s, trial_id.job_id)
            trial = await s.get(TrialRow, (trial_id.job_id, trial_id.trial_number))
            if trial is None or trial.batch_size != trial_id.batch_size:
                raise NotFound(
                    f"Could not find the trial: job_id={trial_id.job_id} "
                    f"batch_size={trial_id.batch_size} trial_number={trial_id.trial_number}"
                )
            if trial.status == TrialStatus.DISPATCHED:
                trial.status = TrialStatus.FAILED.value
                trial.end_timestamp = _now()

    # -- DELETE /jobs -------------------------------------------------------------------------

    async def delete_job(self, job_id: str) -> None:
        async with self._transaction() as s:
            if await _lock(s, job_id) is None:
                raise NotFound("No job was deleted.")
            await s.execute(delete(TrialRow).where(TrialRow.job_id == job_id))
            await s.execute(delete(ArmRow).where(ArmRow.job_id == job_id))
            await profiles.delete_all(s, job_id)
            await s.execute(delete(JobRow).where(JobRow.job_id == job_id))
        log.info("deleted job %s", job_id)

    # -- GET /jobs ----------------------------------------------------------------------------

    async def job_state(self, job_id: str) -> dict[str, Any]:
        """Everything the server knows about a job: spec, stage, minimum cost, arms, trials.

        The job row is share-locked while its rows are read: on PostgreSQL each statement sees
        what was committed when it began, so without the lock a report committed between reading
        the job and reading its trials showed a Succeeded trial cheaper than the job's minimum
        cost (or a minimum of None), a state that never was. Writers hold the job's row lock for
        their whole transaction, so with it the three reads see one moment.
        """
        async with self._transaction() as s:
            job = await _lock(s, job_id, share=True)
            if job is None:
                raise NotFound(f"Unknown job({job_id})")
            arms = await _arms(s, job_id)
            trials = (
                await s.scalars(
                    select(TrialRow)
                    .where(TrialRow.job_id == job_id)
                    .order_by(TrialRow.trial_number)
                )
            ).all()
            return {
                "job": _created_job(job).model_dump(),
                "trial_timeout_s": self.trial_timeout_s or None,
                "crash_limit": self.crash_limit or None,
                "stage": job.stage,
                "min_cost": job.min_cost,
                "min_cost_batch_size": job.min_cost_batch_size,
                "failed_cost": job.failed_cost,
                "pruning_note": job.pruning_note,
                "power_limits": await profiles.state(s, job) if job.optimize_power_limit else None,
                "arms": [
                    {
                        "batch_size": a.batch_size,
                        "param_mean": a.param_mean,
                        "param_precision": _json_float(a.param_precision),
                        "reward_precision": _json_float(a.reward_precision),
                        "num_observations": a.num_observations,
                    }
                    for a in arms
                ],
                "trials": [
                    {
                        "trial_number": t.trial_number,
                        "batch_size": t.batch_size,
                        "type": t.type,
                        "status": t.status,
                        "time": t.time_s,
                        "energy": t.energy_j,
                        "converged": t.converged,
                        "epochs": t.epochs,
                        "metric": t.metric,
                        "started": _iso(t.start_timestamp),
                        "last_report": _iso(t.last_report_at),
                        "ended": _iso(t.end_timestamp),
                    }
                    for t in trials
                ],
            }


# -- helpers (all inside the caller's transaction) ----------------------------------------------


async def _lock(s: AsyncSession, job_id: str, share: bool = False) -> JobRow | None:
    """The job row, locked until the transaction ends: FOR UPDATE, or FOR SHARE with `share`
    (readers wait for a writer, not for each other). Both are no-ops on SQLite, whose BEGIN
    IMMEDIATE already serializes the whole transaction."""
    query = select(JobRow).where(JobRow.job_id == job_id).with_for_update(read=share)
    return await s.scalar(query)


def _utc(moment: datetime) -> datetime:
    """SQLite gives back the naive UTC time the server stored; PostgreSQL an aware one."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else _utc(moment).isoformat()


def _last_heard(trial: TrialRow) -> datetime:
    """When the trial last showed it was alive: its latest report, else its start."""
    return _utc(trial.last_report_at or trial.start_timestamp)


async def _abandon_silent(s: AsyncSession, job_id: str, timeout_s: float, now: datetime) -> None:
    """Mark Abandoned the job's running trials that have not reported for over `timeout_s`.

    Called with the job locked, like every report, so a report either lands first (and the
    trial lives on) or finds the trial abandoned; a slow client whose reports keep coming
    within the timeout is never touched. Nothing is deleted: the trial keeps its latest
    progress, and `end_timestamp` says when it was given up.
    """
    if timeout_s <= 0:
        return
    running = await s.scalars(
        select(TrialRow).where(
            TrialRow.job_id == job_id, TrialRow.status == TrialStatus.DISPATCHED.value
        )
    )
    for trial in running:
        silent_s = (now - _last_heard(trial)).total_seconds()
        if silent_s > timeout_s:
            trial.status = TrialStatus.ABANDONED.value
            trial.end_timestamp = now
            log.warning(
                "job %s trial %d (batch size %d, %s): abandoned, no report for %.0f s "
                "(trial timeout %g s)",
                job_id,
                trial.trial_number,
                trial.batch_size,
                trial.type,
                silent_s,
                timeout_s,
            )


async def _live_trial(s: AsyncSession, job_id: str, batch_size: int, trial_number: int) -> TrialRow:
    """The trial a request names, which must be of that batch size and not abandoned."""
    trial = await s.get(TrialRow, (job_id, trial_number))
    if trial is None or trial.batch_size != batch_size:
        raise BadRequest(
            f"Unknown trial (job_id={job_id}, batch_size={batch_size}, trial_number={trial_number})"
        )
    if trial.status == TrialStatus.ABANDONED:
        raise Conflict(_abandoned_message(trial))
    return trial


def _abandoned_message(trial: TrialRow) -> str:
    return (
        f"Trial({trial.trial_number}) was abandoned at {_iso(trial.end_timestamp)}: it sent no "
        f"report since {_iso(_last_heard(trial))}, longer than the server's trial timeout. Its "
        "batch size has been handed out again and this result is not used; relaunch the job "
        "(and raise the server's --trial-timeout if one epoch can take that long)."
    )


def _record_progress(trial: TrialRow, result: TrainingResult) -> None:
    """Keep the latest report on the trial: its heartbeat, and how far it got should it die."""
    trial.last_report_at = _now()
    trial.epochs = result.current_epoch
    trial.metric = result.metric if math.isfinite(result.metric) else None
    trial.time_s = result.time
    trial.energy_j = result.energy


async def _arms(s: AsyncSession, job_id: str) -> list[ArmState]:
    rows = await s.scalars(
        select(ArmRow).where(ArmRow.job_id == job_id).order_by(ArmRow.batch_size)
    )
    return [
        ArmState(
            r.batch_size, r.param_mean, r.param_precision, r.reward_precision, r.num_observations
        )
        for r in rows
    ]


def _epoch_cost(job: JobRow, trial: TrialRow, result: TrainingResult, cost: float) -> float:
    """What the next epoch will cost: what the latest one did (the increment since the trial's
    previous report, per epoch), or the mean epoch so far when there is no earlier report."""
    before = trial.epochs or 0
    if 0 < before < result.current_epoch and trial.time_s is not None:
        earlier = _cost(job, trial.time_s, trial.energy_j)
        return max(cost - earlier, 0.0) / (result.current_epoch - before)
    return cost / result.current_epoch


def _cost(job: JobRow, time_s: float | None, energy_j: float | None) -> float:
    assert time_s is not None and energy_j is not None, "a finished trial has time and energy"
    return zeus_cost(energy_j, time_s, job.eta_knob, job.max_power)


async def _probes(s: AsyncSession, job: JobRow, crash_limit: int) -> dict[int, list[Probe]]:
    """Exploration trials per batch size, in trial order (index = pruning round).

    A probe that crashed (ended by PATCH /trials without a result: Failed, or abandoned) tells
    nothing about its batch size, so it is left out and the size is probed again; but
    `crash_limit` crashes of one size in a row (0: never) count as one probe that did not reach
    the target, so a size that kills its script every time fails its round instead of being
    probed for ever (Zeus's server probes it again on every run).
    """
    rows = await s.scalars(
        select(TrialRow)
        .where(TrialRow.job_id == job.job_id, TrialRow.type == TrialType.EXPLORATION.value)
        .order_by(TrialRow.trial_number)
    )
    probes: dict[int, list[Probe]] = defaultdict(list)
    crashes: dict[int, int] = defaultdict(int)  # per size, since its last probe
    for t in rows:
        if t.status in (TrialStatus.FAILED, TrialStatus.ABANDONED):
            crashes[t.batch_size] += 1
            if crashes[t.batch_size] == crash_limit:
                probes[t.batch_size].append(Probe(dispatched=False, converged=False, cost=None))
                crashes[t.batch_size] = 0
            continue
        crashes[t.batch_size] = 0
        dispatched = t.status == TrialStatus.DISPATCHED
        cost = None if dispatched else _cost(job, t.time_s, t.energy_j)
        probes[t.batch_size].append(Probe(dispatched, t.converged, cost))
    return probes


def _start_mab(
    s: AsyncSession, job: JobRow, done: Done, probes: dict[int, list[Probe]]
) -> list[ArmState]:
    """End pruning: fit one arm per surviving size on all its probes' rewards (−cost)."""
    arms = []
    for size in done.arms:
        rewards = [-p.cost for p in probes.get(size, ()) if p.cost is not None]
        arm = fit_arm(size, rewards, job.mab_prior_mean, job.mab_prior_precision)
        arms.append(arm)
        s.add(
            ArmRow(
                job_id=job.job_id,
                batch_size=arm.batch_size,
                param_mean=arm.param_mean,
                param_precision=arm.param_precision,
                reward_precision=arm.reward_precision,
                num_observations=arm.num_observations,
            )
        )
    job.stage = Stage.MAB.value
    job.pruning_note = done.note
    if done.note:
        log.warning("job %s: %s", job.job_id, done.note)
    log.info("job %s: bandit over batch sizes %s", job.job_id, done.arms)
    return arms


async def _refit_arm(s: AsyncSession, job: JobRow, trial: TrialRow, cost: float) -> None:
    """Refit the arm of the trial's batch size on its reward window plus this result.

    The window holds the size's finished trials of every type, newest first, as in Zeus. Fix over
    Zeus: a Concurrent trial that finishes after the switch to the bandit is learned from (Zeus
    answers 400 and loses the result); a size that is not an arm is only recorded.
    """
    arm = await s.get(ArmRow, (job.job_id, trial.batch_size))
    if arm is None:
        return
    query = (
        select(TrialRow.time_s, TrialRow.energy_j)
        .where(
            TrialRow.job_id == job.job_id,
            TrialRow.batch_size == trial.batch_size,
            TrialRow.status == TrialStatus.SUCCEEDED.value,
            TrialRow.trial_number != trial.trial_number,
        )
        .order_by(TrialRow.trial_number.desc())
    )
    if job.window_size > 0:
        query = query.limit(job.window_size)
    history = [-_cost(job, t, e) for t, e in (await s.execute(query)).all()]
    fitted = fit_arm(
        trial.batch_size,
        mab_window(history, -cost, job.window_size),
        job.mab_prior_mean,
        job.mab_prior_precision,
    )
    arm.param_mean = fitted.param_mean
    arm.param_precision = fitted.param_precision
    arm.reward_precision = fitted.reward_precision
    arm.num_observations = fitted.num_observations


def _new_job_row(spec: JobSpecFromClient, job_id: str) -> JobRow:
    data = spec.model_dump()
    data["job_id"] = job_id
    return JobRow(
        **{name: data[name] for name in _SPEC_COLUMNS},
        stage=Stage.PRUNING.value,
        min_cost=None,
        min_cost_batch_size=spec.default_batch_size,
        failed_cost=0.0,
        rng_state=None if spec.mab_seed is None else rngs.initial_state(spec.mab_seed),
        created_at=_now(),
    )


def _created_job(row: JobRow) -> CreatedJob:
    return CreatedJob.model_validate({name: getattr(row, name) for name in _SPEC_COLUMNS})


def _json_float(value: float) -> float | str:
    """JSON has no infinity; an infinite precision (a single observation) is sent as "inf"."""
    return value if value != float("inf") else "inf"
