"""The SQLAlchemy 2 schema: one table per record kind the benchmark keeps."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class ExperimentRow(Base):
    __tablename__ = "experiment"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    spec: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(DateTime)


class RunRow(Base):
    __tablename__ = "run"

    id: Mapped[str] = mapped_column(String(120), primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiment.id"), index=True)
    system: Mapped[str] = mapped_column(String(40))
    executor: Mapped[str] = mapped_column(String(40))
    algorithm: Mapped[str | None] = mapped_column(String(80))  # e.g. "asha (promotion)"
    status: Mapped[str] = mapped_column(String(20))
    results_dir: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime)
    best_trial: Mapped[int | None] = mapped_column(Integer)
    best_value: Mapped[float | None] = mapped_column(Float)
    best_config: Mapped[dict[str, Any] | None]
    test_metrics: Mapped[dict[str, Any] | None]
    error: Mapped[str | None] = mapped_column(Text)
    host: Mapped[dict[str, Any] | None]
    measurement: Mapped[dict[str, Any] | None]  # energy sources, carbon source, sample interval
    # What ended the search before the algorithm ran out: a target, a time or energy budget
    stop_reason: Mapped[str | None] = mapped_column(Text)


class PhaseRow(Base):
    __tablename__ = "phase"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id"), index=True)
    name: Mapped[str] = mapped_column(String(40))
    attempt: Mapped[int] = mapped_column(Integer, default=1)  # 2, 3, ... after `basht resume`
    start: Mapped[float] = mapped_column(Float)  # unix time, seconds
    end: Mapped[float] = mapped_column(Float)
    duration_s: Mapped[float] = mapped_column(Float)
    aborted: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text)


class TrialRow(Base):
    __tablename__ = "trial"
    __table_args__ = (UniqueConstraint("run_id", "number"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(20), index=True)
    budget: Mapped[int] = mapped_column(Integer, default=0)  # epochs done
    target_budget: Mapped[int | None] = mapped_column(Integer)
    worker: Mapped[int | None] = mapped_column(Integer)
    started_at: Mapped[float | None] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float)
    load_s: Mapped[float] = mapped_column(Float, default=0.0)
    train_s: Mapped[float] = mapped_column(Float, default=0.0)
    validate_s: Mapped[float] = mapped_column(Float, default=0.0)
    value: Mapped[float | None] = mapped_column(Float)  # the metric at the last report
    error: Mapped[str | None] = mapped_column(Text)


class TrialReportRow(Base):
    __tablename__ = "trial_report"

    id: Mapped[int] = mapped_column(primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id"), index=True)
    epoch: Mapped[int] = mapped_column(Integer)
    value: Mapped[float | None] = mapped_column(Float)
    metrics: Mapped[dict[str, Any]]
    train_s: Mapped[float] = mapped_column(Float)
    validate_s: Mapped[float] = mapped_column(Float)
    at: Mapped[float] = mapped_column(Float)


class DecisionRow(Base):
    """One call of the algorithm, in order: replaying them rebuilds its state exactly."""

    __tablename__ = "decision"
    __table_args__ = (UniqueConstraint("run_id", "seq"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    op: Mapped[str] = mapped_column(String(10))  # suggest | report | complete | fail
    trial: Mapped[int] = mapped_column(Integer)
    budget: Mapped[int | None] = mapped_column(Integer)
    value: Mapped[float | None] = mapped_column(Float)
    # Several objectives or constraints: the costs the algorithm was told (value: the first one's)
    scores: Mapped[list[Any] | None]
    result: Mapped[str | None] = mapped_column(String(20))  # new | resume | continue | pause | stop


class CheckpointRow(Base):
    __tablename__ = "checkpoint"

    id: Mapped[int] = mapped_column(primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trial.id"), index=True)
    epoch: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(20))  # pause | final
    size_bytes: Mapped[int] = mapped_column(BigInteger)  # a large model's state exceeds 2 GiB
    at: Mapped[float] = mapped_column(Float)
    deleted: Mapped[bool] = mapped_column(Boolean, default=False)


class PowerSampleRow(Base):
    __tablename__ = "power_sample"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id"), index=True)
    at: Mapped[float] = mapped_column(Float)
    node: Mapped[str] = mapped_column(String(120))
    component: Mapped[str] = mapped_column(String(40))  # cpu | dram | gpu:0 | ...
    source: Mapped[str] = mapped_column(String(20))  # rapl | nvml | estimate | prometheus
    power_w: Mapped[float | None] = mapped_column(Float)
    energy_j: Mapped[float | None] = mapped_column(Float)
    utilization: Mapped[float | None] = mapped_column(Float)


class EnergyAccountRow(Base):
    """Energy and emissions booked to a trial or to an idle kind (baseline, allocation, overhead)."""

    __tablename__ = "energy_account"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id"), index=True)
    kind: Mapped[str] = mapped_column(String(20))  # trial | baseline | allocation | overhead
    trial: Mapped[int | None] = mapped_column(Integer)  # the trial's number within the run
    component: Mapped[str] = mapped_column(String(40))  # cpu | dram | memory | gpu:0 | ...
    source: Mapped[str] = mapped_column(String(20))  # rapl | nvml | estimate | prometheus
    energy_j: Mapped[float] = mapped_column(Float)
    emissions_g: Mapped[float] = mapped_column(Float)


class InstanceRow(Base):
    """An instance of an elastic cluster (a RubberBand plan): when it was asked for, ready and
    released, which is what the provider bills. `released_at` is empty while it lives."""

    __tablename__ = "instance"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)  # 0, 1, ... within the run, in launch order
    stage: Mapped[int] = mapped_column(Integer)  # the plan's stage it was launched for
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    workers: Mapped[list[Any]] = mapped_column(JSON)  # the worker indexes it holds
    launched_at: Mapped[float] = mapped_column(Float)  # unix time, seconds
    ready_at: Mapped[float | None] = mapped_column(Float)
    released_at: Mapped[float | None] = mapped_column(Float)


class StageRow(Base):
    """A stage of a job run on an elastic cluster: its instances, layout and when it ran."""

    __tablename__ = "stage"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id"), index=True)
    stage: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    instances: Mapped[int] = mapped_column(Integer)
    gpus_per_trial: Mapped[int] = mapped_column(Integer)
    slots: Mapped[int] = mapped_column(Integer)  # trials that run at once
    started_at: Mapped[float] = mapped_column(Float)  # its barrier: instances asked for
    ended_at: Mapped[float | None] = mapped_column(Float)  # its last trial ended
    planned_instances: Mapped[int | None] = mapped_column(Integer)  # as the run's plan had it
    # Re-planned at its barrier: the run's trials over the profile's time, and the estimated
    # seconds from the barrier to the end of the job.
    speed: Mapped[float | None] = mapped_column(Float)
    estimated_left_s: Mapped[float | None] = mapped_column(Float)


class MetricRow(Base):
    __tablename__ = "metric"

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id"), index=True)
    name: Mapped[str] = mapped_column(String(80))
    value: Mapped[float | None] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(40))
    source: Mapped[str | None] = mapped_column(String(40))
