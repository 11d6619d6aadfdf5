"""Jobs may optimize the GPU power limit too: bso_jobs.optimize_power_limit, bso_power_profiles.

Jobs registered before this revision keep Zeus's behaviour (the new column defaults to false).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bso_jobs", recreate="never") as batch:
        batch.add_column(
            sa.Column(
                "optimize_power_limit", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )
    op.create_table(
        "bso_power_profiles",
        sa.Column("job_id", sa.String(length=400), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("power_limit_w", sa.Float(precision=53), nullable=False),
        sa.Column("time_s", sa.Float(precision=53), nullable=False),
        sa.Column("energy_j", sa.Float(precision=53), nullable=False),
        sa.Column("trial_number", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["bso_jobs.job_id"],
            name=op.f("fk_bso_power_profiles_job_id_bso_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "job_id", "batch_size", "power_limit_w", name=op.f("pk_bso_power_profiles")
        ),
    )


def downgrade() -> None:
    op.drop_table("bso_power_profiles")
    # ALTER TABLE ... DROP COLUMN (SQLite 3.35+), never a copy of the table: with foreign keys on,
    # dropping the old bso_jobs would cascade to every trial and arm.
    with op.batch_alter_table("bso_jobs", recreate="never") as batch:
        batch.drop_column("optimize_power_limit")
