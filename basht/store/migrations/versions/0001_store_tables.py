"""The run store's tables as the releases before migrations made them (`basht/store/schema.py`).

Revision ID: 0001
Revises:
Create Date: 2026-12-01

The tables are written out here as they stand at this revision, not taken from `schema.py`
(which moves on with later revisions): `basht.store.migrate` also brings a store from a release
before migrations to exactly these tables, adding the ones and the columns it lacks, before it
stamps the store at this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def metadata() -> sa.MetaData:
    """The store's tables at this revision. Column defaults are kept: they are the DEFAULT of a
    column added to an older store's table that has rows already."""
    md = sa.MetaData()
    sa.Table(
        "experiment",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, index=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    sa.Table(
        "run",
        md,
        sa.Column("id", sa.String(120), primary_key=True),
        sa.Column(
            "experiment_id",
            sa.Integer(),
            sa.ForeignKey("experiment.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("system", sa.String(40), nullable=False),
        sa.Column("executor", sa.String(40), nullable=False),
        sa.Column("algorithm", sa.String(80), nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("results_dir", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
        sa.Column("best_trial", sa.Integer(), nullable=True),
        sa.Column("best_value", sa.Float(), nullable=True),
        sa.Column("best_config", sa.JSON(), nullable=True),
        sa.Column("test_metrics", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("host", sa.JSON(), nullable=True),
        sa.Column("measurement", sa.JSON(), nullable=True),
        sa.Column("stop_reason", sa.Text(), nullable=True),
    )
    sa.Table(
        "phase",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("name", sa.String(40), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False, default=1),
        sa.Column("start", sa.Float(), nullable=False),
        sa.Column("end", sa.Float(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("aborted", sa.Boolean(), nullable=False, default=False),
        sa.Column("error", sa.Text(), nullable=True),
    )
    sa.Table(
        "trial",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(20), nullable=False, index=True),
        sa.Column("budget", sa.Integer(), nullable=False, default=0),
        sa.Column("target_budget", sa.Integer(), nullable=True),
        sa.Column("worker", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("load_s", sa.Float(), nullable=False, default=0.0),
        sa.Column("train_s", sa.Float(), nullable=False, default=0.0),
        sa.Column("validate_s", sa.Float(), nullable=False, default=0.0),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.UniqueConstraint("run_id", "number"),
    )
    sa.Table(
        "trial_report",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _trial_id(),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("train_s", sa.Float(), nullable=False),
        sa.Column("validate_s", sa.Float(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
    )
    sa.Table(
        "decision",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("op", sa.String(10), nullable=False),
        sa.Column("trial", sa.Integer(), nullable=False),
        sa.Column("budget", sa.Integer(), nullable=True),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("result", sa.String(20), nullable=True),
        sa.UniqueConstraint("run_id", "seq"),
    )
    sa.Table(
        "checkpoint",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _trial_id(),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False, default=False),
    )
    sa.Table(
        "power_sample",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("node", sa.String(120), nullable=False),
        sa.Column("component", sa.String(40), nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("power_w", sa.Float(), nullable=True),
        sa.Column("energy_j", sa.Float(), nullable=True),
        sa.Column("utilization", sa.Float(), nullable=True),
    )
    sa.Table(
        "energy_account",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("trial", sa.Integer(), nullable=True),
        sa.Column("component", sa.String(40), nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=False),
        sa.Column("emissions_g", sa.Float(), nullable=False),
    )
    sa.Table(
        "instance",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False, default=1),
        sa.Column("workers", sa.JSON(), nullable=False),
        sa.Column("launched_at", sa.Float(), nullable=False),
        sa.Column("ready_at", sa.Float(), nullable=True),
        sa.Column("released_at", sa.Float(), nullable=True),
    )
    sa.Table(
        "stage",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("stage", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False, default=1),
        sa.Column("instances", sa.Integer(), nullable=False),
        sa.Column("gpus_per_trial", sa.Integer(), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("planned_instances", sa.Integer(), nullable=True),
        sa.Column("speed", sa.Float(), nullable=True),
        sa.Column("estimated_left_s", sa.Float(), nullable=True),
    )
    sa.Table(
        "metric",
        md,
        sa.Column("id", sa.Integer(), primary_key=True),
        _run_id(),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("unit", sa.String(40), nullable=False),
        sa.Column("source", sa.String(40), nullable=True),
    )
    return md


def _run_id() -> sa.Column:
    return sa.Column("run_id", sa.String(120), sa.ForeignKey("run.id"), nullable=False, index=True)


def _trial_id() -> sa.Column:
    return sa.Column(
        "trial_id", sa.Integer(), sa.ForeignKey("trial.id"), nullable=False, index=True
    )


def upgrade() -> None:
    metadata().create_all(op.get_bind())


def downgrade() -> None:
    metadata().drop_all(op.get_bind())
