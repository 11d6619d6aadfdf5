"""The PostgreSQL path against a real PostgreSQL server started for the tests: migrations, the
protocol, row locks with several workers, and the same decisions as on SQLite."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from basht.bso.db.migrate import upgrade
from tests.bso.support import (
    basht,
    bso_load,
    check_hammered,
    hammer,
    job_body,
    result_body,
    seed_revision_0001,
)

asyncpg = pytest.importorskip(
    "asyncpg", reason="the PostgreSQL path needs asyncpg (the `bso` extra)"
)


def _create_database(url: str, name: str) -> str:
    async def create() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(create())
    return url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="module")
def pg_db(postgres_url: str) -> str:
    """A migrated database of its own."""
    url = _create_database(postgres_url, "bso_tests")
    first = basht("bso", "migrate", "--db", url)
    assert first.returncode == 0, first.stderr
    assert "migrated from empty to revision 0004" in first.stdout
    again = basht("bso", "migrate", "--db", url)
    assert again.returncode == 0 and "already at revision 0004" in again.stdout
    return url


def test_serve_refuses_a_database_that_was_not_migrated(postgres_url):
    url = _create_database(postgres_url, "bso_fresh")
    proc = basht("bso", "serve", "--db", url, "--port", "1")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no BSO tables" in lines[0] and "basht bso migrate" in lines[0]
    assert "postgres@" in lines[0]  # the URL is named (without a password)


def test_offline_migration_prints_postgresql_ddl(postgres_url):
    proc = basht("bso", "migrate", "--db", postgres_url, "--sql")
    assert proc.returncode == 0, proc.stderr
    assert "CREATE TABLE bso_jobs" in proc.stdout
    assert "FLOAT(53)" in proc.stdout  # double precision: stored knobs compare exactly


def _script(http: httpx.Client, job_id: str) -> list[int]:
    """A fixed history (seeded job, one pruning round so arms start with infinite precision)."""
    body = job_body(
        job_id,
        mab_seed=5,
        num_pruning_rounds=1,
        batch_sizes=[16, 32, 64, 128],
        default_batch_size=64,
    )
    assert http.post("/jobs", json=body).status_code == 201
    assert http.post("/jobs", json=body).status_code == 200
    assert http.post("/jobs", json={**body, "eta_knob": 0.25}).status_code == 409
    chosen = []
    for i in range(14):
        trial = http.get("/jobs/batch_size", params={"job_id": job_id}).json()
        chosen.append(trial["batch_size"])
        cost = 1.0 + (trial["batch_size"] % 48) / 100 + (i % 3) / 50
        answer = http.post(
            "/report",
            json=result_body(trial, metric=0.9, time=10 * cost, energy=100 * cost, current_epoch=5),
        ).json()
        assert answer["stop_train"] is True
        assert http.patch("/trials", json=trial).status_code == 200
    return chosen


def test_postgres_and_sqlite_servers_decide_alike(serve, pg_db, tmp_path):
    on_pg = serve(db=pg_db)
    on_sqlite = serve()
    with on_pg.client() as pg, on_sqlite.client() as lite:
        chosen_pg = _script(pg, "same-1")
        chosen_sqlite = _script(lite, "same-1")
        state = pg.get("/jobs", params={"job_id": "same-1"}).json()
        assert pg.delete("/jobs", params={"job_id": "same-1"}).status_code == 200
        assert pg.delete("/jobs", params={"job_id": "same-1"}).status_code == 404
    assert chosen_pg == chosen_sqlite
    assert state["stage"] == "MAB" and len(state["trials"]) == 14


def test_twenty_clients_through_two_workers_on_postgres(serve, pg_db):
    server = serve("--workers", "2", db=pg_db)
    seen = hammer(server.url, "crowd-pg", clients=20, epochs=3)
    check_hammered(server.url, "crowd-pg", seen)


@pytest.mark.integration
def test_fifty_clients_on_recurring_jobs_through_four_workers_lose_nothing(serve, pg_db):
    """benchmarks/bso_load.py, shorter: 50 clients, four to a job, each running 3 recurrences
    (register, trial, epoch reports, end; one run in seven crashes) at once through 4 server
    processes, while 4 readers read the jobs' states. Checked against the database: no report
    answered 2xx is missing, no trial number was handed out twice, no request failed, and no
    state read showed a moment that never was."""
    load = bso_load()
    server = serve("--workers", "4", "--log-level", "warning", db=pg_db)
    ledger = asyncio.run(
        load.drive(server.url, clients=50, recurrences=3, epochs=4, timeout_s=300, prefix="pgload")
    )
    verdict = load.check(ledger, asyncio.run(load.stored_trials(pg_db, "pgload")))
    assert ledger.unfinished_clients == 0, ledger.failures
    assert verdict.errors == 0 and verdict.server_errors_5xx == 0, ledger.failures
    assert verdict.lost == 0 and verdict.duplicates == 0, verdict
    assert ledger.reads > 0 and verdict.torn_reads == 0, ledger.failures
    assert len(ledger.handed_out) == verdict.stored == 150
    assert len(ledger.ended) == 150
    assert "Traceback" not in server.log.read_text()


def test_reading_a_job_waits_for_a_change_in_flight_and_shows_all_of_it(serve, pg_db):
    """GET /jobs read the job, then its arms, then its trials, each statement seeing what was
    committed when it began: a report committed in between showed a Succeeded trial cheaper than
    the job's minimum cost, or a minimum of None (seen under load). Here a transaction holds the
    job's row lock the way a server process reporting does; the read must wait for it."""
    server = serve(db=pg_db)
    with server.client() as http:
        assert http.post("/jobs", json=job_body("inflight-1")).status_code == 201
        trial = http.get("/jobs/batch_size", params={"job_id": "inflight-1"}).json()

    async def report_while_reading() -> tuple[bool, dict]:
        writer = await asyncpg.connect(pg_db)
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                async with writer.transaction():
                    job = "inflight-1"
                    await writer.execute("SELECT 1 FROM bso_jobs WHERE job_id = $1 FOR UPDATE", job)
                    await writer.execute(
                        "UPDATE bso_trials SET status = 'Succeeded', converged = true, "
                        "time_s = 10, energy_j = 100, epochs = 1, metric = 0.9 "
                        "WHERE job_id = $1 AND trial_number = $2",
                        job,
                        trial["trial_number"],
                    )
                    await writer.execute(
                        "UPDATE bso_jobs SET min_cost = 15050 WHERE job_id = $1", job
                    )
                    reading = asyncio.create_task(http.get("/jobs", params={"job_id": job}))
                    await asyncio.sleep(1.0)
                    waited = not reading.done()
                return waited, (await reading).json()
        finally:
            await writer.close()

    waited, state = asyncio.run(report_while_reading())
    assert waited, f"the read did not wait for the write in flight: {state}"
    assert state["min_cost"] == 15050
    assert [t["status"] for t in state["trials"]] == ["Succeeded"]


