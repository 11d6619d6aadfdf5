"""The run store's Alembic migrations, on SQLite and on a real PostgreSQL server: a store from
before migrations upgrades on open with every row kept, a new store is at the newest revision,
a newer Basht's store is refused in one line, and the migrations make exactly `schema.py`."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Engine

from basht.errors import StoreError
from basht.store import Store
from basht.store.migrate import alembic_config, baseline_metadata, current_revisions, scripts
from basht.store.migrations import HEAD_REVISION, VERSION_TABLE
from basht.store.schema import Base
from basht.store.urls import resolve_url
from tests.store.test_open import _open_at_once

ROWS = 2  # per table


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL where nothing is yet: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("postgres_store")


def _engine(url: str) -> Engine:
    return create_engine(resolve_url(url))


def _value(table: Table, column: Any, i: int, made: dict[str, list[dict[str, Any]]]) -> Any:
    """Row `i`'s value for `column`: the parent's key for a foreign key, else one of its type."""
    for fk in column.foreign_keys:
        return made[fk.column.table.name][i][fk.column.name]
    kind = column.type
    if isinstance(kind, JSON):
        return {"row": i, "of": table.name, "list": [1.5, None]}
    if isinstance(kind, BigInteger):
        return 3 * 2**30 + i  # over 32 bits
    if isinstance(kind, Integer):
        return i + 1
    if isinstance(kind, Boolean):
        return i % 2 == 1
    if isinstance(kind, Float):
        return i + 0.25
    if isinstance(kind, DateTime):
        return datetime(2026, 1, 2 + i, 3, 4, 5)
    if isinstance(kind, String):  # Text too
        value = f"{column.name}-{i}"
        assert len(value) <= (kind.length or len(value)), f"{table.name}.{column.name}"
        return value
    raise AssertionError(f"no test value for {table.name}.{column.name} ({kind!r})")


def _store_from_before_migrations(url: str, without: dict[str, set[str]] | None = None) -> None:
    """A store as a release before migrations left it: the first revision's tables made with
    create_all, no version table, `ROWS` rows in every table. `without` takes columns out of
    tables afterwards (an older release's store); `*` takes the whole table."""
    engine = _engine(url)
    made: dict[str, list[dict[str, Any]]] = {}
    with engine.begin() as conn:
        old = baseline_metadata()
        old.create_all(conn)
        for table in old.sorted_tables:
            made[table.name] = [
                {c.name: _value(table, c, i, made) for c in table.columns} for i in range(ROWS)
            ]
            conn.execute(table.insert(), made[table.name])
        for table, columns in (without or {}).items():
            if "*" in columns:
                conn.execute(text(f"DROP TABLE {table}"))
            for column in columns - {"*"}:
                conn.execute(text(f'ALTER TABLE {table} DROP COLUMN "{column}"'))
    engine.dispose()


def _columns(url: str) -> dict[str, list[str]]:
    """The columns each store table there has now."""
    engine = _engine(url)
    try:
        inspector = inspect(engine)
        return {
            name: [c["name"] for c in inspector.get_columns(name)]
            for name in inspector.get_table_names()
            if name in Base.metadata.tables
        }
    finally:
        engine.dispose()


def _rows(
    url: str, columns: dict[str, list[str]] | None = None
) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every store table there, in key order (only `columns` of a table named there:
    a later revision adds columns, and the rows must keep the values they had)."""
    engine = _engine(url)
    try:
        there = MetaData()
        there.reflect(
            engine, only=[t for t in inspect(engine).get_table_names() if t in Base.metadata.tables]
        )
        columns = columns or {}
        with engine.connect() as conn:
            return {
                name: [
                    tuple(r)
                    for r in conn.execute(
                        select(*(table.c[c] for c in columns.get(name, table.c.keys()))).order_by(
                            *table.primary_key
                        )
                    )
                ]
                for name, table in there.tables.items()
            }
    finally:
        engine.dispose()


def _revisions(url: str) -> tuple[str, ...]:
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            return current_revisions(conn)
    finally:
        engine.dispose()


def _differences(url: str) -> list[Any]:
    """What alembic's autogenerate would change to make the store `schema.py`'s tables."""
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"version_table": VERSION_TABLE, "compare_type": True}
            )
            return compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()


def test_the_head_revision_that_opening_checks_is_the_newest_migration():
    assert scripts().get_current_head() == HEAD_REVISION


def test_a_new_store_is_exactly_the_schema_at_the_newest_revision(url):
    Store(url).close()
    assert _revisions(url) == (HEAD_REVISION,)
    assert _differences(url) == []
    assert all(rows == [] for rows in _rows(url).values())
    assert set(_rows(url)) == set(Base.metadata.tables)


def test_the_migrations_alone_make_exactly_the_schema_a_new_store_is_made_with(url):
    """Fails when schema.py changes without a migration that makes the change: a new store is
    made from schema.py and stamped with the newest revision, which must be the same thing."""
    engine = _engine(url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "head")
    engine.dispose()
    assert _revisions(url) == (HEAD_REVISION,)
    assert _differences(url) == []
    assert set(_rows(url)) == set(Base.metadata.tables)
    Store(url).close()  # and a store opens it as one of its own, with nothing to do
    assert _revisions(url) == (HEAD_REVISION,)


def test_a_store_from_before_migrations_upgrades_on_open_with_every_row_kept(url, tmp_path):
    _store_from_before_migrations(url)
    before, columns = _rows(url), _columns(url)
    assert set(before) == set(Base.metadata.tables) and all(len(r) == ROWS for r in before.values())
    assert _revisions(url) == ()

    store = Store(url, create=False)
    assert _revisions(url) == (HEAD_REVISION,)
    assert _rows(url, columns) == before
    assert _differences(url) == []
    assert [r.id for r in store.list_runs()] == ["id-1", "id-0"]  # newest first
    run_id = store.create_run(1, "t", "native", "local", tmp_path).id  # and it takes new rows
    assert store.get_run(run_id).experiment_id == 1
    store.close()
    Store(url).close()  # opened again: nothing more to do
    assert _revisions(url) == (HEAD_REVISION,)


def test_a_store_from_an_older_release_gets_the_tables_and_columns_it_lacks(url):
    """As opening did before migrations: added, not rebuilt; then stamped and migrated."""
    lacks = {"run": {"stop_reason", "measurement"}, "phase": {"attempt"}, "stage": {"*"}}
    _store_from_before_migrations(url, without=lacks)
    before, columns = _rows(url), _columns(url)

    store = Store(url)
    assert _revisions(url) == (HEAD_REVISION,)
    assert _rows(url)["stage"] == []
    after = _rows(url, columns)
    assert set(after) == set(Base.metadata.tables)
    assert {k: v for k, v in after.items() if k not in lacks} == {
        k: v for k, v in before.items() if k not in lacks
    }
    runs = {r.id: r for r in store.list_runs()}
    assert {r.stop_reason for r in runs.values()} == {None}
    assert [(p.run_id, p.attempt) for p in store.phases("id-0")] == [("id-0", 1)]
    assert len(store.trials("id-1")) == 1
    store.add_stage("id-0", stage=0, instances=1, gpus_per_trial=1, slots=1, started_at=1.0)
    assert [s.stage for s in store.stages("id-0")] == [0]


def test_a_store_at_a_revision_this_basht_does_not_know_is_refused_in_one_line(url):
    Store(url).close()
    engine = _engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'f00d0042'"))
    engine.dispose()
    with pytest.raises(StoreError) as refused:
        Store(url)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"store {url!r} is at schema revision 'f00d0042'")
    assert _revisions(url) == ("f00d0042",)  # left as it was


@pytest.mark.integration
def test_processes_opening_one_store_from_before_migrations_at_once_all_open_it(url):
    _store_from_before_migrations(url)
    before, columns = _rows(url), _columns(url)
    assert _open_at_once(url, 4) == [0] * 4
    assert _revisions(url) == (HEAD_REVISION,)
    assert _rows(url, columns) == before


@pytest.mark.integration
def test_opening_a_store_imports_alembic_only_when_it_is_not_up_to_date(tmp_path):
    """Worker processes, readers and `resume` open stores often; Alembic is for migrating."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    probe = (
        "import sys\n"
        "from basht.store import Store\n"
        f"Store({url!r}).close()\n"
        "print('alembic' in sys.modules)\n"
    )

    def imports_alembic() -> bool:
        proc = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip() == "True"

    assert not imports_alembic()  # a new store: made from the schema, stamped
    assert not imports_alembic()  # at the newest revision: one query
    (tmp_path / "store.db").unlink()
    _store_from_before_migrations(url)
    assert imports_alembic()  # an older Basht's store: migrated
