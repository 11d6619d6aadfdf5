"""Async database engines for the server: SQLite (aiosqlite) embedded, PostgreSQL (asyncpg) at scale.

Job state must stay consistent with several server processes, so serialization lives in the
database, never in process memory: every SQLite transaction starts with BEGIN IMMEDIATE (one
writer at a time, others wait on the busy timeout), and on PostgreSQL each request locks its job
row with SELECT ... FOR UPDATE (see `basht.bso.service`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from basht.bso.errors import BSOError

# Which async driver a plain URL gets, and which sync drivers we swap for it.
ASYNC_DRIVERS = {"sqlite": "aiosqlite", "postgresql": "asyncpg", "mysql": "asyncmy"}
SYNC_DRIVERS = {"pysqlite", "psycopg2", "pg8000", "pymysql", "mysqldb", "mysqlconnector"}
SQLITE_BUSY_TIMEOUT_S = 60.0


def async_url(url: str) -> URL:
    """`url` with an async driver: sqlite:///x.db -> sqlite+aiosqlite:///x.db, postgresql:// ->
    postgresql+asyncpg://; an explicit async driver is kept."""
    try:
        parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    except ArgumentError:
        raise BSOError(f"database URL {redact(url)!r} is not a SQLAlchemy URL") from None
    backend, _, driver = parsed.drivername.partition("+")
    if not driver or driver in SYNC_DRIVERS:
        if backend not in ASYNC_DRIVERS:
            raise BSOError(
                f"database URL {redact(url)!r}: no async driver known for {backend!r}; "
                "name one, e.g. postgresql+asyncpg://"
            )
        parsed = parsed.set(drivername=f"{backend}+{ASYNC_DRIVERS[backend]}")
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise BSOError(
            f"database URL {redact(url)!r}: an in-memory SQLite database is not shared between "
            "connections or server processes; give a file, e.g. sqlite:///bso.db"
        )
    return parsed


def is_sqlite(url: str | URL) -> bool:
    parsed = url if isinstance(url, URL) else async_url(url)
    return parsed.get_backend_name() == "sqlite"


def _check_sqlite_opens(parsed: URL, url: str) -> None:
    """Open the SQLite file once, synchronously, so a path that cannot be a database (a folder,
    no permission) is a BSOError here. Through aiosqlite the same failure also leaves a worker
    thread behind that prints a traceback once the event loop has closed."""
    database = parsed.database or ""
    if database.startswith("file:"):
        return  # a URI with its own options: left to the driver
    try:
        sqlite3.connect(Path(database).expanduser(), timeout=SQLITE_BUSY_TIMEOUT_S).close()
    except sqlite3.Error as err:
        raise BSOError(f"database {redact(url)!r}: cannot open it ({err})") from None


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy's BEGIN below own the transactions instead of the sqlite3 module.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
    cursor.execute("PRAGMA journal_mode=WAL")
    # WAL + NORMAL: no corruption on a crash; a power cut may lose the last commits only.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(conn: Any) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def open_engine(url: str, echo: bool = False) -> AsyncEngine:
    """An engine for `url`; a SQLite file's folder is created if missing."""
    parsed = async_url(url)
    kwargs: dict[str, Any] = {"echo": echo}
    if parsed.get_backend_name() == "sqlite":
        Path(parsed.database or "").expanduser().parent.mkdir(parents=True, exist_ok=True)
        _check_sqlite_opens(parsed, url)
        kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_S}
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_async_engine(parsed, **kwargs)
    except (ArgumentError, ValueError) as err:
        raise BSOError(f"database URL {redact(url)!r}: {err}") from None
    except ImportError as err:
        # basht[bso] brings the SQLite and PostgreSQL drivers; others are the user's to add.
        driver = parsed.get_driver_name()
        extra = "basht[bso]" if driver in ("aiosqlite", "asyncpg") else driver
        raise BSOError(
            f"database URL {redact(url)!r}: its driver is not installed ({err}); "
            f"pip install '{extra}'"
        ) from None
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_connect)
        event.listen(engine.sync_engine, "begin", _sqlite_begin)
    return engine


def redact(url: str) -> str:
    """The URL for logs and messages, password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
