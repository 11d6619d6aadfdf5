"""Create the BSO tables: bso_jobs, bso_arms, bso_trials.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bso_jobs",
        sa.Column("job_id", sa.String(length=400), nullable=False),
        sa.Column("job_id_prefix", sa.String(length=300), nullable=False),
        sa.Column("batch_sizes", sa.JSON(), nullable=False),
        sa.Column("default_batch_size", sa.Integer(), nullable=False),
        sa.Column("eta_knob", sa.Float(precision=53), nullable=False),
        sa.Column("beta_knob", sa.Float(precision=53), nullable=True),
        sa.Column("target_metric", sa.Float(precision=53), nullable=False),
        sa.Column("higher_is_better_metric", sa.Boolean(), nullable=False),
        sa.Column("max_epochs", sa.Integer(), nullable=False),
        sa.Column("num_pruning_rounds", sa.Integer(), nullable=False),
        sa.Column("window_size", sa.Integer(), nullable=False),
        sa.Column("mab_prior_mean", sa.Float(precision=53), nullable=False),
        sa.Column("mab_prior_precision", sa.Float(precision=53), nullable=False),
        sa.Column("mab_num_explorations", sa.Integer(), nullable=False),
        sa.Column("mab_seed", sa.BigInteger(), nullable=True),
        sa.Column("max_power", sa.Float(precision=53), nullable=False),
        sa.Column("number_of_gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_model", sa.String(length=300), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("min_cost", sa.Float(precision=53), nullable=True),
        sa.Column("min_cost_batch_size", sa.Integer(), nullable=False),
        sa.Column("rng_state", sa.Text(), nullable=True),
        sa.Column("pruning_note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_bso_jobs")),
    )
    op.create_table(
        "bso_arms",
        sa.Column("job_id", sa.String(length=400), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("param_mean", sa.Float(precision=53), nullable=False),
        sa.Column("param_precision", sa.Float(precision=53), nullable=False),
        sa.Column("reward_precision", sa.Float(precision=53), nullable=False),
        sa.Column("num_observations", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["bso_jobs.job_id"],
            name=op.f("fk_bso_arms_job_id_bso_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "batch_size", name=op.f("pk_bso_arms")),
    )
    op.create_table(
        "bso_trials",
        sa.Column("job_id", sa.String(length=400), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("start_timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end_timestamp", sa.DateTime(timezone=True), nullable=True),
        sa.Column("time_s", sa.Float(precision=53), nullable=True),
        sa.Column("energy_j", sa.Float(precision=53), nullable=True),
        sa.Column("converged", sa.Boolean(), nullable=True),
        sa.Column("epochs", sa.Integer(), nullable=True),
        sa.Column("metric", sa.Float(precision=53), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["bso_jobs.job_id"],
            name=op.f("fk_bso_trials_job_id_bso_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "trial_number", name=op.f("pk_bso_trials")),
    )


def downgrade() -> None:
    op.drop_table("bso_trials")
    op.drop_table("bso_arms")
    op.drop_table("bso_jobs")
