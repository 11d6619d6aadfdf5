"""Alembic environment for the run store; run by `basht.store.migrate` when a store is opened.

Online only: `basht.store.migrate` hands over an open connection that already holds the schema
lock (BEGIN IMMEDIATE on SQLite, an advisory lock on PostgreSQL), inside one transaction.
"""

from __future__ import annotations

from typing import Any

from alembic import context

from basht.store.migrations import VERSION_TABLE
from basht.store.schema import Base


def include_name(name: str | None, type_: str, _parents: dict[str, Any]) -> bool:
    """Only the store's own tables: Optuna's study or the BSO server may share its database."""
    return type_ != "table" or name in Base.metadata.tables


config = context.config
connection = config.attributes.get("connection")

if connection is None:
    raise RuntimeError("the run store migrates itself when opened: open it with basht.store.Store")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    include_name=include_name,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
