"""Upgrading a database an older server left: every row kept, running trials not abandoned by
the upgrade itself; and back down again."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta

import sqlalchemy
from alembic import command

from basht.bso.db.migrate import alembic_config, upgrade
from tests.bso.support import basht, seed_revision_0001
from tests.bso.test_server import next_trial, state

LONG_AGO = datetime.now(UTC) - timedelta(days=2)


def check_upgraded_from_0001(server, job_id: str) -> None:
    """The rows seeded at 0001 are all there, and the probe that was running when the database
    was upgraded is still waited for, though it started two days ago."""
    with server.client() as http:
        concurrent = next_trial(http, job_id)
        assert concurrent == {"job_id": job_id, "batch_size": 1024, "trial_number": 3}
        s = state(http, job_id)
    done, running, new = s["trials"]
    assert (done["status"], done["converged"], done["time"], done["energy"], done["epochs"]) == (
        "Succeeded",
        True,
        10.0,
        100.0,
        3,
    )
    assert done["last_report"] is None  # finished before the upgrade: nothing to invent
    assert (running["batch_size"], running["status"]) == (512, "Dispatched")
    assert datetime.fromisoformat(running["started"]) < LONG_AGO + timedelta(seconds=1)
    assert datetime.fromisoformat(running["last_report"]) > datetime.now(UTC) - timedelta(hours=1)
    assert new["type"] == "Concurrent"
    assert s["min_cost"] == 0.5 * 100 + 0.5 * 3000 * 10


def test_upgrading_a_sqlite_database_from_revision_0001(serve, tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    asyncio.run(upgrade(url, "0001"))
    asyncio.run(seed_revision_0001(url, "old-1", LONG_AGO))
    migrated = basht("bso", "migrate", "--db", url)
    assert migrated.returncode == 0, migrated.stderr
    assert "migrated from 0001 to revision 0004" in migrated.stdout
    check_upgraded_from_0001(serve("--trial-timeout", "3600", db=url), "old-1")


def test_downgrading_to_0001_turns_abandoned_trials_into_failed_ones(tmp_path):
    """The older server knows no Abandoned status; Failed is what it ignores alike."""
    path = tmp_path / "down.db"
    asyncio.run(upgrade(f"sqlite:///{path}", "0001"))
    asyncio.run(seed_revision_0001(f"sqlite:///{path}", "down-1", LONG_AGO))
    asyncio.run(upgrade(f"sqlite:///{path}"))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE bso_trials SET status = 'Abandoned' WHERE trial_number = 2")
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0001")
    finally:
        engine.dispose()
    with sqlite3.connect(path) as db:
        statuses = db.execute("SELECT status FROM bso_trials ORDER BY trial_number").fetchall()
        columns = {row[1] for row in db.execute("PRAGMA table_info(bso_trials)")}
    assert statuses == [("Succeeded",), ("Failed",)]
    assert "last_report_at" not in columns
