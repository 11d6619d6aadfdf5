"""A new store made without Alembic, and the lock every process opening a store takes first.

Most stores are new (the first run in a folder): their tables are created from the schema as it
is now and stamped with the newest revision, which the migrations test holds equal to what the
migrations would build, so a first run does not pay for importing Alembic (`basht.store.migrate`
is for stores an older Basht left).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, inspect, text
from sqlalchemy.engine import Connection, Engine

from basht.store.migrations import HEAD_REVISION, VERSION_TABLE
from basht.store.schema import Base

#: The PostgreSQL advisory lock that processes opening one database take while they create or
#: migrate its tables (any fixed number: it only has to be the same in every Basht).
SCHEMA_LOCK = 0x6261736874  # "basht"


@contextlib.contextmanager
def schema_lock(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that only one process opening the store holds at a time,
    committed when the block ends (rolled back, DDL included, if it raises)."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
        elif conn.dialect.name == "sqlite":
            # The sqlite3 module starts no transaction before DDL: start a write transaction
            # now, so the store's write lock is taken (or waited for) before anything is read.
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        yield conn
        conn.commit()


def _version_table() -> Table:
    """Alembic's version table as Alembic makes it (one primary-key column, its name)."""
    return Table(
        VERSION_TABLE,
        MetaData(),
        Column("version_num", String(32), nullable=False),
        PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
    )


def create_if_new(engine: Engine) -> bool:
    """Create the store's tables at the newest revision if the database holds none of them (and
    no version table); False, with nothing done, for any other database."""
    with schema_lock(engine) as conn:
        present = set(inspect(conn).get_table_names())
        if VERSION_TABLE in present or present & Base.metadata.tables.keys():
            return False  # a store already (another process's, or an older Basht's)
        Base.metadata.create_all(conn)
        version = _version_table()
        version.create(conn)
        conn.execute(version.insert().values(version_num=HEAD_REVISION))
    return True
