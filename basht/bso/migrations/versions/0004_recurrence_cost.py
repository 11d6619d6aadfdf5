"""The early-stopping bound counts recurrences: bso_jobs.failed_cost, the cost of the runs that
failed since the job's last converged run.

Jobs stored before this revision start from 0: their next converged run counts alone, as before.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bso_jobs", recreate="never") as batch:
        batch.add_column(
            sa.Column("failed_cost", sa.Float(precision=53), nullable=False, server_default="0")
        )


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite 3.35+), never a copy of the table: with foreign keys on,
    # dropping the old bso_jobs would cascade to every trial and arm.
    with op.batch_alter_table("bso_jobs", recreate="never") as batch:
        batch.drop_column("failed_cost")
