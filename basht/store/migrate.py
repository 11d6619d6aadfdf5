"""Bring a run store to the newest schema with the Alembic migrations shipped in the package.

`Store` calls `migrate` only when the store's version table does not already name the newest
revision (a new store, one from a release before migrations, one an older Basht left), so Alembic
is imported only then. Everything happens in one transaction under a schema lock that every
process opening the same store takes: on SQLite a write transaction (BEGIN IMMEDIATE), on
PostgreSQL an advisory lock; the process that waited finds what the one before it did.
"""

from __future__ import annotations

import functools
import io
import logging
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import BigInteger, Integer, MetaData, inspect, text
from sqlalchemy.engine import Connection, Engine

from basht.errors import StoreError
from basht.store.creation import schema_lock
from basht.store.migrations import BASELINE_REVISION, VERSION_TABLE

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """The migrations' config, from code (no alembic.ini); `connection` is the one env.py uses."""
    cfg = Config(stdout=io.StringIO())
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@functools.cache
def scripts() -> ScriptDirectory:
    """The shipped revisions, read once per process."""
    return ScriptDirectory.from_config(alembic_config())


def baseline_metadata() -> MetaData:
    """The tables of the first revision, which a store from before migrations is brought to."""
    module = scripts().get_revision(BASELINE_REVISION).module
    return module.metadata()


def _baseline_tables() -> set[str]:
    return set(baseline_metadata().tables)


def current_revisions(conn: Connection) -> tuple[str, ...]:
    """The revisions the store's version table names (none: a new store or one from before
    migrations)."""
    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return context.get_current_heads()


def migrate(engine: Engine, shown: str) -> tuple[str | None, str]:
    """Bring the store behind `engine` (`shown` names it in messages) to the newest revision;
    returns the revision it was at (None: none) and the one it is at now. Raises StoreError for
    a store at a revision this Basht does not know (a newer Basht's)."""
    script = scripts()
    head = script.get_current_head()
    assert head is not None, "the package ships at least one migration"
    with schema_lock(engine) as conn:
        heads = current_revisions(conn)
        if heads == (head,):
            return head, head  # another process migrated it while this one waited
        known = {s.revision for s in script.walk_revisions()}
        if len(heads) > 1 or not set(heads) <= known:
            raise StoreError(
                f"store {shown!r} is at schema revision {', '.join(map(repr, heads))}, which "
                f"this Basht does not know (its newest is {head!r}): a newer Basht wrote it; "
                "upgrade Basht to open it"
            )
        before = heads[0] if heads else None
        cfg = alembic_config(conn)
        at = before
        if before is None and set(inspect(conn).get_table_names()) & _baseline_tables():
            # A store from a release before migrations (another's tables alone, Optuna's say,
            # make no store: the migrations create ours beside them).
            log.info("store %s: from before migrations, brought to %s", shown, BASELINE_REVISION)
            bring_to_baseline(conn)
            command.stamp(cfg, BASELINE_REVISION)
            at = BASELINE_REVISION
        if at != head:
            log.info("store %s: migrating from %s to %s", shown, at or "empty", head)
            command.upgrade(cfg, "head")
        (after,) = current_revisions(conn)
        return before, after


def bring_to_baseline(conn: Connection) -> None:
    """Bring a store written by a release before migrations to the first revision's tables, by
    adding the tables and columns it lacks.

    Columns are only ever added (nullable or with a default), or on PostgreSQL widened to 64 bits
    (`_widen`), so no stored record is touched.
    """
    metadata = baseline_metadata()
    metadata.create_all(conn)
    inspector = inspect(conn)
    for table in metadata.sorted_tables:
        present = {c["name"]: c["type"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                _widen(conn, table.name, column, present[column.name])
                continue
            kind = column.type.compile(dialect=conn.dialect)
            default = column.default.arg if column.default is not None else None
            clause = f" DEFAULT {default!r}" if isinstance(default, (int, float)) else ""
            log.info("store: adding column %s.%s", table.name, column.name)
            conn.execute(
                text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}{clause}')
            )


def _widen(conn: Connection, table: str, column: Any, stored: Any) -> None:
    """A column made 64-bit since the store was created (a checkpoint's size): PostgreSQL holds
    it to the 32 bits it was made with; SQLite stores any integer in any integer column."""
    wide = isinstance(column.type, BigInteger) and not isinstance(stored, BigInteger)
    if wide and isinstance(stored, Integer) and conn.dialect.name == "postgresql":
        log.info("store: widening column %s.%s to BIGINT", table, column.name)
        conn.execute(text(f'ALTER TABLE {table} ALTER COLUMN "{column.name}" TYPE BIGINT'))
