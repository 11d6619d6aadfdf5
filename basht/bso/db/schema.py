"""The BSO server's tables: jobs, their bandit arms, their trials and their power-limit profiles.

Tables are prefixed `bso_` so they can share a database with Basht's run store. Changes to this
file need a new Alembic revision in `basht/bso/migrations/versions/`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Explicit constraint names, so migrations are the same on every database.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Double precision everywhere: the 200-versus-409 check on re-registration compares stored floats
# with the client's, and precisions can be infinite (PostgreSQL and SQLite both store inf).
Double = Float(precision=53)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class JobRow(Base):
    """A recurring job: its spec, the client's GPU facts, and the optimizer's job-level state."""

    __tablename__ = "bso_jobs"

    job_id: Mapped[str] = mapped_column(String(400), primary_key=True)
    job_id_prefix: Mapped[str] = mapped_column(String(300))
    batch_sizes: Mapped[list[int]] = mapped_column(JSON)  # ascending
    default_batch_size: Mapped[int] = mapped_column(Integer)
    eta_knob: Mapped[float] = mapped_column(Double)
    beta_knob: Mapped[float | None] = mapped_column(Double, nullable=True)
    target_metric: Mapped[float] = mapped_column(Double)
    higher_is_better_metric: Mapped[bool] = mapped_column(Boolean)
    max_epochs: Mapped[int] = mapped_column(Integer)
    num_pruning_rounds: Mapped[int] = mapped_column(Integer)
    window_size: Mapped[int] = mapped_column(Integer)
    mab_prior_mean: Mapped[float] = mapped_column(Double)
    mab_prior_precision: Mapped[float] = mapped_column(Double)
    mab_num_explorations: Mapped[int] = mapped_column(Integer)
    mab_seed: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    optimize_power_limit: Mapped[bool] = mapped_column(Boolean, server_default=false())
    max_power: Mapped[float] = mapped_column(Double)  # W, all the job's GPUs together
    number_of_gpus: Mapped[int] = mapped_column(Integer)
    gpu_model: Mapped[str] = mapped_column(String(300))

    stage: Mapped[str] = mapped_column(String(16))  # spec.Stage
    # The least cost of a recurrence: a converged run plus the runs that failed before it.
    min_cost: Mapped[float | None] = mapped_column(Double, nullable=True)
    min_cost_batch_size: Mapped[int] = mapped_column(Integer)
    # The cost of the runs that failed since the last converged one: the open recurrence's.
    failed_cost: Mapped[float] = mapped_column(Double, server_default="0")
    rng_state: Mapped[str | None] = mapped_column(Text, nullable=True)  # seeded jobs only
    pruning_note: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ArmRow(Base):
    """The bandit's belief about one batch size of a job in the MAB stage."""

    __tablename__ = "bso_arms"

    job_id: Mapped[str] = mapped_column(
        String(400), ForeignKey("bso_jobs.job_id", ondelete="CASCADE"), primary_key=True
    )
    batch_size: Mapped[int] = mapped_column(Integer, primary_key=True)
    param_mean: Mapped[float] = mapped_column(Double)
    param_precision: Mapped[float] = mapped_column(Double)
    reward_precision: Mapped[float] = mapped_column(Double)
    num_observations: Mapped[int] = mapped_column(Integer)


class TrialRow(Base):
    """One training run of a job. Numbers are per job, from 1, never reused.

    While the trial runs, `epochs`, `metric`, `time_s` and `energy_j` hold its latest report, so
    a trial that fails or is abandoned keeps how far it got; only a Succeeded trial has a cost.
    """

    __tablename__ = "bso_trials"

    job_id: Mapped[str] = mapped_column(
        String(400), ForeignKey("bso_jobs.job_id", ondelete="CASCADE"), primary_key=True
    )
    trial_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    batch_size: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(16))  # spec.TrialType
    status: Mapped[str] = mapped_column(String(16))  # spec.TrialStatus
    start_timestamp: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    end_timestamp: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The latest report (every epoch's, not only the final one): a running trial silent for
    # longer than the trial timeout is abandoned. Until its first report, start_timestamp counts.
    last_report_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    time_s: Mapped[float | None] = mapped_column(Double, nullable=True)
    energy_j: Mapped[float | None] = mapped_column(Double, nullable=True)
    converged: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    epochs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    metric: Mapped[float | None] = mapped_column(Double, nullable=True)


class PowerProfileRow(Base):
    """One power limit's measurement in a batch size's just-in-time profile (jobs that optimize
    the power limit). The latest profile of a batch size replaces any earlier one."""

    __tablename__ = "bso_power_profiles"

    job_id: Mapped[str] = mapped_column(
        String(400), ForeignKey("bso_jobs.job_id", ondelete="CASCADE"), primary_key=True
    )
    batch_size: Mapped[int] = mapped_column(Integer, primary_key=True)
    power_limit_w: Mapped[float] = mapped_column(Double, primary_key=True)  # per GPU
    time_s: Mapped[float] = mapped_column(Double)
    energy_j: Mapped[float] = mapped_column(Double)
    trial_number: Mapped[int] = mapped_column(Integer)  # the trial that profiled it
