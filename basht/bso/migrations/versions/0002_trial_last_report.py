"""Trials remember their latest report, so a silent one can be abandoned: bso_trials.last_report_at.

Trials still running when the database is upgraded get the upgrade's time as their latest report:
the server before this revision kept no such time, and a live trial must not be abandoned only
because it started long ago.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_trials = sa.table(
    "bso_trials",
    sa.column("status", sa.String(16)),
    sa.column("last_report_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    with op.batch_alter_table("bso_trials") as batch:
        batch.add_column(sa.Column("last_report_at", sa.DateTime(timezone=True), nullable=True))
    # CURRENT_TIMESTAMP on SQLite (UTC, as the server writes it), now() on PostgreSQL.
    op.execute(
        _trials.update()
        .where(_trials.c.status == "Dispatched")
        .values(last_report_at=sa.func.now())
    )


def downgrade() -> None:
    # The older server knows no Abandoned trials; Failed ones are ignored by its decisions alike.
    op.execute(_trials.update().where(_trials.c.status == "Abandoned").values(status="Failed"))
    with op.batch_alter_table("bso_trials") as batch:
        batch.drop_column("last_report_at")
