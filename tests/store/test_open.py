"""Opening a store that does not exist yet from several processes at once (a run starting while
`basht runs` or a test polls it): every one of them opens it, on SQLite and on PostgreSQL."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from basht.store import Store

pytestmark = pytest.mark.integration


def _open(url: str, barrier) -> None:
    barrier.wait()
    Store(url).list_runs()


def _open_at_once(url: str, processes: int) -> list[int | None]:
    """The exit codes of `processes` processes that open `url` at the same moment."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes)
    procs = [ctx.Process(target=_open, args=(url, barrier)) for _ in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    return [p.exitcode for p in procs]


def test_processes_creating_one_fresh_store_at_once_all_open_it(tmp_path: Path):
    for i in range(3):
        url = f"sqlite:///{tmp_path / f'fresh-{i}.db'}"
        assert _open_at_once(url, 4) == [0] * 4, f"round {i}"


def test_processes_creating_the_tables_of_one_fresh_database_at_once_all_open_it(postgres):
    for i in range(2):
        url = postgres.create_database("fresh")
        assert _open_at_once(url, 6) == [0] * 6, f"round {i}"
