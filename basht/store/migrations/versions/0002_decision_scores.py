"""The decision log keeps what a multi-objective algorithm was told: a vector, not one value.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-27

A report to an algorithm that ranks several objectives (or keeps constraints) is a tuple of
costs: (constraint violation, objective 1, ...), each signed so that smaller is better. Replaying
the log (`basht resume`) needs it exactly, so it is stored beside the single `value`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("decision")}
    if "scores" in columns:  # a store that lost its version table, made after this revision
        return
    with op.batch_alter_table("decision") as batch:
        batch.add_column(sa.Column("scores", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("decision") as batch:
        batch.drop_column("scores")