def test_values_postgresql_cannot_store_are_422s_and_store_nothing(serve, pg_db):
    """PostgreSQL's INTEGER is 32-bit, its VARCHARs have lengths and its text cannot hold NUL:
    such values are refused with a 422 naming the field, never a 500 from the database."""
    server = serve(db=pg_db)
    with server.client() as http:
        for field, value in [
            ("max_epochs", 2**31),
            ("number_of_gpus", 2**40),
            ("window_size", 2**31),
            ("job_id", "pgbad-" + "x" * 400),
            ("gpu_model", "x" * 301),
            ("job_id", "pgbad-\x00"),
            ("gpu_model", "A\x00100"),
        ]:
            response = http.post("/jobs", json=job_body("pgbad-1", **{field: value}))
            assert response.status_code == 422, (field, response.text)
            assert response.json()["detail"][0]["loc"][:2] == ["body", field]
        too_big = http.post("/jobs", json=job_body("pgbad-1", batch_sizes=[1024, 2**31]))
        assert too_big.status_code == 422
        assert http.get("/jobs", params={"job_id": "pgbad-1"}).status_code == 404
        assert http.get("/jobs/batch_size", params={"job_id": "pg\x00bad"}).status_code == 422
        assert http.post("/jobs", json=job_body("pgbad-2", mab_seed=2**63 - 1)).status_code == 201
        trial = http.get("/jobs/batch_size", params={"job_id": "pgbad-2"}).json()
        for field in ("trial_number", "batch_size", "current_epoch"):
            response = http.post("/report", json=result_body(trial, **{field: 2**31}))
            assert response.status_code == 422, (field, response.text)
        assert http.patch("/trials", json={**trial, "trial_number": 2**31}).status_code == 422
        assert http.post("/report", json=result_body(trial, metric=0.9)).status_code == 200
        assert http.get("/jobs", params={"job_id": "pgbad-2"}).json()["trials"][0]["converged"]


def test_a_client_killed_mid_probe_is_abandoned_on_postgres(serve, pg_db, tmp_path):
    from tests.bso.test_abandon import TIMEOUT, kill_a_probe_then_prune_on

    server = serve("--workers", "2", "--trial-timeout", str(TIMEOUT), db=pg_db)
    kill_a_probe_then_prune_on(server.url, "killed-pg", tmp_path)


def test_upgrading_a_postgres_database_from_revision_0001(serve, postgres_url):
    from tests.bso.test_migrations import LONG_AGO, check_upgraded_from_0001

    url = _create_database(postgres_url, "bso_from_0001")
    asyncio.run(upgrade(url, "0001"))
    asyncio.run(seed_revision_0001(url, "old-pg", LONG_AGO))
    migrated = basht("bso", "migrate", "--db", url)
    assert migrated.returncode == 0, migrated.stderr
    assert "migrated from 0001 to revision 0004" in migrated.stdout
    check_upgraded_from_0001(serve("--trial-timeout", "3600", db=url), "old-pg")
