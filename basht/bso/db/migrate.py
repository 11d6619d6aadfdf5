"""Apply and check the committed Alembic migrations of the BSO tables, from code.

The migrations ship inside the package (`basht/bso/migrations/`), so no alembic.ini or repository
checkout is needed (Zeus shipped no migration versions at all and generated them on deploy).
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.exc import DBAPIError, OperationalError

from basht.bso.db.engine import async_url, open_engine, redact
from basht.bso.errors import BSOError

MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"
VERSION_TABLE = "bso_alembic_version"


def alembic_config(url: str | None = None, stdout: Any = None) -> Config:
    cfg = Config(stdout=stdout or io.StringIO())
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", async_url(url).render_as_string(hide_password=False))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the package ships at least one migration"
    return head


async def upgrade(url: str, revision: str = "head") -> tuple[str | None, str]:
    """Bring the database at `url` to `revision` (the newest by default); returns (before,
    after). An older revision is for tests that upgrade a database as an older server left it."""
    engine = open_engine(url)
    try:
        async with engine.begin() as conn:
            before = await conn.run_sync(_current)
            await conn.run_sync(_upgrade, revision)
            after = await conn.run_sync(_current)
    except (OperationalError, DBAPIError, OSError) as err:
        raise BSOError(f"database {redact(url)!r}: cannot migrate ({_reason(err)})") from None
    finally:
        await engine.dispose()
    assert after is not None
    return before, after


async def current(url: str) -> str | None:
    """The revision the database at `url` is at (None: no BSO tables yet)."""
    engine = open_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_current)
    except (OperationalError, DBAPIError, OSError) as err:
        raise BSOError(f"database {redact(url)!r}: cannot connect ({_reason(err)})") from None
    finally:
        await engine.dispose()


def upgrade_sql(url: str) -> str:
    """The SQL that `upgrade` would run, for a DBA to apply by hand (offline mode)."""
    out = io.StringIO()
    command.upgrade(alembic_config(url, stdout=out), "head", sql=True)
    return out.getvalue()


def ensure_ready(url: str) -> str:
    """Before serving: migrate an embedded SQLite file; require an up-to-date server database.

    A shared database is migrated on purpose (`basht bso migrate`), never as a side effect of
    starting a server, so a rolling restart cannot race a schema change.
    """
    if async_url(url).get_backend_name() == "sqlite":
        return asyncio.run(upgrade(url))[1]
    at = asyncio.run(current(url))
    head = head_revision()
    if at != head:
        state = "has no BSO tables" if at is None else f"is at revision {at}, not {head}"
        raise BSOError(f"database {redact(url)!r} {state}; run `basht bso migrate --db URL` first")
    return at


def _current(sync_conn: Any) -> str | None:
    context = MigrationContext.configure(sync_conn, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def _upgrade(sync_conn: Any, revision: str) -> None:
    cfg = alembic_config()
    cfg.attributes["connection"] = sync_conn
    command.upgrade(cfg, revision)


def _reason(err: BaseException) -> str:
    orig = getattr(err, "orig", None) or err
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
